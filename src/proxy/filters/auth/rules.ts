// The route's access rules (`rbac`), compiled once at config time and decided per call. Pure: the
// facts come in (the :path, the verified certificate's SANs, the verified JWT claims, the client
// address), a decision goes out. Envoy's RBAC in dojang's words: an ordered list of rules, each
// `allow` or `deny`, every condition given must hold (any entry of a list), the first rule that
// matches decides, `default` when none does.
import type { RbacAction, RbacConfig, RbacRuleConfig } from "../../../config/index.js";
import { cidrContains, parseAddress, parseCidr, type Cidr } from "../../../translate/cidr.js";
import { claimMatches } from "./claims.js";

/** What a call brings to the rules. */
export interface RuleFacts {
  /** ":path", "/pkg.Svc/Method" */
  readonly path: string;
  /** the verified client certificate's URI and DNS SANs (empty: none) */
  readonly identities: readonly string[];
  /** the verified JWT's claims (null: no token was verified on this route) */
  readonly claims: Readonly<Record<string, unknown>> | null;
  /** the client's address as node reports it ("" when unknown) */
  readonly address: string;
}

interface CompiledRule {
  readonly name: string;
  readonly action: RbacAction;
  /** exact paths ("/pkg.Svc/M"), service prefixes ("/pkg.Svc/"), or null: any method */
  readonly paths: ReadonlySet<string> | null;
  readonly services: readonly string[] | null;
  readonly anyMethod: boolean;
  /** exact identities, and prefixes (a trailing "*") */
  readonly identities: ReadonlySet<string> | null;
  readonly identityPrefixes: readonly string[];
  readonly claims: readonly (readonly [string, readonly string[]])[];
  readonly blocks: readonly Cidr[] | null;
}

export interface CompiledRbac {
  readonly rules: readonly CompiledRule[];
  readonly default: RbacAction;
  readonly shadow: boolean;
  /** some rule reads the client address (parsed once per call only then) */
  readonly readsAddress: boolean;
}

export interface RbacDecision {
  readonly action: RbacAction;
  /** the rule that decided; null: the default did */
  readonly rule: string | null;
}

function compileRule(r: RbacRuleConfig): CompiledRule {
  const anyMethod = r.methods.length === 0 || r.methods.includes("*");
  const exact = r.methods.filter((m) => m !== "*" && !m.endsWith("/*")).map((m) => `/${m}`);
  const services = r.methods.filter((m) => m.endsWith("/*")).map((m) => `/${m.slice(0, -1)}`);
  const idExact = r.identities.filter((i) => !i.endsWith("*"));
  const idPrefix = r.identities.filter((i) => i.endsWith("*")).map((i) => i.slice(0, -1));
  return {
    name: r.name,
    action: r.action,
    anyMethod,
    paths: anyMethod ? null : new Set(exact),
    services: anyMethod ? null : services,
    identities: r.identities.length === 0 ? null : new Set(idExact),
    identityPrefixes: idPrefix,
    claims: Object.entries(r.claims),
    blocks: r.clientAddresses.length === 0 ? null : r.clientAddresses.map((a) => parseCidr(a)!),
  };
}

export function compileRbac(cfg: RbacConfig): CompiledRbac {
  const rules = cfg.rules.map(compileRule);
  return { rules, default: cfg.default, shadow: cfg.shadow, readsAddress: rules.some((r) => r.blocks !== null) };
}

function methodMatches(r: CompiledRule, path: string): boolean {
  if (r.anyMethod) return true;
  if (r.paths!.has(path)) return true;
  const ss = r.services!;
  for (let i = 0; i < ss.length; i++) {
    const s = ss[i]!;
    // "/pkg.Svc/" and then one method name (no further "/")
    if (path.length > s.length && path.startsWith(s) && path.indexOf("/", s.length) < 0) return true;
  }
  return false;
}

function identityMatches(r: CompiledRule, ids: readonly string[]): boolean {
  if (r.identities === null) return true;
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i]!;
    if (r.identities.has(id)) return true;
    for (const p of r.identityPrefixes) if (id.startsWith(p)) return true;
  }
  return false;
}

function claimsMatch(r: CompiledRule, claims: Readonly<Record<string, unknown>> | null): boolean {
  if (r.claims.length === 0) return true;
  if (claims === null) return false;
  for (const [path, values] of r.claims) if (!claimMatches(claims, path, values)) return false;
  return true;
}

function addressMatches(r: CompiledRule, addr: bigint | null): boolean {
  if (r.blocks === null) return true;
  if (addr === null) return false;
  for (const b of r.blocks) if (cidrContains(b, addr)) return true;
  return false;
}

/** The first rule whose every condition holds decides; else the default. */
export function decideRbac(rbac: CompiledRbac, f: RuleFacts): RbacDecision {
  const addr = rbac.readsAddress && f.address !== "" ? parseAddress(f.address) : null;
  for (const r of rbac.rules) {
    if (methodMatches(r, f.path) && identityMatches(r, f.identities) && claimsMatch(r, f.claims) && addressMatches(r, addr)) return { action: r.action, rule: r.name };
  }
  return { action: rbac.default, rule: null };
}
