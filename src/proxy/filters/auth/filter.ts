// Authentication and authorization per route (issue 21): `jwt` (bearer tokens verified with jose
// against the route's JWKS), `rbac` (allow/deny rules by method, client certificate, claims and
// client address) and `extAuthz` (Envoy's Authorization/Check over gRPC), in that order, before
// any attempt and before the route's rate limits (a refused caller spends no token).
//
// Refusals: a token missing or not verified → 16 UNAUTHENTICATED (decided_by jwt); a rule that
// denies → 7 PERMISSION_DENIED (rbac; in shadow mode only counted and logged); the check's denial
// → its status code and message (ext_authz), its headers on the status; a check that fails or
// times out → 7 (ext_authz) unless failOpen. Each decision is counted in dojang_auth_decisions_total.
// Nothing secret is logged: jose's errors are mapped to fixed messages (claims.ts), the token and
// the keys never appear.
//
// The stages compose as Envoy's filters do: each reads and changes the call's request head, so
// each sees the request as the stages before it left it (see AuthCall).
//
// Cost: a listener none of whose routes has auth gets no factory; a route without it gets null
// from one array lookup. A route with it gets one small object per call; the request head is held
// while a new token is verified (a token verified before is taken from the route's cache at once)
// or the check is asked (a side call on the service's cluster: its request's bytes, one stream,
// one object and one timer; upstream/unary.ts, upstream/side-call.ts).
import type { JWTVerifyOptions } from "jose";
import type { Logger } from "pino";
import type { ExtAuthzConfig, JwtConfig, RouteConfig } from "../../../config/index.js";
import { Code, outcome } from "../../../translate/index.js";
import type { CallFilter, FilterCall, FilterFactory } from "../../call/filter.js";
import type { AccessRecord } from "../../observe/log.js";
import type { OutgoingHeaders } from "../../call/headers.js";
import type { ExtAuthzResult, Metrics } from "../../observe/metrics.js";
import type { CompiledRoute } from "../../router.js";
import type { Cluster } from "../../upstream/cluster.js";
import type { SideCallHandle, SideOutcome } from "../../upstream/side-call.js";
import type { SideClusters } from "../../upstream/side-clusters.js";
import type { CheckResponseFields } from "../../../translate/ext-authz-wire.js";
import { bearerToken, claimsHeaderValue, issuedInFuture, jwtFailureMessage, IAT_IN_FUTURE } from "./claims.js";
import { mapCheckResponse } from "./check.js";
import { check, checkTarget, type CheckTarget } from "./ext-authz.js";
import { joseModule, jwksFor, type Jwks } from "./jwks.js";
import { compileRbac, decideRbac, type CompiledRbac } from "./rules.js";

export interface AuthDeps {
  readonly listener: string;
  readonly metrics: Metrics;
  readonly log: Logger;
  /** monotonic milliseconds (JWKS ages) */
  readonly now: () => number;
  /** the address clusters of the external checks (shared by every snapshot) */
  readonly side: SideClusters;
  /** the snapshot's clusters (a cluster extAuthz names is one of them) */
  readonly clusters: ReadonlyMap<string, Cluster>;
}

type Stage = "jwt" | "rbac" | "ext_authz";
type Counters = Record<Stage, Record<"allow" | "deny" | "shadow_deny" | "error_allow", { inc(): void }>>;

/** Verified tokens kept per route (Envoy's jwt_cache_config): at most this many, oldest dropped. */
export const TOKEN_CACHE_SIZE = 1000;
/** Longer tokens are verified every time (the cache stays within ~8 MiB). */
const MAX_CACHED_TOKEN = 8192;
/** A verified token without exp is kept this long. */
const NO_EXP_KEEP_MS = 60_000;

/**
 * Tokens already verified on this route, with their claims, until their exp (plus the clock skew):
 * a client that sends the same token call after call pays the signature check once. A key
 * withdrawn from the JWKS does not end a cached token early (as with Envoy's cache); a reload
 * starts a new cache. Bounded: a client cycling tokens only evicts the oldest.
 */
