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
