// Faults asked for by the request itself (opt-in per listener, `faultHeaders: true`): Envoy's
// x-envoy-fault-* headers and dojang's x-dojang-fault. Pure: headers come in through `get`,
// percentage draws through `rand`, the config's fault parsers through `parsers` (loaded by
// whoever enables header faults: src/proxy/dojang.ts). A bad value drops that one fault with a reason; never throws.
//
// x-dojang-fault syntax (also in FAULT_KINDS_DOC):
//   value  = fault *( "," fault )                      at most 16 faults, 4096 characters
//   fault  = kind [ "=" arg ] [ "@" point [ ":" N ] ] *( ";" key "=" val )
// `kind` is any fault kind ("close" is short for close_connection). `key=val` parameters are the
// config keys of that kind (plus `pct` = percentage, and short forms msg=message, type=contentType,
// dir=direction); values may be percent-encoded (%2C for ",", %3B for ";"). Examples:
//   abort=UNAVAILABLE;msg=down   abort=14@after_messages:2   http=503;body=%3Ch1%3Edown%3C/h1%3E
//   reset=CANCEL@after_headers   reset=INTERNAL_ERROR@mid_message:1   goaway=abrupt;code=ENHANCE_YOUR_CALM
//   close=1024   shape=no_trailers   shape=wrong_content_type;type=text/html
//   delay=200ms   delay=200ms@message:2   delay=100ms..300ms@response_headers   delay=200ms~50ms@trailers
//   bandwidth=64KiB@response   blackhole   stall=response   deadline=drop   deadline=shrink;factor=0.5
//   deadline=grow;by=2s   unreachable   upstream_reset=CANCEL@after_messages:1   abort=13;pct=25

import { didYouMean } from "../../../config/issues.js";
import { MAX_DURATION_MS } from "../../../config/units.js";
import { codeFromHttpStatus } from "../../../translate/http-status.js";
import type { FaultIssue } from "../../../config/faults/parse.js";
import type { FaultParsers } from "../../../config/parsers.js";
import { FAULT_KINDS, isTerminalFault, type FaultAction } from "../../../config/faults/model.js";
import { seedFromDraw } from "./prng.js";
import { stackFaults } from "./select.js";

export interface HeaderFaults {
  /** Stacked (first per slot wins), in order: Envoy delay, Envoy abort, Envoy throughput, then x-dojang-fault left to right. */
  readonly actions: FaultAction[];
  /** One line per ignored fault or header, for the access log. */
  readonly errors: string[];
}

/** Header names, lower-case (Envoy's from source/extensions/filters/common/fault/fault_config.h). */
export const FAULT_HEADERS = Object.freeze({
  abortHttp: "x-envoy-fault-abort-request",
  abortGrpc: "x-envoy-fault-abort-grpc-request",
  abortPercentage: "x-envoy-fault-abort-request-percentage",
  delay: "x-envoy-fault-delay-request",
  delayPercentage: "x-envoy-fault-delay-request-percentage",
  throughput: "x-envoy-fault-throughput-response",
  throughputPercentage: "x-envoy-fault-throughput-response-percentage",
  dojang: "x-dojang-fault",
});

/** Envoy's local-reply text for a fault abort (fault_filter.cc abortWithStatus). */
export const ENVOY_ABORT_MESSAGE = "fault filter abort";

const MAX_HEADER_CHARS = 4096;
const MAX_FAULTS = 16;
const U32_MAX = 2 ** 32 - 1;

/**
 * The faults a request's headers ask for. `get` returns a header by lower-case name (joined
 * with ", " when repeated). `rand` gives [0, 1) floats: one draw per fault whose percentage is
 * strictly between 0 and 100 (in the order above), one more per kept jittered delay (its seed).
 */
