// A route's authentication and authorization schemas (src/proxy/filters/auth): `jwt` (bearer
// tokens against a JWKS file or URL), `rbac` (per-method allow/deny rules), `extAuthz` (Envoy's
// Authorization/Check over gRPC). Strict: an unknown key is an error.

import { z } from "zod";
import { describeValue } from "../issues.js";
import { parseCidr } from "../../translate/cidr.js";
import { RBAC_ACTIONS, type ExtAuthzConfig, type JwksSource, type JwtConfig, type RbacConfig } from "../types.js";
import { durationMs, expected, flag, hostPort, name, oneOf } from "./scalars.js";
import { ADDRESS, dur, durationKind, enumKind, FLAG, NAME, type KeyDoc } from "./key-doc.js";

/** The algorithms a JWT may be signed with: asymmetric only (a shared secret would be key material in the config). */
export const JWT_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"] as const;
export const JWT_DEFAULTS = Object.freeze({
  algorithms: Object.freeze(["RS256", "ES256", "EdDSA"]),
  clockSkewMs: 60_000,
  refreshIntervalMs: 300_000,
  staleWhileErrorMs: 3_600_000,
  timeoutMs: 5_000,
});
export const EXT_AUTHZ_DEFAULTS = Object.freeze({ timeoutMs: 200 });