export class TokenCache {
  private readonly m = new Map<string, { readonly claims: Record<string, unknown>; readonly untilMs: number }>();
  constructor(private readonly skewMs: number) {}
  get(token: string, nowMs: number): Record<string, unknown> | undefined {
    const e = this.m.get(token);
    if (e === undefined) return undefined;
    if (nowMs <= e.untilMs) return e.claims;
    this.m.delete(token);
    return undefined;
  }
  set(token: string, claims: Record<string, unknown>, nowMs: number): void {
    const exp = claims["exp"];
    const untilMs = typeof exp === "number" ? exp * 1000 + this.skewMs : nowMs + NO_EXP_KEEP_MS;
    if (token.length > MAX_CACHED_TOKEN) return;
    if (this.m.size >= TOKEN_CACHE_SIZE) this.m.delete(this.m.keys().next().value!);
    this.m.set(token, { claims, untilMs });
  }
}

interface Plan {
  readonly jwt: {
    readonly cfg: JwtConfig;
    readonly jwks: Jwks;
    readonly opts: JWTVerifyOptions;
    readonly cache: TokenCache;
    /** the claims header's binary twin ("<claimsHeader>-bin"), removed with the client's copy */
    readonly claimsBin: string;
  } | null;
  readonly rbac: CompiledRbac | null;
  readonly ext: { readonly target: CheckTarget; readonly cfg: ExtAuthzConfig; readonly calls: Record<ExtAuthzResult, { inc(): void }> } | null;
  readonly counters: Counters;
  readonly log: Logger;
}

function jwtPlan(cfg: JwtConfig, deps: AuthDeps): NonNullable<Plan["jwt"]> {
  const opts: JWTVerifyOptions = { issuer: cfg.issuer, algorithms: [...cfg.algorithms], clockTolerance: cfg.clockSkewMs / 1000 };
  if (cfg.audiences.length > 0) opts.audience = [...cfg.audiences];
  return { cfg, jwks: jwksFor(cfg.jwks, deps.now, deps.log, deps.metrics), opts, cache: new TokenCache(cfg.clockSkewMs), claimsBin: `${cfg.claimsHeader ?? ""}-bin` };
}

function extPlan(cfg: ExtAuthzConfig, deps: AuthDeps): NonNullable<Plan["ext"]> {
  // (its cluster connects now: a Check's timeout is for the Check)
  const target = checkTarget(deps.side, deps.clusters, { cluster: cfg.cluster, address: cfg.address }, cfg.timeoutMs);
  return { target, cfg, calls: deps.metrics.extAuthzCounters(target.label) };
}

/** The listener's auth filter factory; null when none of its routes has jwt, rbac or extAuthz. */
export function authFilterFactory(routes: readonly RouteConfig[], deps: AuthDeps): FilterFactory | null {
  if (!routes.some((r) => r.jwt !== null || r.rbac !== null || r.extAuthz !== null)) return null;
  const m = deps.metrics.authDecisions;
  const bind = (stage: Stage) => ({
    allow: m.labels(deps.listener, stage, "allow"),
    deny: m.labels(deps.listener, stage, "deny"),
    shadow_deny: m.labels(deps.listener, stage, "shadow_deny"),
    error_allow: m.labels(deps.listener, stage, "error_allow"),
  });
  const counters: Counters = { jwt: bind("jwt"), rbac: bind("rbac"), ext_authz: bind("ext_authz") };
  const plans: (Plan | null)[] = routes.map((r) =>
    r.jwt === null && r.rbac === null && r.extAuthz === null
      ? null
      : Object.freeze({
          jwt: r.jwt === null ? null : jwtPlan(r.jwt, deps),
          rbac: r.rbac === null ? null : compileRbac(r.rbac),
          ext: r.extAuthz === null ? null : extPlan(r.extAuthz, deps),
          counters,
          log: deps.log,
        }),
  );
  return {
    forCall(_c: FilterCall, route: CompiledRoute<Cluster>): CallFilter | null {
      const p = plans[route.index];
      return p === undefined || p === null ? null : new AuthCall(p);
    },
  };
}

/** The first value of `name` in a head (a repeated field is a list; a single-value one was kept first). */
function headValue(h: OutgoingHeaders | undefined, name: string): string | undefined {
  const v = h?.[name];
  return v === undefined ? undefined : Array.isArray(v) ? v[0] : String(v);
}

