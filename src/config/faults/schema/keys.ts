// The fault filter's keys documented for the JSON Schema, beside the schema they describe (as
// config/schema/auth.ts, rate-limit.ts and headers.ts keep theirs): a rule's keys by path
// (`action<kind>.key` for a kind's own keys) and the fault set's settings. config/json-schema.ts
// reads them; a key is written and documented here, in one place. Build-time only: nothing the
// served process loads imports this file.

import { CODE_NAMES } from "../../../translate/codes.js";
import { codeKind, countKind, durationKind, enumKind, FLAG, NUM, PERCENT_RE, sizeKind, withEnv, type KeyDoc } from "../../schema/key-doc.js";
import { DEADLINE_MODES, DELAY_POINTS, DIRECTIONS, GOAWAY_MODES, RESET_POINTS, SHAPE_KINDS } from "../model.js";
import { H2_ERROR_NAMES, U32_MAX } from "./scalars.js";

const GRPC_CODE = codeKind(CODE_NAMES, 16, 'A gRPC status code: 0 to 16 or its name, e.g. "UNAVAILABLE".');
const H2_CODE = codeKind(H2_ERROR_NAMES, U32_MAX, 'An HTTP/2 error code: a number or its name, e.g. "CANCEL".');
const DIRECTION = enumKind(DIRECTIONS);

