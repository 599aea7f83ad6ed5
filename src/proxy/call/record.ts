// The end of a call's accounting: its counters and histograms, and its access record (the
// access log line and the journal behind GET /calls), built once when the client stream has
// closed. Reads the call's facts; changes nothing on the call. No per-call object unless an
// access record is wanted (the access log is on, or the journal keeps calls).
import { codeName, decodeGrpcMessage, forwardedBytes, forwardedMessages, refusedBytes } from "../../translate/index.js";
import type { AccessRecord } from "../observe/log.js";
import type { Call } from "./call.js";
import type { CallFilter } from "./filter.js";

/** Counts the ended call `c` in its metrics and writes its access record (log and journal). */
export function recordCall(c: Call): void {
  const ctx = c.ctx;
  const m = ctx.metrics;
  const fs = c.filters;
  m.live.activeCalls--;
  const attempts = c.attempts;
  if (attempts > 0) m.callAttempts.observe(attempts);
  const code = c.code;
  m.countCall(c.series, code, c.decidedBy, fs === null ? undefined : faultRuleLabel(fs));
  const dur = ctx.now() - c.t0;
  c.series.duration.observe(dur / 1000);
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
  if (logIt || ctx.journal.size > 0) {
    const prev = c.prevAttempts;
    const peer = c.peer;
    rec = {
      request_id: c.requestId,
      trace_id: c.trace?.traceId,
      path: c.path,
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
    ctx.journal.push(rec);
    if (logIt) ctx.access.info(rec, "call");
  }
  if (c.trace !== null && c.trace.sampled) endTrace(c, rec);
}

/** A sampled call's spans end (observe/tracing.ts) with its final facts; `rec`: its access record, if one was made. */
function endTrace(c: Call, rec: AccessRecord | undefined): void {
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
  c.ctx.tracing!.end(c.trace!, {
    code: c.code,
    // (the access record has the message decoded already)
    message: rec !== undefined ? rec.grpc_message : c.messageEncoded && c.message !== undefined ? decodeGrpcMessage(c.message) : c.message,
    decidedBy: c.decidedBy,
    route: c.route?.label,
    requestId: c.requestId,
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
