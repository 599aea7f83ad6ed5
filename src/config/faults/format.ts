// A fault rule back in its input form (GET /faults, PATCH base): formatFaultRule(r) parses back to r.

import type { DelaySpec, FaultAction, FaultRule } from "./model.js";
import { formatDuration } from "../units.js";
import { CODE_NAMES } from "../../translate/codes.js";
import { H2_ERROR_NAMES } from "./schema/scalars.js";
import type { CallRange } from "./schema/match.js";

type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

const grpcCodeOut = (code: number): Json => CODE_NAMES[code] ?? code;
const h2CodeOut = (code: number): Json => H2_ERROR_NAMES[code] ?? code;

function formatCalls(calls: readonly CallRange[]): string {
  return calls.map(([a, b]) => (a === b ? `${a}` : b === Number.POSITIVE_INFINITY ? `${a}-` : `${a}-${b}`)).join(",");
}

function formatDelay(spec: DelaySpec): Record<string, Json> {
  switch (spec.type) {
    case "fixed":
      return { delay: formatDuration(spec.ms) };
    case "uniform":
      return { jitter: { uniform: [formatDuration(spec.minMs), formatDuration(spec.maxMs)] } };
    case "normal":
      return { jitter: { normal: { mean: formatDuration(spec.meanMs), stddev: formatDuration(spec.stddevMs) } } };
    default:
      return {};
  }
}

/** A FaultAction in its input form (what parseFaultAction accepts back). */
export function formatFaultAction(a: FaultAction): Record<string, Json> {
  switch (a.kind) {
    case "abort": {
      const out: Record<string, Json> = { kind: a.kind, code: grpcCodeOut(a.code), message: a.message };
      if (a.details !== null) out["details"] = a.details;
      if (a.afterMessages !== null) out["afterMessages"] = a.afterMessages;
      return out;
    }
    case "http":
      return { kind: a.kind, status: a.status, body: a.body, contentType: a.contentType };
    case "reset": {
      const out: Record<string, Json> = { kind: a.kind, code: h2CodeOut(a.code), at: a.at };
      if (a.at === "after_messages" || a.at === "mid_message") out["messages"] = a.messages;
      return out;
    }
    case "goaway":
      return { kind: a.kind, mode: a.mode, code: h2CodeOut(a.code) };
    case "close_connection":
      return { kind: a.kind, afterBytes: a.afterBytes };
    case "shape":
      return a.contentType === null ? { kind: a.kind, shape: a.shape } : { kind: a.kind, shape: a.shape, contentType: a.contentType };
    case "delay": {
      const out: Record<string, Json> = { kind: a.kind, at: a.at };
      if (a.at === "message") {
        if (a.message !== null) out["message"] = a.message;
        out["direction"] = a.direction;
      }
      return { ...out, ...formatDelay(a.delay) };
    }
    case "bandwidth":
      return { kind: a.kind, bytesPerSecond: a.bytesPerSecond, direction: a.direction };
    case "stall":
      return { kind: a.kind, direction: a.direction };
    case "deadline": {
      const out: Record<string, Json> = { kind: a.kind, mode: a.mode };
      if (a.factor !== null) out["factor"] = a.factor;
      if (a.byMs !== null) out["by"] = formatDuration(a.byMs);
      return out;
    }
    case "upstream_reset":
      return { kind: a.kind, afterRequestMessages: a.afterRequestMessages, code: h2CodeOut(a.code) };
    case "blackhole":
    case "unreachable":
      return { kind: a.kind };
    default:
      return {};
  }
}

/** A FaultRule in its input form: parseFaultRule(formatFaultRule(r)) gives r back (source aside). */
export function formatFaultRule(rule: FaultRule): Record<string, Json> {
  const out: Record<string, Json> = {};
  if (rule.id !== "") out["id"] = rule.id;
  if (rule.description !== null) out["description"] = rule.description;
  out["enabled"] = rule.enabled;
  if (rule.seed !== null) out["seed"] = rule.seed;
  const m = rule.match;
  const match: Record<string, Json> = {};
  if (m.listener !== null) match["listener"] = m.listener;
  if (m.route !== null) match["route"] = m.route;
  if (m.service !== null) match["service"] = m.service;
  if (m.method !== null) match["method"] = m.method;
  if (m.metadata.length > 0) match["metadata"] = m.metadata.map((t) => ({ ...t }));
  if (m.direction !== null) match["direction"] = m.direction;
  out["match"] = match;
  const f = rule.fire;
  const fire: Record<string, Json> = {};
  if (f.percentage !== 100) fire["percentage"] = f.percentage;
  if (f.calls !== null) fire["calls"] = formatCalls(f.calls);
  if (f.every !== null) fire["every"] = f.every;
  if (f.maxTimes !== null) fire["maxTimes"] = f.maxTimes;
  if (f.afterMs !== 0) fire["after"] = formatDuration(f.afterMs);
  if (f.forMs !== null) fire["for"] = formatDuration(f.forMs);
  out["fire"] = fire;
  out["action"] = formatFaultAction(rule.action);
  return out;
}

