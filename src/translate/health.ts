// grpc.health.v1 on the wire: the Check request and response messages (two tiny protobufs, coded by hand) and the serving-status table.
//
// Source: grpc/grpc-proto grpc/health/v1/health.proto:
//   message HealthCheckRequest  { string service = 1; }
//   message HealthCheckResponse { enum ServingStatus { UNKNOWN = 0; SERVING = 1; NOT_SERVING = 2;
//                                 SERVICE_UNKNOWN = 3; } ServingStatus status = 1; }
// Both are used by dojang's active health checks (client side) and by its own health service
// (server side). Unknown fields are skipped, as protobuf requires.

export const HEALTH_CHECK_PATH = "/grpc.health.v1.Health/Check";
export const HEALTH_WATCH_PATH = "/grpc.health.v1.Health/Watch";

export const ServingStatus = { UNKNOWN: 0, SERVING: 1, NOT_SERVING: 2, SERVICE_UNKNOWN: 3 } as const;
export type ServingStatus = (typeof ServingStatus)[keyof typeof ServingStatus];

const utf8 = new TextEncoder();
const fromUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

function varint(n: number, out: number[]): void {
  while (n > 0x7f) {
    out.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
}

/** Reads a varint at `at`; null when it runs past the end or over 2^53. */
function readVarint(b: Uint8Array, at: number): { value: number; next: number } | null {
  let value = 0;
  let mul = 1;
  for (let i = at; i < b.length && i < at + 10; i++) {
    const x = b[i]!;
    value += (x & 0x7f) * mul;
    if ((x & 0x80) === 0) return value > Number.MAX_SAFE_INTEGER ? null : { value, next: i + 1 };
    mul *= 128;
  }
  return null;
}

/** Skips one field of wire type `wt` at `at`; the index after it, or -1 when malformed. */
function skipField(b: Uint8Array, wt: number, at: number): number {
  switch (wt) {
    case 0: {
      const v = readVarint(b, at);
      return v === null ? -1 : v.next;
    }
    case 1:
      return at + 8 <= b.length ? at + 8 : -1;
    case 2: {
      const v = readVarint(b, at);
      return v === null || v.next + v.value > b.length ? -1 : v.next + v.value;
    }
    case 5:
      return at + 4 <= b.length ? at + 4 : -1;
    default:
      return -1;
  }
}

/** Walks the fields of a message: calls `on(field, wireType, start, end)` for each; false if malformed. */
function walk(b: Uint8Array, on: (field: number, wt: number, start: number, end: number) => void): boolean {
  let i = 0;
  while (i < b.length) {
    const tag = readVarint(b, i);
    if (tag === null || tag.value < 8) return false;
    const field = Math.floor(tag.value / 8);
    const wt = tag.value & 7;
    const next = skipField(b, wt, tag.next);
    if (next < 0) return false;
    on(field, wt, tag.next, next);
    i = next;
  }
  return true;
}

/** HealthCheckRequest { service } (an empty service asks about the server as a whole). */
export function encodeHealthRequest(service: string): Uint8Array {
  if (service === "") return new Uint8Array(0);
  const s = utf8.encode(service);
  const out: number[] = [0x0a];
  varint(s.length, out);
  const head = Uint8Array.from(out);
  const msg = new Uint8Array(head.length + s.length);
  msg.set(head, 0);
  msg.set(s, head.length);
  return msg;
}

export function decodeHealthRequest(b: Uint8Array): { readonly ok: true; readonly service: string } | { readonly ok: false; readonly error: string } {
  let service = "";
  let bad = false;
  const ok = walk(b, (field, wt, start, end) => {
    if (field !== 1) return;
    if (wt !== 2) {
      bad = true;
      return;
    }
    const len = readVarint(b, start)!;
    try {
      service = fromUtf8.decode(b.subarray(len.next, end));
    } catch {
      bad = true;
    }
  });
  return ok && !bad ? { ok: true, service } : { ok: false, error: "malformed HealthCheckRequest" };
}

/** HealthCheckResponse { status }; SERVING etc. (0 = UNKNOWN is the empty message). */
export function encodeHealthResponse(status: ServingStatus): Uint8Array {
  if (status === 0) return new Uint8Array(0);
  return Uint8Array.of(0x08, status);
}

export function decodeHealthResponse(b: Uint8Array): { readonly ok: true; readonly status: number } | { readonly ok: false; readonly error: string } {
  let status = 0;
  let bad = false;
  const ok = walk(b, (field, wt, start) => {
    if (field !== 1) return;
    if (wt !== 0) {
      bad = true;
      return;
    }
    status = readVarint(b, start)!.value;
  });
  return ok && !bad ? { ok: true, status } : { ok: false, error: "malformed HealthCheckResponse" };
}