export function faultsFromHeaders(get: (name: string) => string | undefined, rand: () => number, parsers: FaultParsers): HeaderFaults {
  const errors: string[] = [];
  const chosen: FaultAction[] = [];
  const labels: string[] = [];
  const push = (a: FaultAction, label: string) => {
    chosen.push(a);
    labels.push(label);
  };

  // --- Envoy: delay ---
  const delayValue = get(FAULT_HEADERS.delay);
  if (delayValue !== undefined) {
    const ms = strictInt(delayValue);
    if (ms === null || ms > MAX_DURATION_MS) errors.push(ignored(FAULT_HEADERS.delay, delayValue, `expected whole milliseconds from 0 to ${MAX_DURATION_MS}`));
    else if (drawn(FAULT_HEADERS.delayPercentage, get, rand, errors, parsers)) {
      push({ kind: "delay", at: "request", message: null, direction: "request", delay: { type: "fixed", ms }, jitterSeed: 0 }, FAULT_HEADERS.delay);
    }
  } else strayPercentage(FAULT_HEADERS.delayPercentage, FAULT_HEADERS.delay, get, errors);

  // --- Envoy: abort (HTTP status wins over gRPC status, as in Envoy) ---
  const httpValue = get(FAULT_HEADERS.abortHttp);
  const grpcValue = get(FAULT_HEADERS.abortGrpc);
  let abort: FaultAction | null = null;
  let abortLabel = "";
  if (httpValue !== undefined) {
    const status = strictInt(httpValue);
    if (status === null || status < 200 || status > 599) errors.push(ignored(FAULT_HEADERS.abortHttp, httpValue, "expected an HTTP status from 200 to 599"));
    else {
      // Envoy answers a gRPC request's HTTP abort as a gRPC local reply: Trailers-Only, :status 200,
      // grpc-status mapped from the HTTP status (Grpc::Utility::httpToGrpcStatus, same table as grpc-go's).
      abort = { kind: "abort", code: codeFromHttpStatus(status), message: ENVOY_ABORT_MESSAGE, details: null, afterMessages: null };
      abortLabel = FAULT_HEADERS.abortHttp;
    }
  }
  if (grpcValue !== undefined) {
    const code = strictInt(grpcValue);
    if (abort !== null) errors.push(ignored(FAULT_HEADERS.abortGrpc, grpcValue, `${FAULT_HEADERS.abortHttp} is also set and wins (Envoy's rule)`));
    else if (code === null || code > U32_MAX) errors.push(ignored(FAULT_HEADERS.abortGrpc, grpcValue, `expected a gRPC status code from 0 to ${U32_MAX}`));
    else {
      abort = { kind: "abort", code, message: ENVOY_ABORT_MESSAGE, details: null, afterMessages: null };
      abortLabel = FAULT_HEADERS.abortGrpc;
    }
  }
  if (abort !== null) {
    if (drawn(FAULT_HEADERS.abortPercentage, get, rand, errors, parsers)) push(abort, abortLabel);
  } else if (httpValue === undefined && grpcValue === undefined) {
    strayPercentage(FAULT_HEADERS.abortPercentage, `${FAULT_HEADERS.abortHttp} or ${FAULT_HEADERS.abortGrpc}`, get, errors);
  }

  // --- Envoy: response throughput, KiB/s ---
  const kibValue = get(FAULT_HEADERS.throughput);
  if (kibValue !== undefined) {
    const kib = strictInt(kibValue);
    if (kib === null || kib < 1 || kib > U32_MAX) errors.push(ignored(FAULT_HEADERS.throughput, kibValue, "expected KiB per second, a whole number above 0"));
    else if (drawn(FAULT_HEADERS.throughputPercentage, get, rand, errors, parsers)) {
      push({ kind: "bandwidth", bytesPerSecond: kib * 1024, direction: "response" }, FAULT_HEADERS.throughput);
    }
  } else strayPercentage(FAULT_HEADERS.throughputPercentage, FAULT_HEADERS.throughput, get, errors);

  // --- dojang ---
  const dojang = get(FAULT_HEADERS.dojang);
  if (dojang !== undefined) {
    for (const p of parseDojangFaultHeader(dojang, parsers)) {
      const label = `${FAULT_HEADERS.dojang} ${JSON.stringify(p.token)}`;
      if (!p.ok) {
        errors.push(`${label} ignored: ${p.error}`);
        continue;
      }
      if (!fires(p.percentage, rand)) continue;
      const a = p.action;
      push(a.kind === "delay" && a.delay.type !== "fixed" ? { ...a, jitterSeed: seedFromDraw(rand()) } : a, label);
    }
  }

  // --- stacking: first per slot wins ---
  const { kept, dropped } = stackFaults(chosen);
  for (const d of dropped) {
    const i = chosen.indexOf(d);
    const why = isTerminalFault(d) ? "the call already has a terminal fault" : `an earlier ${d.kind} fault acts at the same point`;
    errors.push(`${labels[i] ?? d.kind} ignored: ${why}`);
  }
  return { actions: kept, errors };
}

/** One x-dojang-fault item: its text, and the action or the reason it is ignored. */
export type DojangFaultItem =
  | { readonly ok: true; readonly token: string; readonly action: FaultAction; readonly percentage: number }
  | { readonly ok: false; readonly token: string; readonly error: string };