/** Fault rule keys (the rule schema: rule.ts, match.ts, action.ts), by path inside a rule; `action<kind>.key` for a kind's own keys. */
export const FAULT_KEYS: Readonly<Record<string, KeyDoc>> = {
  id: { description: 'The rule\'s id (letters, digits, "_", ".", "-"), unique in the document; used by DELETE /faults/{id}.' },
  description: { description: "Free text, shown by GET /faults." },
  enabled: { description: "A disabled rule never fires.", kind: FLAG, default: true },
  seed: { description: "This rule's own seed for percentages and jitter (default: derived from faultInjection.seed).", kind: countKind({ min: 0, max: U32_MAX }) },
  match: { description: "Which calls the rule applies to; every given test must hold. Empty: every call in its scope." },
  "match.listener": { description: "Listener name (filled in for rules under a listener)." },
  "match.route": { description: 'A route label as in logs ("prefix:/", "service:pkg.Svc", "path:/pkg.Svc/Method") or the route\'s index.' },
  "match.service": { description: 'Fully-qualified service, "pkg.Svc".' },
  "match.method": { description: 'Method name, "Get".' },
  "match.metadata": { description: "Request metadata tests, each { name, equals | present | regex }." },
  "match.metadata[].name": { description: "Header name (case-insensitive)." },
  "match.metadata[].equals": { description: "The header's value equals this." },
  "match.metadata[].present": { description: "The header is (true) or is not (false) present.", kind: FLAG },
  "match.metadata[].regex": { description: "The header's value matches this regular expression." },
  "match.direction": { description: "For bandwidth, stall and delay: the request or the response stream.", kind: DIRECTION },
  fire: { description: "When a matching call is faulted (all given conditions)." },
  "fire.percentage": {
    description: 'Share of matching calls, 0 to 100 ("12.5" or "12.5%").',
    kind: { type: ["string", "number"], pattern: withEnv(PERCENT_RE), minimum: 0, maximum: 100 },
    default: 100,
  },
  "fire.calls": { description: 'Which matching calls, counting from 1: 3, "1-2", "5-", "1-2,5" or a list.' },
  "fire.every": { description: "Every Nth matching call.", kind: countKind({ min: 1, max: U32_MAX }) },
  "fire.maxTimes": { description: "Stop after firing this many times.", kind: countKind({ min: 1, max: Number.MAX_SAFE_INTEGER }) },
  "fire.after": { description: "Only once the rule has existed this long.", kind: durationKind(0) },
  "fire.for": { description: "Only for this long after that.", kind: durationKind(1) },
  action: { description: "What happens to a faulted call; kind is one of the fault kinds." },
  kind: { description: "The fault kind." },
  "action<abort>.code": GRPC_CODE_DOC("The status the call ends with."),
  "action<abort>.message": { description: "grpc-message.", default: "injected fault" },
  "action<abort>.details": { description: "grpc-status-details-bin, base64." },
  "action<abort>.afterMessages": { description: "Let this many response messages through first.", kind: countKind({ min: 0, max: U32_MAX }) },
  "action<http>.status": { description: "HTTP status answered instead of the call (200 to 599).", kind: countKind({ min: 200, max: 599 }) },
  "action<http>.body": { description: "The response body." },
  "action<http>.contentType": { description: "The response content-type.", default: "text/html" },
  "action<reset>.code": H2_CODE_DOC("The RST_STREAM error code sent to the client."),
  "action<reset>.at": { description: "When the stream is reset.", kind: enumKind(RESET_POINTS), default: "before_headers" },
  "action<reset>.messages": { description: "Whole response messages before the reset (at: after_messages or mid_message).", kind: countKind({ min: 0, max: U32_MAX }) },
  "action<goaway>.mode": { description: "graceful (last stream id = this call) or abrupt.", kind: enumKind(GOAWAY_MODES), default: "graceful" },
  "action<goaway>.code": H2_CODE_DOC("The GOAWAY error code.", "NO_ERROR"),
  "action<close_connection>.afterBytes": { description: "Close the client's connection after this many response bytes.", kind: sizeKind({ min: 0, max: Number.MAX_SAFE_INTEGER }), default: 0 },
  "action<shape>.shape": { description: "The malformed response to answer with.", kind: enumKind(SHAPE_KINDS) },
  "action<shape>.contentType": { description: "For shape wrong_content_type: the content-type sent.", default: "text/plain" },
  "action<delay>.at": { description: "Where the delay is inserted.", kind: enumKind(DELAY_POINTS), default: "request" },
  "action<delay>.message": { description: "For at: message, which message (from 1).", kind: countKind({ min: 1, max: U32_MAX }) },
  "action<delay>.direction": { description: "For at: message, the request or the response stream.", kind: DIRECTION },
  "action<delay>.delay": { description: 'A fixed delay, e.g. "250ms" (or give jitter).', kind: durationKind(0) },
  "action<delay>.jitter": { description: 'A random delay: { uniform: ["100ms", "300ms"] } or { normal: { mean, stddev } }.' },
  "action<delay>.jitter.uniform": { description: "Lower and upper bound, each a duration." },
  "action<delay>.jitter.uniform[]": { description: "A duration.", kind: durationKind(0) },
  "action<delay>.jitter.normal": { description: "A normal distribution, clamped at 0." },
  "action<delay>.jitter.normal.mean": { description: "Mean delay.", kind: durationKind(0) },
  "action<delay>.jitter.normal.stddev": { description: "Standard deviation.", kind: durationKind(0) },
  "action<bandwidth>.bytesPerSecond": { description: 'Throughput cap, bytes per second or a size like "64KiB".', kind: sizeKind({ min: 1, max: Number.MAX_SAFE_INTEGER }) },
  "action<bandwidth>.direction": { description: "The stream that is slowed (default response).", kind: DIRECTION },
  "action<stall>.direction": { description: "The stream that stops moving (default request).", kind: DIRECTION },
  "action<deadline>.mode": { description: "drop the client's deadline, shrink it or grow it before the upstream sees it.", kind: enumKind(DEADLINE_MODES) },
  "action<deadline>.factor": { description: "Multiply the deadline (shrink: above 0 to 1; grow: 1 to 1000000).", kind: { type: ["string", "number"], pattern: withEnv(NUM) } },
  "action<deadline>.by": { description: "Shorten or lengthen the deadline by this much.", kind: durationKind(0) },
  "action<upstream_reset>.afterRequestMessages": { description: "Reset the upstream stream after this many request messages.", kind: countKind({ min: 0, max: U32_MAX }), default: 0 },
  "action<upstream_reset>.code": H2_CODE_DOC("The RST_STREAM code sent to the upstream.", "CANCEL"),
};

function GRPC_CODE_DOC(description: string): KeyDoc {
  return { description, kind: GRPC_CODE };
}
function H2_CODE_DOC(description: string, def?: string): KeyDoc {
  return def === undefined ? { description, kind: H2_CODE } : { description, kind: H2_CODE, default: def };
}

export const FAULT_SET_KEYS: Readonly<Record<string, KeyDoc>> = {
  seed: { description: "Seed for every rule's percentages and jitter, so runs replay identically.", kind: countKind({ min: 0, max: U32_MAX }), default: 0 },
  maxActiveFaults: {
    description: "At most this many faulted calls at once (Envoy's max_active_faults); null = no cap.",
    kind: { ...countKind({ min: 1, max: U32_MAX }), type: ["string", "integer", "null"] },
    default: null,
  },
};
