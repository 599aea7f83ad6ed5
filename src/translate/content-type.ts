// The gRPC content-type test (grpc-go grpcutil.ContentSubtype, spec sheet §1.2).

export const GRPC_CONTENT_TYPE = "application/grpc";
const BASE_LEN = GRPC_CONTENT_TYPE.length;

/**
 * grpc-go internal/grpcutil/method.go `ContentSubtype`: exactly `application/grpc` → "";
 * `application/grpc` followed by `+` or `;` → everything after that character (may be "");
 * anything else → undefined (not gRPC). Case-sensitive, as grpc-go assumes lower case.
 */
export function grpcContentSubtype(v: string | undefined): string | undefined {
  if (v === undefined) return undefined;
  if (v === GRPC_CONTENT_TYPE) return "";
  if (!isGrpcContentType(v)) return undefined;
  return v.slice(BASE_LEN + 1);
}

/** Same rule as grpcContentSubtype without building the subtype string (hot path). */
export function isGrpcContentType(v: string | undefined): boolean {
  if (v === undefined || !v.startsWith(GRPC_CONTENT_TYPE)) return false;
  if (v.length === BASE_LEN) return true;
  const next = v.charCodeAt(BASE_LEN);
  return next === 0x2b /* + */ || next === 0x3b /* ; */;
}

/** `application/grpc+`: the prefix of a response content-type that names a subtype. */
const SUBTYPE_PREFIX = GRPC_CONTENT_TYPE + "+";
/**
 * RFC 6838 §4.2 restricted-name (1 to 127 characters: a letter or digit, then letters, digits
 * and ! # $ & - ^ _ . +): what a subtype may be for dojang to echo it.
 */
const SUBTYPE = /^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}$/;

/**
 * The content-type of a response dojang writes itself for a request of content-type `v`: the
 * request's own `application/grpc+<subtype>` when the subtype is a valid name (a client that
 * asked for `application/grpc+json` checks the reply names the same codec: connect-go's gRPC
 * client reads a reply of plain `application/grpc` as 13 INTERNAL), else `application/grpc`
 * (no subtype, a `;` parameter form, an invalid or missing content-type). grpc-go's server
 * answers `application/grpc+<subtype>` likewise (encoding.go ContentType). Returns `v` itself
 * or the constant: no string is built.
 */
export function grpcReplyContentType(v: string | undefined): string {
  if (v === undefined || v === GRPC_CONTENT_TYPE || !v.startsWith(SUBTYPE_PREFIX)) return GRPC_CONTENT_TYPE;
  return SUBTYPE.test(v.slice(SUBTYPE_PREFIX.length)) ? v : GRPC_CONTENT_TYPE;
}