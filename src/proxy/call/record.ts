// The end of a call's accounting: its counters and histograms, its windows (GET /stats), and its
// access record (the access log line, the journal behind GET /calls, the failed-calls ring behind
// GET /calls?failed, the live tap behind GET /tap), built once when the client stream has closed.
// Reads the call's facts; changes nothing on the call. No per-call object unless an access record
// is wanted (the access log is on, the journal keeps calls, the call failed and failedCalls keeps
// them, or someone taps).
import { REDACTED, codeName, decodeGrpcMessage, forwardedBytes, forwardedMessages, redactTarget, refusedBytes } from "../../translate/index.js";
import type { DecidedBy, FrameScanner } from "../../translate/index.js";
import { redactRecord, type AccessRecord } from "../observe/log.js";
import { latencyBin } from "../observe/stats.js";
import { pairIndex, type Stats } from "../observe/windows.js";
import type { MethodSeries } from "../observe/metrics.js";
import type { CallTrace, Trace } from "../observe/tracing.js";
import type { CompiledRoute } from "../router.js";
import type { Cluster } from "../upstream/cluster.js";
import type { Attempt } from "./attempt.js";
import type { CallContext } from "./context.js";
import type { CallFilter } from "./filter.js";
import type { ClientPeer } from "./headers.js";

/** What the record reads of an ended call (implemented by Call); all of it read-only here. */
export interface RecordedCall {
  readonly ctx: CallContext;
  readonly series: MethodSeries;
  readonly t0: number;
  readonly path: string;
  readonly refusedTarget: string | undefined;
  readonly authority: string | undefined;
  readonly peer: ClientPeer | undefined;
  readonly requestId: string;
  readonly prevAttempts: string | undefined;
  readonly route: CompiledRoute<Cluster> | undefined;
  readonly attempt: Attempt | null;
  readonly retry: { readonly lastUpstream: string | undefined } | null;
  readonly attempts: number;
  readonly budgetInMs: number | undefined;
  readonly budgetOutMs: number | undefined;
  readonly reqScan: FrameScanner;
  readonly respScan: FrameScanner;
  readonly code: number;
  readonly message: string | undefined;
  readonly messageEncoded: boolean;
  readonly decidedBy: DecidedBy;
  readonly filters: readonly CallFilter[] | null;
  readonly trace: Trace | null;
  readonly clientProtocol: string | undefined;
}

/** Counts the ended call `c` in its metrics and writes its access record (log and journal). */
export function recordCall(c: RecordedCall): void {
  const ctx = c.ctx;
  const m = ctx.metrics;
  const fs = c.filters;
  m.live.activeCalls--;
  const attempts = c.attempts;
  if (attempts > 0) m.callAttempts.observe(attempts);
  const code = c.code;
  m.countCall(c.series, code, c.decidedBy, fs === null ? undefined : faultRuleLabel(fs));
  const end = ctx.now();
  const dur = end - c.t0;
  c.series.duration.observe(dur / 1000);
  const stats = ctx.stats;
  if (stats !== null) countWindows(stats, c, code, end, dur);
  // What was forwarded, not what was read: a message refused at its prefix is not counted
  // (issue 10 item 8); the bytes dropped go to req_/resp_refused_bytes.
  // The request side drops a refused chunk whole; the response side still forwards the whole
  // messages before the refused prefix (onAttemptData).
  const reqMessages = forwardedMessages(c.reqScan, false);
  const respMessages = forwardedMessages(c.respScan, true);
  c.series.reqMessages += reqMessages;
  c.series.respMessages += respMessages;
  m.live.forwardedBytes += c.reqScan.bytes + c.respScan.bytes;
  const logIt = ctx.accessLog && ctx.access.isLevelEnabled("info");
  let rec: AccessRecord | undefined;
  const keepFailed = code !== 0 && ctx.failed.size > 0;
  const tapped = ctx.tap.size > 0;
  if (logIt || ctx.journal.size > 0 || keepFailed || tapped) {
    const prev = c.prevAttempts;
    const peer = c.peer;
    rec = {
      request_id: c.requestId,
      trace_id: c.trace?.traceId,
      // the canonical method name; a :path that is not one is shown with its query redacted
      path: c.refusedTarget === undefined ? c.path : redactTarget(c.refusedTarget),
      authority: c.authority,
      client_address: peer?.address,
      client_port: peer?.port,
      tls_identity: peer?.tlsIdentity,
      tls_sni: peer?.tlsSni,
      tls_version: peer?.tlsVersion,
      grpc_code: code,
      grpc_status: codeName(code),
      decided_by: c.decidedBy,
      grpc_message: c.messageEncoded && c.message !== undefined ? decodeGrpcMessage(c.message) : c.message,
      route: c.route?.label,
      upstream: c.attempt?.session?.endpoint.label ?? c.retry?.lastUpstream,
      budget_in_ms: c.budgetInMs,
      // only for a call that went upstream (a call refused before its first attempt sent none)
      budget_out_ms: attempts > 0 ? c.budgetOutMs : undefined,
      duration_ms: Math.round(dur * 1000) / 1000,
      req_messages: reqMessages,
      req_bytes: forwardedBytes(c.reqScan, false),
      req_refused_bytes: refusedBytes(c.reqScan, false),
      resp_messages: respMessages,
      resp_bytes: forwardedBytes(c.respScan, true),
      resp_refused_bytes: refusedBytes(c.respScan, true),
      faults: undefined,
      fault_kinds: undefined,
      attempt: prev === undefined ? 1 : (Number.parseInt(prev, 10) || 0) + 1,
      attempts,
      start_ms: Math.round(performance.timeOrigin + c.t0),
      protocol: c.clientProtocol,
    };
    if (fs !== null) for (let i = 0; i < fs.length; i++) fs[i]!.annotate?.(rec);
    // what the operator named (accessLogRedact) never reaches the log or the journal
    if (ctx.accessLogRedact !== null) redactRecord(rec, ctx.accessLogRedact);
    ctx.journal.push(rec);
    if (keepFailed) ctx.failed.push(rec);
    if (tapped) ctx.tap.publish(rec);
    if (logIt) ctx.access.info(rec, "call");
  }
  const t = c.trace;
  if (t !== null && t.sampled) endTrace(c, t, rec);
}