/** Parses an x-dojang-fault value (see the file header). Percentages are returned, not drawn. */
export function parseDojangFaultHeader(value: string, parsers: FaultParsers): DojangFaultItem[] {
  if (value.length > MAX_HEADER_CHARS) {
    return [{ ok: false, token: value.slice(0, 40) + "...", error: `the value is longer than ${MAX_HEADER_CHARS} characters` }];
  }
  const tokens = value.split(",").map((t) => t.trim()).filter((t) => t !== "");
  const out: DojangFaultItem[] = [];
  tokens.forEach((token, i) => {
    if (i >= MAX_FAULTS) {
      out.push({ ok: false, token, error: `at most ${MAX_FAULTS} faults per header` });
      return;
    }
    out.push(parseToken(token, parsers));
  });
  return out;
}

// === x-dojang-fault tokens ===

const KIND_ALIASES: Readonly<Record<string, string>> = { close: "close_connection" };
const PARAM_ALIASES: Readonly<Record<string, string>> = { msg: "message", type: "contentType", dir: "direction" };

interface Point {
  readonly name: string;
  readonly n: string | undefined;
}

type Fields = Record<string, unknown>;

/** Per kind: how `=arg` and `@point[:N]` become config keys; a string result is an error. */
const KIND_SYNTAX: Readonly<Record<string, (arg: string | undefined, point: Point | undefined, f: Fields) => string | null>> = {
  abort(arg, point, f) {
    if (arg !== undefined) f["code"] = arg;
    if (point !== undefined) {
      if (point.name !== "after_messages") return `abort takes only "@after_messages:N", not "@${point.name}"`;
      f["afterMessages"] = point.n ?? "";
    }
    return null;
  },
  http(arg, point, f) {
    if (arg !== undefined) f["status"] = arg;
    return point === undefined ? null : `http takes no "@" part`;
  },
  reset(arg, point, f) {
    if (arg !== undefined) f["code"] = arg;
    if (point !== undefined) {
      f["at"] = point.name;
      if (point.n !== undefined) f["messages"] = point.n;
    }
    return null;
  },
  goaway(arg, point, f) {
    if (arg !== undefined) f["mode"] = arg;
    return point === undefined ? null : `goaway takes no "@" part`;
  },
  close_connection(arg, point, f) {
    if (arg !== undefined) f["afterBytes"] = arg;
    return point === undefined ? null : `close_connection takes no "@" part`;
  },
  shape(arg, point, f) {
    if (arg !== undefined) f["shape"] = arg;
    return point === undefined ? null : `shape takes no "@" part`;
  },
  delay(arg, point, f) {
    if (arg !== undefined) {
      const uniform = /^(.+?)\.\.(.+)$/.exec(arg);
      const normal = /^(.+?)~(.+)$/.exec(arg);
      if (uniform !== null) f["jitter"] = { uniform: [uniform[1], uniform[2]] };
      else if (normal !== null) f["jitter"] = { normal: { mean: normal[1], stddev: normal[2] } };
      else f["delay"] = arg;
    }
    if (point !== undefined) {
      f["at"] = point.name;
      if (point.n !== undefined) f["message"] = point.n;
    }
    return null;
  },
  bandwidth(arg, point, f) {
    if (arg !== undefined) f["bytesPerSecond"] = arg;
    if (point !== undefined) {
      if (point.n !== undefined) return `bandwidth takes "@request" or "@response"`;
      f["direction"] = point.name;
    }
    return null;
  },
  blackhole(arg, point) {
    return arg === undefined && point === undefined ? null : "blackhole takes no arguments";
  },
  stall(arg, point, f) {
    if (arg !== undefined && point !== undefined) return 'give the direction once: "stall=response"';
    const d = arg ?? point?.name;
    if (d !== undefined) f["direction"] = d;
    return null;
  },
  deadline(arg, point, f) {
    if (arg !== undefined) f["mode"] = arg;
    return point === undefined ? null : 'deadline takes no "@" part (use ";factor=0.5" or ";by=1s")';
  },
  unreachable(arg, point) {
    return arg === undefined && point === undefined ? null : "unreachable takes no arguments";
  },
  upstream_reset(arg, point, f) {
    if (arg !== undefined) f["code"] = arg;
    if (point !== undefined) {
      if (point.name !== "after_messages") return `upstream_reset takes only "@after_messages:N" (request messages), not "@${point.name}"`;
      f["afterRequestMessages"] = point.n ?? "";
    }
    return null;
  },
};