const text = (what: string) => z.string({ error: expected(what) }).min(1, "must not be empty");
/** A request header a filter sets: lower-case token, not a pseudo-header or one framing owns. */
const HEADER_RE = /^[0-9a-z!#$%&'*+.^_`|~-]+$/;
const FRAMING = new Set(["content-type", "te", "connection", "transfer-encoding", "keep-alive", "upgrade", "host", "grpc-status", "grpc-message", "content-length", "grpc-timeout", "authorization"]);
const headerName = z
  .string({ error: expected("a header name") })
  .regex(HEADER_RE, "must be a lower-case header name (no pseudo-headers)")
  .refine((n) => !FRAMING.has(n), "is owned by HTTP/2, gRPC or the token itself and cannot carry claims");

const jwks = z
  .strictObject(
    {
      file: text("a JWKS file path").optional(),
      url: text('an https URL like "https://issuer.example/.well-known/jwks.json"')
        .refine((u) => URL.canParse(u) && new URL(u).protocol === "https:", { error: (iss) => `${describeValue(iss.input)} must be an https:// URL (keys fetched in the clear could be swapped)` })
        .optional(),
      caFile: text("a CA bundle path").nullable().default(null),
      refreshInterval: durationMs(1000).default(JWT_DEFAULTS.refreshIntervalMs),
      staleWhileError: durationMs(0).default(JWT_DEFAULTS.staleWhileErrorMs),
      timeout: durationMs(1).default(JWT_DEFAULTS.timeoutMs),
    },
    { error: expected("a mapping with file or url") },
  )
  .superRefine((j, ctx) => {
    if ((j.file === undefined) === (j.url === undefined)) ctx.addIssue({ code: "custom", message: "give exactly one of file or url" });
    if (j.file !== undefined && j.caFile !== null) ctx.addIssue({ code: "custom", path: ["caFile"], message: "caFile is for url (the JWKS server's certificate)" });
  })
  .transform((j): JwksSource =>
    j.file !== undefined
      ? { file: j.file }
      : { url: j.url!, caFile: j.caFile, refreshIntervalMs: j.refreshInterval, staleWhileErrorMs: j.staleWhileError, timeoutMs: j.timeout },
  );

const algorithm = z.string({ error: expected(`one of ${JWT_ALGORITHMS.join(", ")}`) }).transform((v, ctx): (typeof JWT_ALGORITHMS)[number] => {
  const found = JWT_ALGORITHMS.find((a) => a.toLowerCase() === v.trim().toLowerCase());
  if (found === undefined) {
    ctx.addIssue({ code: "custom", message: `unknown JWT algorithm ${describeValue(v)}: expected one of ${JWT_ALGORITHMS.join(", ")} (asymmetric only: a shared secret would be key material in the config)` });
    return z.NEVER;
  }
  return found;
});

export const jwt = z
  .strictObject(
    {
      issuer: text("the issuer (iss) tokens must carry"),
      audiences: z.array(text("an audience"), { error: expected("a list of audiences") }).default([]),
      algorithms: z.array(algorithm, { error: expected("a list of algorithms") }).min(1, "needs at least one algorithm").default([...JWT_DEFAULTS.algorithms] as (typeof JWT_ALGORITHMS)[number][]),
      clockSkew: durationMs(0).default(JWT_DEFAULTS.clockSkewMs),
      jwks,
      claimsHeader: headerName.nullable().default(null),
      forwardToken: flag.default(false),
    },
    { error: expected("a jwt mapping like { issuer, jwks: { url } }") },
  )
  .transform(
    (j): JwtConfig => ({
      issuer: j.issuer,
      audiences: j.audiences,
      algorithms: [...new Set(j.algorithms)],
      clockSkewMs: j.clockSkew,
      jwks: j.jwks,
      claimsHeader: j.claimsHeader,
      forwardToken: j.forwardToken,
    }),
  );

/** "pkg.Svc/Method", "pkg.Svc/*" or "*". */
const METHOD_RE = /^(\*|[A-Za-z_][A-Za-z0-9_.]*\/(\*|[A-Za-z_][A-Za-z0-9_]*))$/;
const method = z.string({ error: expected('a method like "pkg.Svc/Method", "pkg.Svc/*" or "*"') }).regex(METHOD_RE, 'must be "pkg.Svc/Method", "pkg.Svc/*" or "*"');
const cidr = z.string({ error: expected('an address or block like "10.0.0.0/8"') }).refine((v) => parseCidr(v.trim()) !== null, {
  error: (iss) => `expected an address or CIDR block like "10.0.0.0/8" or "2001:db8::/32", got ${describeValue(iss.input)}`,
});
const claimValues = z.union([z.string(), z.array(z.string()).min(1, "needs at least one value")], { error: expected("a value or a list of values") }).transform((v) => (typeof v === "string" ? [v] : v));
const action = oneOf(RBAC_ACTIONS, "rbac action");

const rbacRule = z.strictObject(
  {
    name,
    action,
    methods: z.array(method, { error: expected("a list of methods") }).default([]),
    identities: z.array(text("a certificate SAN"), { error: expected("a list of client certificate SANs") }).default([]),
    claims: z
      .object({}, { error: expected("a mapping of claim → value(s)") })
      .catchall(claimValues)
      .refine((m) => !Object.hasOwn(m, ""), "a claim name must not be empty")
      .default({}),
    clientAddresses: z.array(cidr, { error: expected("a list of addresses or CIDR blocks") }).default([]),
  },
  { error: expected("a rule like { name, action: allow, methods: [\"pkg.Svc/*\"] }") },
);

export const rbac = z
  .strictObject(
    {
      rules: z.array(rbacRule, { error: expected("a list of rules") }).default([]),
      default: action.default("deny"),
      shadow: flag.default(false),
    },
    { error: expected("an rbac mapping like { rules: [...], default: deny }") },
  )
  .superRefine((r, ctx) => {
    const seen = new Set<string>();
    r.rules.forEach((x, i) => {
      if (seen.has(x.name)) ctx.addIssue({ code: "custom", path: ["rules", i, "name"], message: `duplicate rule name ${describeValue(x.name)}` });
      seen.add(x.name);
    });
  })
  .transform((r): RbacConfig => ({ rules: r.rules.map((x) => ({ ...x, clientAddresses: x.clientAddresses.map((a) => a.trim()) })), default: r.default, shadow: r.shadow }));

export const extAuthz = z
  .strictObject(
    {
      address: hostPort(false).optional(),
      cluster: name.optional(),
      timeout: durationMs(1).default(EXT_AUTHZ_DEFAULTS.timeoutMs),
      failOpen: flag.default(false),
      includePeerCertificate: flag.default(false),
    },
    { error: expected("an extAuthz mapping like { address: 127.0.0.1:9000 }") },
  )
  .superRefine((e, ctx) => {
    if ((e.address === undefined) === (e.cluster === undefined)) {
      ctx.addIssue({ code: "custom", path: e.address === undefined ? ["address"] : ["cluster"], message: e.address === undefined ? 'needs address ("host:port") or cluster (a cluster\'s name)' : "give address or cluster, not both" });
    }
  })
  .transform((e): ExtAuthzConfig => ({ address: e.address ?? null, cluster: e.cluster ?? null, timeoutMs: e.timeout, failOpen: e.failOpen, includePeerCertificate: e.includePeerCertificate }));

/** The keys' documentation, by path (config/json-schema.ts KEYS): the JSON Schema's descriptions. */
export const AUTH_KEYS: Readonly<Record<string, KeyDoc>> = {
  "listeners[].routes[].jwt": { description: "Verify a bearer token (Authorization: Bearer) on every call of the route before anything else; a missing or bad one ends the call 16 UNAUTHENTICATED (decided_by jwt). null = none.", default: null },
  "listeners[].routes[].jwt.issuer": { description: "The iss claim a token must carry." },
  "listeners[].routes[].jwt.audiences": { description: "The aud claim must name one of these; empty = any audience.", default: [] },
  "listeners[].routes[].jwt.audiences[]": { description: "An audience." },
  "listeners[].routes[].jwt.algorithms": { description: "Signature algorithms accepted (asymmetric only).", default: [...JWT_DEFAULTS.algorithms] },
  "listeners[].routes[].jwt.algorithms[]": { description: "One of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512, EdDSA.", kind: enumKind(JWT_ALGORITHMS) },
  "listeners[].routes[].jwt.clockSkew": { description: "Leeway for exp, nbf and iat.", kind: durationKind(0), default: dur(JWT_DEFAULTS.clockSkewMs) },
  "listeners[].routes[].jwt.jwks": { description: "The verification keys: a JWKS file (read when the config loads) or an https URL (fetched and cached); exactly one of file or url." },
  "listeners[].routes[].jwt.jwks.file": { description: "A JWKS (JSON Web Key Set) file." },
  "listeners[].routes[].jwt.jwks.url": { description: "An https:// URL serving the JWKS." },
  "listeners[].routes[].jwt.jwks.caFile": { description: "CA bundle (PEM) the JWKS server's certificate is verified against. null = the system CAs.", default: null },
  "listeners[].routes[].jwt.jwks.refreshInterval": { description: "Keys are fetched again this long after the last good fetch (in the background; a token with an unknown kid fetches at once, at most once a second).", kind: durationKind(1000), default: dur(JWT_DEFAULTS.refreshIntervalMs) },
  "listeners[].routes[].jwt.jwks.staleWhileError": { description: "While refreshes fail, the last good keys stay in use this long past refreshInterval; then calls fail 16 until a fetch succeeds.", kind: durationKind(0), default: dur(JWT_DEFAULTS.staleWhileErrorMs) },
  "listeners[].routes[].jwt.jwks.timeout": { description: "One fetch's time limit.", kind: durationKind(1), default: dur(JWT_DEFAULTS.timeoutMs) },
  "listeners[].routes[].jwt.claimsHeader": { description: "Request header set upstream to the verified claims (JSON, base64url); a client's own is replaced. null = none.", default: null },
  "listeners[].routes[].jwt.forwardToken": { description: "Keep the client's authorization header on the upstream request (default: removed once verified).", kind: FLAG, default: false },
  "listeners[].routes[].rbac": { description: "Allow/deny rules per method, client certificate, JWT claims and client address; the first rule that matches decides, else default. A denied call ends 7 PERMISSION_DENIED (decided_by rbac). null = none.", default: null },
  "listeners[].routes[].rbac.rules": { description: "Rules, tried in order.", default: [] },
  "listeners[].routes[].rbac.rules[].name": { description: "The rule's name (in logs and the denial's message)." },
  "listeners[].routes[].rbac.rules[].action": { description: "allow or deny.", kind: enumKind(RBAC_ACTIONS) },
  "listeners[].routes[].rbac.rules[].methods": { description: 'Methods the rule is for: "pkg.Svc/Method", "pkg.Svc/*" or "*"; empty = any.', default: [] },
  "listeners[].routes[].rbac.rules[].methods[]": { description: 'A method: "pkg.Svc/Method", "pkg.Svc/*" or "*".' },
  "listeners[].routes[].rbac.rules[].identities": { description: 'The verified client certificate must have one of these URI or DNS SANs (a trailing "*" matches a prefix); empty = any (also no certificate).', default: [] },
  "listeners[].routes[].rbac.rules[].identities[]": { description: 'A SAN like "spiffe://example.org/ns/shop/sa/web", or a prefix ending in "*".' },
  "listeners[].routes[].rbac.rules[].claims": { description: "claim → value or values: each claim (a dotted path into the verified token) must equal one of them, or be a list holding one; needs jwt on the route.", default: {} },
  "listeners[].routes[].rbac.rules[].clientAddresses": { description: "The client's address must lie in one of these (addresses or CIDR blocks; IPv4 blocks also match IPv4-mapped IPv6); empty = any.", default: [] },
  "listeners[].routes[].rbac.rules[].clientAddresses[]": { description: 'An address or block, "10.0.0.0/8", "2001:db8::/32".' },
  "listeners[].routes[].rbac.default": { description: "What a call no rule matches gets.", kind: enumKind(RBAC_ACTIONS), default: "deny" },
  "listeners[].routes[].rbac.shadow": { description: "Only count (dojang_auth_decisions_total result shadow_deny) and log what would be denied; every call goes on.", kind: FLAG, default: false },
  "listeners[].routes[].extAuthz": { description: "Ask an external authorization service (Envoy's envoy.service.auth.v3.Authorization/Check over gRPC) after jwt and rbac; its denial ends the call with its status (decided_by ext_authz). null = none.", default: null },
  "listeners[].routes[].extAuthz.address": { description: 'The service\'s gRPC address, "host:port": h2c, on a cluster of its own (one per address, no health checks). Give address or cluster.', kind: ADDRESS },
  "listeners[].routes[].extAuthz.cluster": {
    description: "The cluster (by name, one of clusters) the checks ride, with its health checks, outlier detection, circuit breakers and TLS. Give address or cluster.",
    kind: NAME,
  },
  "listeners[].routes[].extAuthz.timeout": { description: "The check's time limit.", kind: durationKind(1), default: dur(EXT_AUTHZ_DEFAULTS.timeoutMs) },
  "listeners[].routes[].extAuthz.failOpen": { description: "A check that fails or times out lets the call through (counted as error_allow); default: the call ends 7 PERMISSION_DENIED.", kind: FLAG, default: false },
  "listeners[].routes[].extAuthz.includePeerCertificate": { description: "Send the verified client certificate (PEM, URL-encoded) as attributes.source.certificate.", kind: FLAG, default: false },
};
