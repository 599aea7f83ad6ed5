// The /faults admin REST API (Toxiproxy-style) as a pure request → response function, so it is
// tested without sockets; the admin server passes method, path, body text, the clock and the
// config's fault parsers in (control.ts loads them on the API's first use).
//
//   GET    /faults          200 { faults: [rule + source, matched, fired], seed, maxActiveFaults, overflowed }
//   POST   /faults          201 rule (id assigned if absent) | 400 invalid | 409 duplicate id
//   GET    /faults/{id}     200 rule | 404
//   PATCH  /faults/{id}     200 rule | 400 (rule unchanged) | 404; body is a JSON merge patch (RFC 7396)
//   DELETE /faults/{id}     204 | 404
//   POST   /faults/reset    200 { faults: [...] }: API rules removed, config rules restored, counters zeroed
// Errors are { error, issues?: [{ path, message }] }. Other methods: 405 with `allow` in the body
// (send it as the Allow header). Read-only fields (source, matched, fired) in a body are ignored,
// so a GET result can be edited and sent back.

import type { FaultIssue } from "../../../config/faults/parse.js";
import type { FaultParsers } from "../../../config/parsers.js";
import type { FaultRuleStatus, FaultSet } from "./select.js";

export interface FaultsApiResponse {
  readonly status: number;
  /** JSON-serializable; null for 204. */
  readonly body: unknown;
}

const READ_ONLY_KEYS = ["source", "matched", "fired"] as const;

/** null when `path` is not under /faults (the admin server then tries its other routes). */
export function handleFaultsApi(method: string, path: string, body: string, set: FaultSet, nowMs: number, parsers: FaultParsers): FaultsApiResponse | null {
  const q = path.indexOf("?");
  const p = q < 0 ? path : path.slice(0, q);
  const m = method.toUpperCase();
  if (p === "/faults" || p === "/faults/") {
    if (m === "GET") return { status: 200, body: listBody(set, parsers) };
    if (m === "POST") return create(body, set, nowMs, parsers);
    return notAllowed("GET, POST");
  }
  if (!p.startsWith("/faults/")) return null;
  const rest = p.slice("/faults/".length).replace(/\/$/, "");
  if (rest.includes("/")) return notFound(`no such path ${JSON.stringify(p)}`);
  if (rest === "reset") {
    if (m !== "POST") return notAllowed("POST");
    set.reset(nowMs);
    return { status: 200, body: { faults: set.list().map((s) => view(s, parsers)) } };
  }
  let id: string;
  try {
    id = decodeURIComponent(rest);
  } catch {
    return notFound(`no fault rule with id ${JSON.stringify(rest)}`);
  }
  switch (m) {
    case "GET": {
      const s = set.get(id);
      return s === undefined ? unknownId(id) : { status: 200, body: view(s, parsers) };
    }
    case "PATCH":
      return patch(id, body, set, parsers);
    case "DELETE":
      return set.remove(id) ? { status: 204, body: null } : unknownId(id);
    default:
      return notAllowed("GET, PATCH, DELETE");
  }
}

function create(text: string, set: FaultSet, nowMs: number, parsers: FaultParsers): FaultsApiResponse {
  const parsed = parseJson(text);
  if (!parsed.ok) return parsed.response;
  const r = parsers.parseFaultRule(withoutReadOnly(parsed.value), "", { source: "api" });
  if (!r.ok) return invalid(r.issues);
  const added = set.add(r.rule, nowMs);
  if (!added.ok) return { status: 409, body: { error: added.message } };
  const s = set.get(added.rule.id);
  return { status: 201, body: s === undefined ? parsers.formatFaultRule(added.rule) : view(s, parsers) };
}

function patch(id: string, text: string, set: FaultSet, parsers: FaultParsers): FaultsApiResponse {
  if (set.get(id) === undefined) return unknownId(id);
  const parsed = parseJson(text);
  if (!parsed.ok) return parsed.response;
  const r = set.update(id, withoutReadOnly(parsed.value), parsers);
  if (!r.ok) return r.notFound ? unknownId(id) : invalid(r.issues);
  const s = set.get(id);
  return { status: 200, body: s === undefined ? parsers.formatFaultRule(r.rule) : view(s, parsers) };
}

// === bodies ===

function view(s: FaultRuleStatus, parsers: FaultParsers): Record<string, unknown> {
  return { ...parsers.formatFaultRule(s.rule), source: s.rule.source, matched: s.matched, fired: s.fired };
}

function listBody(set: FaultSet, parsers: FaultParsers): Record<string, unknown> {
  return { faults: set.list().map((s) => view(s, parsers)), seed: set.seed, maxActiveFaults: set.maxActiveFaults, overflowed: set.overflowed };
}

type JsonResult = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly response: FaultsApiResponse };

function parseJson(text: string): JsonResult {
  if (text.trim() === "") return { ok: false, response: badRequest("the request body must be a JSON fault rule") };
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (err: unknown) {
    return { ok: false, response: badRequest(`invalid JSON: ${err instanceof Error ? err.message : String(err)}`) };
  }
}

function withoutReadOnly(v: unknown): unknown {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return v;
  const out: Record<string, unknown> = {};
  for (const [k, val] of Object.entries(v)) {
    if ((READ_ONLY_KEYS as readonly string[]).includes(k)) continue;
    Object.defineProperty(out, k, { value: val, enumerable: true, writable: true, configurable: true });
  }
  return out;
}

function invalid(issues: readonly FaultIssue[]): FaultsApiResponse {
  const first = issues[0];
  const summary = first === undefined ? "invalid fault rule" : `invalid fault rule: ${first.path === "" ? "" : `${first.path}: `}${first.message}`;
  return { status: 400, body: { error: summary, issues: issues.map((i) => ({ path: i.path, message: i.message })) } };
}

function badRequest(error: string): FaultsApiResponse {
  return { status: 400, body: { error } };
}

function notFound(error: string): FaultsApiResponse {
  return { status: 404, body: { error } };
}

function unknownId(id: string): FaultsApiResponse {
  return notFound(`no fault rule with id ${JSON.stringify(id)}`);
}

function notAllowed(allow: string): FaultsApiResponse {
  return { status: 405, body: { error: "method not allowed", allow } };
}