function parseToken(token: string, parsers: FaultParsers): DojangFaultItem {
  const fail = (error: string): DojangFaultItem => ({ ok: false, token, error });
  const [head = "", ...params] = token.split(";").map((s) => s.trim());
  const atIndex = head.indexOf("@");
  const kindArg = atIndex < 0 ? head : head.slice(0, atIndex);
  const pointText = atIndex < 0 ? undefined : head.slice(atIndex + 1).trim();
  const eq = kindArg.indexOf("=");
  const rawKind = (eq < 0 ? kindArg : kindArg.slice(0, eq)).trim().toLowerCase();
  const kind = KIND_ALIASES[rawKind] ?? rawKind;
  const syntax = KIND_SYNTAX[kind];
  if (syntax === undefined) {
    const names = [...FAULT_KINDS, ...Object.keys(KIND_ALIASES)];
    return fail(`unknown fault kind ${JSON.stringify(rawKind)}: expected one of ${FAULT_KINDS.join(", ")}${didYouMean(rawKind, names)}`);
  }
  let arg: string | undefined;
  if (eq >= 0) {
    const decoded = decodeValue(kindArg.slice(eq + 1).trim());
    if (decoded === null) return fail("bad percent-encoding");
    arg = decoded;
  }
  let point: Point | undefined;
  if (pointText !== undefined) {
    const m = /^([a-z_]+)(?::(\d+))?$/i.exec(pointText);
    if (m === null) return fail(`invalid "@" part ${JSON.stringify(pointText)}: expected "@name" or "@name:N"`);
    point = { name: (m[1] ?? "").toLowerCase(), n: m[2] };
  }
  const fields: Fields = { kind };
  const shapeError = syntax(arg, point, fields);
  if (shapeError !== null) return fail(shapeError);

  let percentage = 100;
  for (const p of params) {
    if (p === "") continue;
    const pe = p.indexOf("=");
    if (pe <= 0) return fail(`parameter ${JSON.stringify(p)} needs the form key=value`);
    const rawKey = p.slice(0, pe).trim();
    const val = decodeValue(p.slice(pe + 1).trim());
    if (val === null) return fail(`bad percent-encoding in parameter ${JSON.stringify(rawKey)}`);
    if (rawKey === "pct" || rawKey === "percentage") {
      const r = parsers.parsePercentage(val, rawKey);
      if (!r.ok) return fail(describeIssues(r.issues));
      percentage = r.value;
      continue;
    }
    const key = PARAM_ALIASES[rawKey] ?? rawKey;
    if (key === "kind" || Object.hasOwn(fields, key)) return fail(`${JSON.stringify(key)} is given twice`);
    fields[key] = val;
  }
  const r = parsers.parseFaultAction(fields, "");
  if (!r.ok) return fail(describeIssues(r.issues));
  return { ok: true, token, action: r.action, percentage };
}

/** Percent-decoding that never throws (null on a malformed escape). */
function decodeValue(s: string): string | null {
  if (!s.includes("%")) return s;
  try {
    return decodeURIComponent(s);
  } catch {
    return null;
  }
}

function describeIssues(issues: readonly FaultIssue[]): string {
  return issues.map((i) => (i.path === "" ? i.message : `${i.path}: ${i.message}`)).join("; ");
}

// === Envoy headers ===

/** Envoy parses these as plain unsigned integers; so does dojang (no sign, no spaces inside, ≤ 10 digits). */
function strictInt(s: string): number | null {
  const t = s.trim();
  return /^\d{1,10}$/.test(t) ? Number(t) : null;
}

function ignored(header: string, value: string, why: string): string {
  return `${header} ${JSON.stringify(value.length > 60 ? value.slice(0, 57) + "..." : value)} ignored: ${why}`;
}

/**
 * Whether a fault with a `-percentage` header fires: absent = 100 (Envoy). An invalid value drops
 * the fault with a reason (Envoy would fall back to the configured percentage; dojang has none
 * for header faults, and firing at 100 % on a typo would surprise more than not firing).
 */
function drawn(header: string, get: (name: string) => string | undefined, rand: () => number, errors: string[], parsers: FaultParsers): boolean {
  const v = get(header);
  if (v === undefined) return true;
  const r = parsers.parsePercentage(v, "");
  if (!r.ok) {
    errors.push(ignored(header, v, `${describeIssues(r.issues)}; the fault it controls is not applied`));
    return false;
  }
  return fires(r.value, rand);
}

function fires(percentage: number, rand: () => number): boolean {
  if (percentage >= 100) return true;
  if (percentage <= 0) return false;
  return rand() * 100 < percentage;
}

function strayPercentage(header: string, base: string, get: (name: string) => string | undefined, errors: string[]): void {
  const v = get(header);
  if (v !== undefined) errors.push(ignored(header, v, `it only applies together with ${base}`));
}