/**
 * The call into its windows (observe/windows.ts): its method's row, its route's and the endpoint
 * of its last attempt. Each row is found once (cached on the method series, the compiled route,
 * the endpoint) and counts with a comparison and two increments; nothing is allocated.
 */
function countWindows(st: Stats, c: RecordedCall, code: number, end: number, dur: number): void {
  const sec = Math.floor(end / 1000);
  const pair = pairIndex(code, c.decidedBy);
  const bin = latencyBin(dur * 1000);
  const s = c.series;
  (s.statsRow ?? st.methodRow(s)).add(sec, pair, bin);
  const r = c.route;
  if (r !== undefined) (r.statsRow ?? st.routeRow(r, c.ctx.listener)).add(sec, pair, bin);
  const ep = c.attempt?.endpoint;
  if (ep !== undefined) (ep.statsRow ?? st.endpointRow(ep)).add(sec, pair, bin);
}

/** A sampled call's spans end (observe/tracing.ts) with its final facts; `rec`: its access record, if one was made. */
function endTrace(c: RecordedCall, t: CallTrace, rec: AccessRecord | undefined): void {
  let faults = rec?.faults;
  let kinds = rec?.fault_kinds;
  const fs = c.filters;
  if (rec === undefined && fs !== null) {
    // (no access record was made: the filters say which faults they applied)
    const scratch = { faults: undefined, fault_kinds: undefined } as unknown as AccessRecord;
    for (let i = 0; i < fs.length; i++) fs[i]!.annotate?.(scratch);
    faults = scratch.faults;
    kinds = scratch.fault_kinds;
  }
  // (what the operator named in accessLogRedact is not on the span either; the access record has
  // the message decoded, and redacted, already)
  const red = c.ctx.accessLogRedact;
  const message = rec !== undefined ? rec.grpc_message : c.messageEncoded && c.message !== undefined ? decodeGrpcMessage(c.message) : c.message;
  c.ctx.tracing!.end(t, {
    code: c.code,
    message: red !== null && message !== undefined && red.includes("grpc_message") ? REDACTED : message,
    decidedBy: c.decidedBy,
    route: c.route?.label,
    requestId: red !== null && red.includes("request_id") ? REDACTED : c.requestId,
    attempts: c.attempts,
    budgetInMs: c.budgetInMs,
    budgetOutMs: c.attempts > 0 ? c.budgetOutMs : undefined,
    faults,
    faultKinds: kinds,
  });
}

/** The call metric's fault_rule label: the filters' labels joined (undefined when none has one). */
function faultRuleLabel(fs: readonly CallFilter[]): string | undefined {
  let out: string | undefined;
  for (let i = 0; i < fs.length; i++) {
    const l = fs[i]!.wire?.faultRule;
    if (l !== undefined) out = out === undefined ? l : `${out},${l}`;
  }
  return out;
}
