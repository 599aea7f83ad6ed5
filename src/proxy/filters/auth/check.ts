// Envoy's external authorization, pure: what a CheckResponse means for the call (headers to set or
// remove upstream, or a denial's status and status fields). The CheckRequest a call's attributes
// make, and the CheckResponse's bytes, are src/translate/ext-authz-wire.ts; the response arrives
// here in @grpc/proto-loader's shape (field names as in the .proto, enums by name; a denial's HTTP
// status by name or number).
import { Code } from "../../../translate/codes.js";
import { codeFromHttpStatus } from "../../../translate/http-status.js";

/** What the check decided. */
export type CheckVerdict =
  | {
      readonly allow: true;
      /** set on the upstream request (replacing) */
      readonly set: readonly (readonly [string, string])[];
      /** added beside what is there */
      readonly append: readonly (readonly [string, string])[];
      /** set only when absent */
      readonly addIfAbsent: readonly (readonly [string, string])[];
      readonly remove: readonly string[];
    }
  | {
      readonly allow: false;
      readonly code: number;
      readonly message: string;
      /** the denial's headers, sent with the call's status */
      readonly extra: readonly (readonly [string, string])[];
    };

const TOKEN_RE = /^[0-9a-z!#$%&'*+.^_`|~-]+$/;
/** Fields the check may not set: HTTP/2 and gRPC framing, and the status itself. */
const OWNED = new Set(["content-type", "te", "connection", "transfer-encoding", "keep-alive", "upgrade", "host", "content-length", "grpc-status", "grpc-message", "grpc-status-details-bin", "grpc-timeout", "grpc-encoding", "grpc-accept-encoding"]);

/** A header the check may set: a lower-case token name gRPC framing does not own, and a value without CR, LF or NUL. */
export function settableHeader(name: string, value: string): boolean {
  return TOKEN_RE.test(name) && !OWNED.has(name) && !/[\r\n\0]/.test(value);
}

interface HeaderValueOption {
  header?: { key?: string; value?: string; raw_value?: Buffer | Uint8Array };
  append?: { value?: boolean } | null;
  append_action?: string;
}

function pair(o: HeaderValueOption): [string, string] | null {
  const h = o.header;
  if (h === undefined || h === null || typeof h.key !== "string") return null;
  const name = h.key.toLowerCase();
  let value = typeof h.value === "string" ? h.value : "";
  if (value === "" && h.raw_value !== undefined && h.raw_value !== null && h.raw_value.length > 0) value = Buffer.from(h.raw_value).toString("utf8");
  return settableHeader(name, value) ? [name, value] : null;
}

/**
 * The HTTP statuses (envoy.type.v3.StatusCode names) whose gRPC code grpc-go's table gives
 * (codeFromHttpStatus); any other name denies with 7 PERMISSION_DENIED.
 */
const HTTP_STATUS_BY_NAME: Readonly<Record<string, number>> = {
  BadRequest: 400,
  Unauthorized: 401,
  Forbidden: 403,
  NotFound: 404,
  TooManyRequests: 429,
  BadGateway: 502,
  ServiceUnavailable: 503,
  GatewayTimeout: 504,
};

/** The HTTP statuses of HTTP_STATUS_BY_NAME (an envoy.type.v3.StatusCode's number is its HTTP status). */
const MAPPED_HTTP_STATUSES: ReadonlySet<number> = new Set(Object.values(HTTP_STATUS_BY_NAME));

function codeOfHttpName(name: string | number | undefined): number {
  const status = typeof name === "string" ? HTTP_STATUS_BY_NAME[name] : typeof name === "number" && MAPPED_HTTP_STATUSES.has(name) ? name : undefined;
  return status === undefined ? Code.PERMISSION_DENIED : codeFromHttpStatus(status);
}

/**
 * The verdict of a CheckResponse: status code 0 allows (ok_response's headers apply), any other
 * denies with that code (an HTTP status of the denied_response when the code says nothing better)
 * and the status message, else the denial's body.
 */
export function mapCheckResponse(r: Readonly<Record<string, unknown>>): CheckVerdict {
  const status = r["status"] as { code?: number; message?: string } | undefined;
  const code = status?.code ?? 0;
  if (code === 0) {
    const ok = (r["ok_response"] ?? {}) as { headers?: HeaderValueOption[]; headers_to_remove?: string[] };
    const set: [string, string][] = [];
    const append: [string, string][] = [];
    const addIfAbsent: [string, string][] = [];
    for (const o of ok.headers ?? []) {
      const p = pair(o);
      if (p === null) continue;
      const a = o.append?.value;
      if (a === true) append.push(p);
      else if (a === false) set.push(p);
      else if (o.append_action === "ADD_IF_ABSENT") addIfAbsent.push(p);
      // unset append (and the default action): replaced, as Envoy's ext_authz does
      else set.push(p);
    }
    const remove = (ok.headers_to_remove ?? []).map((n) => n.toLowerCase()).filter((n) => settableHeader(n, ""));
    return { allow: true, set, append, addIfAbsent, remove };
  }
  const denied = (r["denied_response"] ?? {}) as { status?: { code?: string | number }; headers?: HeaderValueOption[]; body?: string };
  const httpName = denied.status?.code;
  const grpcCode = code >= 1 && code <= 16 ? code : codeOfHttpName(httpName);
  const extra: [string, string][] = [];
  for (const o of denied.headers ?? []) {
    const p = pair(o);
    if (p !== null) extra.push(p);
  }
  const msg = status?.message !== undefined && status.message !== "" ? status.message : denied.body !== undefined && denied.body !== "" ? denied.body : "denied by external authorization";
  return { allow: false, code: grpcCode, message: msg, extra };
}