/**
 * One call's way through the stages; holds the request head while a stage waits. The stages
 * compose as Envoy's filters do: each reads and changes the call's request head
 * (`c.upHeaders`), never the client's own header list, so a stage sees the request as the
 * stages before it left it (the external check gets the verified claims and not a client's copy
 * of their header, nor the token jwt removed), and so do the filters after auth and the upstream.
 */
class AuthCall implements CallFilter {
  private claims: Record<string, unknown> | null = null;
  /** the external check in flight (cancelled when the call ends first) */
  private pending: SideCallHandle | null = null;
  /** the rbac rule that decided ("(default)": none matched); undefined until the rules ran */
  private rule: string | undefined = undefined;
  constructor(private readonly p: Plan) {}

  onRequestHead(c: FilterCall): boolean {
    const p = this.p;
    const j = p.jwt;
    if (j !== null) {
      const token = bearerToken(headValue(c.upHeaders, "authorization"));
      if (token === undefined) {
        this.refuse(c, "jwt", Code.UNAUTHENTICATED, "jwt: missing bearer token");
        return false;
      }
      // (a cached token counts only while the keys it was verified with are still usable)
      const known = j.jwks.fresh() ? j.cache.get(token, Date.now()) : undefined;
      if (known === undefined) {
        this.verify(c, j, token).catch((err: unknown) => this.internal(c, "jwt", err));
        return false;
      }
      this.accepted(c, j, known);
    }
    if (!this.rules(c)) return false;
    if (p.ext !== null) {
      this.external(c, p.ext);
      return false;
    }
    return true;
  }

  onEnd(): void {
    const q = this.pending;
    if (q !== null) {
      this.pending = null;
      q.cancel();
    }
  }

  private refuse(c: FilterCall, stage: Stage, code: number, message: string, extra?: OutgoingHeaders): void {
    if (c.done) return; // (the client went away meanwhile: its end is already recorded)
    this.p.counters[stage].deny.inc();
    c.finishLocal(outcome(code, message, stage), extra);
  }

  /** A stage threw where it should not (a bug): the call ends 13, decided by that stage; nothing of the request is logged. */
  private internal(c: FilterCall, stage: Stage, err: unknown): void {
    this.p.log.error({ err: (err as Error).message, request_id: c.requestId, stage }, "auth filter failed");
    if (!c.done) c.finishLocal(outcome(Code.INTERNAL, `${stage}: internal error`, stage));
  }

  /**
   * The token verified (now or before): counted, its claims kept for the rules, and the head the
   * later stages and the upstream get changed as Envoy's jwt_authn changes it: the token removed
   * unless forwardToken (`forward`), and the claims header holding the verified claims only
   * (`forward_payload_header`): whatever the client sent under that name is replaced, and its
   * binary twin (`<name>-bin`, which a gRPC server reads as the same key's binary form) removed.
   * Names in the head are lower case (HTTP/2 requires it; the bridges lower-case HTTP/1.1's).
   */
  private accepted(c: FilterCall, j: NonNullable<Plan["jwt"]>, claims: Record<string, unknown>): void {
    this.p.counters.jwt.allow.inc();
    this.claims = claims;
    const h = c.upHeaders;
    if (h !== undefined) {
      if (!j.cfg.forwardToken) delete h["authorization"];
      const name = j.cfg.claimsHeader;
      if (name !== null) {
        h[name] = claimsHeaderValue(claims);
        delete h[j.claimsBin];
      }
    }
  }

  private async verify(c: FilterCall, j: NonNullable<Plan["jwt"]>, token: string): Promise<void> {
    let payload: Record<string, unknown>;
    try {
      payload = (await (await joseModule()).jwtVerify(token, j.jwks.getKey, j.opts)).payload;
    } catch (err) {
      if (c.done) return;
      const e = err as { code?: string; claim?: string };
      return this.refuse(c, "jwt", Code.UNAUTHENTICATED, jwtFailureMessage(e.code, e.claim));
    }
    if (c.done) return;
    // jose checks iat only with maxTokenAge (which would also require it): a token issued
    // further in the future than clockSkew is refused here, as jose refuses it then
    if (issuedInFuture(payload, Date.now(), j.cfg.clockSkewMs)) return this.refuse(c, "jwt", Code.UNAUTHENTICATED, IAT_IN_FUTURE);
    j.cache.set(token, payload, Date.now());
    this.accepted(c, j, payload);
    if (!this.rules(c)) return;
    const ext = this.p.ext;
    if (ext !== null) return this.external(c, ext);
    c.continueRequestHead(this);
  }

