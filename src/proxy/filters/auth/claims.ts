// JWT claims, pure: a claim by dotted path, a rule's claim condition, the header that carries the
// verified claims upstream, and the message each JOSE failure gets (fixed text: never the token,
// never key material).

/** The claim at a dotted path ("sub", "realm.roles"); a key holding a dot itself is tried whole first. */
export function claimAt(claims: Readonly<Record<string, unknown>>, path: string): unknown {
  if (Object.hasOwn(claims, path)) return claims[path];
  let v: unknown = claims;
  for (const part of path.split(".")) {
    if (typeof v !== "object" || v === null || Array.isArray(v) || !Object.hasOwn(v, part)) return undefined;
    v = (v as Record<string, unknown>)[part];
  }
  return v;
}

function scalarText(v: unknown): string | undefined {
  return typeof v === "string" ? v : typeof v === "number" || typeof v === "boolean" ? String(v) : undefined;
}

/** The claim is one of `values` (a number or boolean by its text), or a list holding one of them. */
export function claimMatches(claims: Readonly<Record<string, unknown>>, path: string, values: readonly string[]): boolean {
  const v = claimAt(claims, path);
  if (Array.isArray(v)) {
    for (const e of v) {
      const t = scalarText(e);
      if (t !== undefined && values.includes(t)) return true;
    }
    return false;
  }
  const t = scalarText(v);
  return t !== undefined && values.includes(t);
}

/** The claims header's value: the verified payload as JSON, base64url without padding (Envoy's forward_payload_header). */
export function claimsHeaderValue(claims: Readonly<Record<string, unknown>>): string {
  return Buffer.from(JSON.stringify(claims), "utf8").toString("base64url");
}

/** The bearer token of an authorization header value; undefined when it is not "Bearer <token>". */
export function bearerToken(value: string | undefined): string | undefined {
  if (value === undefined || value.length < 8) return undefined;
  if (value.slice(0, 7).toLowerCase() !== "bearer ") return undefined;
  const t = value.slice(7).trim();
  return t === "" || /\s/.test(t) ? undefined : t;
}

/** The refusal of a token issued later than now + clockSkew. */
export const IAT_IN_FUTURE = "jwt: token issued in the future (iat)";

/**
 * The token says it was issued later than `nowMs` plus `skewMs` (its `iat`, RFC 7519 §4.1.6).
 * The arithmetic is jose's own check of iat (jwtVerify with maxTokenAge): whole seconds, now
 * rounded down, refused when now − iat < −tolerance. A token without iat is not refused here.
 */
export function issuedInFuture(claims: Readonly<Record<string, unknown>>, nowMs: number, skewMs: number): boolean {
  const iat = claims["iat"];
  return typeof iat === "number" && Math.floor(nowMs / 1000) - iat < -(skewMs / 1000);
}

/**
 * The status message for a failed verification, from the JOSE error's code (and the claim it names):
 * fixed text, so no token or key ever reaches a log or a client.
 */
export function jwtFailureMessage(code: string | undefined, claim: string | undefined): string {
  switch (code) {
    case "ERR_JWT_EXPIRED":
      return "jwt: token expired";
    case "ERR_JWT_CLAIM_VALIDATION_FAILED":
      return claim === "iss" || claim === "aud" || claim === "nbf" || claim === "iat" || claim === "exp" || claim === "sub" ? `jwt: ${claim} claim check failed` : "jwt: claim check failed";
    case "ERR_JWS_SIGNATURE_VERIFICATION_FAILED":
      return "jwt: signature does not verify";
    case "ERR_JOSE_ALG_NOT_ALLOWED":
      return "jwt: signing algorithm not allowed";
    case "ERR_JWKS_NO_MATCHING_KEY":
    case "ERR_JWKS_MULTIPLE_MATCHING_KEYS":
      return "jwt: no key matches the token (kid)";
    case "ERR_JWS_INVALID":
    case "ERR_JWT_INVALID":
    case "ERR_JOSE_NOT_SUPPORTED":
      return "jwt: malformed token";
    case "DOJANG_JWKS_UNAVAILABLE":
      return "jwt: verification keys unavailable";
    default:
      return "jwt: token rejected";
  }
}