  /** The route's rules; false when they ended the call. */
  private rules(c: FilterCall): boolean {
    const rbac = this.p.rbac;
    if (rbac === null) return true;
    const peer = c.peer;
    const d = decideRbac(rbac, { path: c.path, identities: peer?.tlsSans ?? [], claims: this.claims, address: c.clientAddress });
    this.rule = d.rule ?? "(default)";
    if (d.action === "allow") {
      this.p.counters.rbac.allow.inc();
      return true;
    }
    const why = d.rule === null ? "no rule allows it" : `rule ${d.rule} denies it`;
    if (rbac.shadow) {
      this.p.counters.rbac.shadow_deny.inc();
      this.p.log.info({ request_id: c.requestId, path: c.path, rule: d.rule, client_address: c.clientAddress, tls_identity: peer?.tlsIdentity }, `rbac shadow: would deny (${why})`);
      return true;
    }
    this.refuse(c, "rbac", Code.PERMISSION_DENIED, `rbac: ${c.path} denied: ${why}`);
    return false;
  }

  /** The access record's jwt_subject (the verified token's `sub`) and rbac_rule (the rule that decided). */
  annotate(rec: AccessRecord): void {
    const sub = this.claims?.["sub"];
    if (typeof sub === "string") rec.jwt_subject = sub;
    if (this.rule !== undefined) rec.rbac_rule = this.rule;
  }

  /** Asks the external check about the request head as the stages before it left it; the call waits for the answer. */
  private external(c: FilterCall, ext: NonNullable<Plan["ext"]>): void {
    const peer = c.peer;
    this.pending = check(ext.target, {
      head: c.upHeaders ?? {},
      scheme: peer?.tlsVersion !== undefined ? "https" : "http",
      requestId: c.requestId,
      clientAddress: c.clientAddress,
      clientPort: peer?.port,
      principal: peer?.tlsIdentity ?? "",
      certificatePem: ext.cfg.includePeerCertificate && peer?.tlsCertificate !== undefined ? peer.tlsCertificate.toString() : "",
      nowMs: Date.now(),
    }, (o) => {
      this.pending = null;
      try {
        this.checked(c, ext, o);
      } catch (err) {
        this.internal(c, "ext_authz", err);
      }
    });
  }

  /** The check's end, exactly once: every result counted, a failure decided by failOpen. */
  private checked(c: FilterCall, ext: NonNullable<Plan["ext"]>, o: SideOutcome<CheckResponseFields>): void {
    if (o.result !== "ok") {
      ext.calls[o.result].inc();
      if (o.result === "cancelled" || c.done) return;
      const why = o.result === "timeout" ? `no answer in ${ext.cfg.timeoutMs} ms` : o.detail;
      if (ext.cfg.failOpen) {
        this.p.counters.ext_authz.error_allow.inc();
        this.p.log.warn({ request_id: c.requestId, ext_authz: ext.target.label, err: why }, "external authorization failed; failOpen lets the call through");
        c.continueRequestHead(this);
        return;
      }
      return this.refuse(c, "ext_authz", Code.PERMISSION_DENIED, `external authorization failed (${why})`);
    }
    const v = mapCheckResponse(o.value as Readonly<Record<string, unknown>>);
    ext.calls[v.allow ? "allowed" : "denied"].inc();
    if (c.done) return;
    if (!v.allow) {
      const extra: OutgoingHeaders = {};
      for (const [k, val] of v.extra) extra[k] = val;
      return this.refuse(c, "ext_authz", v.code, v.message, v.extra.length > 0 ? extra : undefined);
    }
    this.p.counters.ext_authz.allow.inc();
    const h = c.upHeaders;
    if (h !== undefined) {
      for (const n of v.remove) delete h[n];
      for (const [k, val] of v.set) h[k] = val;
      for (const [k, val] of v.addIfAbsent) if (h[k] === undefined) h[k] = val;
      for (const [k, val] of v.append) {
        const prev = h[k];
        h[k] = prev === undefined ? val : Array.isArray(prev) ? [...prev, val] : [String(prev), val];
      }
    }
    c.continueRequestHead(this);
  }
}
