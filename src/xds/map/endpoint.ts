// ClusterLoadAssignment → a cluster's endpoints and weights: the decoded mapping, and the fast
// path that reads the assignment's protobuf bytes and maps again only what changed.
import { LIMITS } from "../../config/types.js";
import type { HostPort } from "../../config/units.js";
import type { EndpointDelta, WeightedAddress } from "../../translate/endpoint-set.js";
import { Ctx, arr, at, obj, socketAddress, str, u32, type AnyDecoder, type Mapped, type Msg } from "./read.js";

export interface XdsEndpoints {
  readonly name: string;
  readonly endpoints: readonly HostPort[];
  readonly weights: readonly number[];
}

export function mapClusterLoadAssignment(cla: Msg, decode: AnyDecoder): Mapped<XdsEndpoints> {
  const c = new Ctx(decode);
  const e = mapEndpointsInto(c, cla, "");
  return c.done(e);
}

const USABLE = new Set(["", "UNKNOWN", "HEALTHY", "DEGRADED"]);

/** One LbEndpoint as mapped: its address and key, whether its health_status puts it in rotation, its load_balancing_weight as sent. */
export interface LbEndpointMapped {
  readonly hp: HostPort;
  /** "host:port", what duplicates are found by */
  readonly key: string;
  readonly usable: boolean;
  readonly weight: number;
}

/** One LbEndpoint (its address issues are added to `c`); undefined when it has no address dojang can use. */
function mapLbEndpoint(c: Ctx, le: Msg, ep: string): LbEndpointMapped | undefined {
  const hp = socketAddress(c, obj(obj(le["endpoint"])?.["address"]), at(ep, "endpoint.address"));
  if (hp === undefined) return undefined;
  return { hp, key: `${hp.host}:${hp.port}`, usable: USABLE.has(str(le["health_status"])), weight: u32(le["load_balancing_weight"]) ?? 1 };
}

/**
 * The endpoints dojang balances over: those of the lowest priority that has a usable one
 * (HEALTHY, UNKNOWN, DEGRADED), each with its load_balancing_weight (locality weights are not
 * multiplied in). Addresses must be unique (gRFC A27) and priorities without gaps.
 */
export function mapEndpointsInto(c: Ctx, cla: Msg, path: string): XdsEndpoints {
  const locs = arr(cla["endpoints"]);
  const lbs = locs.map((loc) => arr(loc["lb_endpoints"]));
  return assignEndpoints(
    c,
    str(cla["cluster_name"]),
    path,
    locs.map((loc, li) => ({ priority: Number(loc["priority"] ?? 0), count: lbs[li]!.length })),
    (li, ei) => mapLbEndpoint(c, lbs[li]![ei]!, lbPath(path, li, ei)),
    obj(cla["policy"]),
  ).value;
}

const lbPath = (path: string, li: number, ei: number): string => at(path, `endpoints[${li}].lb_endpoints[${ei}]`);

interface Locality {
  readonly priority: number;
  readonly count: number;
}

/**
 * The assignment from its localities (priority, endpoint count) and each endpoint as mapped,
 * asked for in order (so issues come in the resource's order); also each endpoint as mapped, in
 * order, and the addresses seen. Shared by the decoded form and the byte-level one
 * (mapClusterLoadAssignmentBytes).
 */
function assignEndpoints(
  c: Ctx,
  name: string,
  path: string,
  localities: readonly Locality[],
  endpoint: (li: number, ei: number) => LbEndpointMapped | undefined,
  policy: Msg | undefined,
): { readonly value: XdsEndpoints; readonly entries: (LbEndpointMapped | undefined)[]; readonly keys: Map<string, number> } {
  if (name === "") c.bad(at(path, "cluster_name"), "is required");
  const entries: (LbEndpointMapped | undefined)[] = [];
  /** key → where it was last seen, [locality, endpoint] (its path written only for an issue) */
  const seen = new Map<string, number>();
  localities.forEach((loc, li) => {
    for (let ei = 0; ei < loc.count; ei++) {
      const e = endpoint(li, ei);
      entries.push(e);
      if (e === undefined) continue;
      const prev = seen.get(e.key);
      if (prev !== undefined) c.bad(at(lbPath(path, li, ei), "endpoint.address"), `duplicate address ${e.key} (also at ${lbPath(path, Math.floor(prev / 2 ** 24), prev % 2 ** 24)})`);
      seen.set(e.key, li * 2 ** 24 + ei);
      if (e.usable && e.weight < 1) c.bad(at(lbPath(path, li, ei), "load_balancing_weight"), "must be at least 1");
    }
  });
  checkPriorities(c, path, localities);
  policyNotes(c, name, policy);
  return { value: { name, ...chooseEndpoints(localities, entries) }, entries, keys: seen };
}

/** Priorities run 0, 1, 2 … without gaps (gRFC A27). */
function checkPriorities(c: Ctx, path: string, localities: readonly Locality[]): void {
  const priorities = [...new Set(localities.map((l) => l.priority))].sort((a, b) => a - b);
  priorities.forEach((p, i) => {
    if (p !== i) c.bad(at(path, "endpoints"), `priorities must run 0, 1, 2 … without gaps (found ${priorities.join(", ")})`);
  });
}

function policyNotes(c: Ctx, name: string, policy: Msg | undefined): void {
  if (policy?.["drop_overloads"] !== undefined && arr(policy["drop_overloads"]).length > 0) c.notes.push(`${name}: policy.drop_overloads skipped`);
}

/** The usable endpoints of the lowest priority that has one, in order, with their weights (1 to 1000). */
function chooseEndpoints(localities: readonly Locality[], entries: readonly (LbEndpointMapped | undefined)[]): { endpoints: HostPort[]; weights: number[] } {
  let best = Infinity;
  let k = 0;
  for (const loc of localities) {
    if (loc.priority < best) for (let ei = 0; ei < loc.count; ei++) if (entries[k + ei]?.usable === true) best = loc.priority;
    k += loc.count;
  }
  const endpoints: HostPort[] = [];
  const weights: number[] = [];
  k = 0;
  for (const loc of localities) {
    if (loc.priority === best) {
      for (let ei = 0; ei < loc.count; ei++) {
        const e = entries[k + ei];
        if (e === undefined || !e.usable) continue;
        endpoints.push(e.hp);
        weights.push(Math.min(Math.max(e.weight, 1), LIMITS.weight.max));
      }
    }
    k += loc.count;
  }
  return { endpoints, weights };
}

// === ClusterLoadAssignment from its bytes ===
//
// A control plane sends a cluster's whole ClusterLoadAssignment again when one of its endpoints
// changes (state of the world and delta alike; only LEDS would send less). Decoding 10,000
// endpoints into objects costs tens of milliseconds, and so does even a map lookup per endpoint;
// most of them are byte for byte what came last time. So the assignment's protobuf is walked at
// the wire level (tags and lengths only), and its LbEndpoints are compared, in order, with the
// last assignment of that name (ClaMemo): the common prefix and suffix keep what they mapped to,
// and only the endpoints between are decoded, mapped and checked against the addresses held
// (one map operation each). The result is the same as mapClusterLoadAssignment's
// (test/xds/map.test.ts checks it on random assignments and random changes). Whatever the
// incremental path is not sure of (an issue anywhere) is mapped again whole, as is an assignment
// seen for the first time. Bytes the walk does not expect (a group, a bad length) give undefined:
// the caller decodes the whole message, which reports the error.

/** What the last mapping without an issue of one ClusterLoadAssignment leaves for the next. */
export interface ClaMemo {
  /** a copy of its bytes */
  readonly bytes: Uint8Array;
  /** each LbEndpoint's bytes, [from, to) pairs into `bytes` */
  readonly ranges: readonly number[];
  /** each LbEndpoint as mapped, in the same order */
  readonly entries: readonly LbEndpointMapped[];
  /** the addresses (keys) held: taken over, and changed, by the next mapping */
  readonly keys: Map<string, number>;
  /** what it mapped to (the endpoints the next one's change is from) */
  readonly value: XdsEndpoints;
  /** its one priority (every locality's), or -1 when it has several or none */
  readonly priority: number;
  /** how many of its endpoints are usable (health_status) */
  readonly usable: number;
}

// Each assignment mapped from the last one's memo, with the change of its chosen endpoints from
// that one's (endpointsChange): the LbEndpoints between the common prefix and suffix are the only
// ones that differ, so the change is found from them alone, and the xDS client hands it to the
// clusters without comparing the lists (xds/client.ts endpointChanges). Only the newest link of a
// name is kept (a new one drops the one before), so no chain of old lists stays reachable.
const changes = new WeakMap<XdsEndpoints, { readonly from: XdsEndpoints; readonly delta: EndpointDelta }>();

/** The change from the endpoints `value` was mapped from (by the incremental path) to it; undefined when it was mapped whole or its change was not worked out. */
export function endpointsChange(value: XdsEndpoints): { readonly from: XdsEndpoints; readonly delta: EndpointDelta } | undefined {
  return changes.get(value);
}

/** The one priority of `localities` (-1 for none or several) and how many of `entries` are usable. */
function shape(localities: readonly Locality[], entries: readonly (LbEndpointMapped | undefined)[]): { priority: number; usable: number } {
  let priority = localities.length === 0 ? -1 : localities[0]!.priority;
  for (const l of localities) if (l.priority !== priority) priority = -1;
  let usable = 0;
  for (const e of entries) if (e?.usable === true) usable++;
  return { priority, usable };
}

const LB_ENDPOINT = "type.googleapis.com/envoy.config.endpoint.v3.LbEndpoint";
const CLA_POLICY = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment.Policy";

/** A position in a message's bytes, read forward: one per walk, nothing allocated per field. */
class Wire {
  pos: number;
  /** the last field's payload: [start, stop) */
  start = 0;
  stop = 0;

  constructor(
    readonly b: Uint8Array,
    from: number,
    readonly end: number,
  ) {
    this.pos = from;
  }

  /** The varint at pos (pos moves past it); -1 past the end or beyond 2^53. */
  varint(): number {
    const b = this.b;
    let v = 0;
    let mul = 1;
    for (let i = this.pos; i < this.end && i < this.pos + 8; i++) {
      const x = b[i]!;
      v += (x & 0x7f) * mul;
      if (x < 0x80) {
        this.pos = i + 1;
        return v;
      }
      mul *= 128;
    }
    return -1;
  }

  /**
   * The next field's tag (its field number × 8 + wire type), with start/stop set to its payload
   * (a length-delimited field's bytes; a varint's own bytes) and pos past it; -1 when the bytes
   * are not a well-formed field; 0 at the end.
   */
  field(): number {
    if (this.pos >= this.end) return 0;
    const tag = this.varint();
    if (tag < 8) return -1;
    const wt = tag % 8;
    this.start = this.pos;
    if (wt === 0) {
      if (this.varint() < 0) return -1;
    } else if (wt === 2) {
      const len = this.varint();
      if (len < 0) return -1;
      this.start = this.pos;
      this.pos += len;
    } else if (wt === 1) this.pos += 8;
    else if (wt === 5) this.pos += 4;
    else return -1;
    if (this.pos > this.end) return -1;
    this.stop = this.pos;
    return tag;
  }
}

// tags: field number × 8 + wire type (0 varint, 2 length-delimited)
const CLA_NAME = 1 * 8 + 2;
const CLA_ENDPOINTS = 2 * 8 + 2;
const CLA_POLICY_TAG = 4 * 8 + 2;
const LOC_LB_ENDPOINTS = 2 * 8 + 2;
const LOC_PRIORITY = 5 * 8 + 0;

/** Whether a[af, at) and b[bf, bt) hold the same bytes. */
function sameBytes(a: Uint8Array, af: number, at: number, b: Uint8Array, bf: number, bt: number): boolean {
  if (at - af !== bt - bf) return false;
  for (let i = 0; i < at - af; i++) if (a[af + i] !== b[bf + i]) return false;
  return true;
}

// ignoreBOM: a name starting with U+FEFF is that name (protobufjs, reading the CDS side, keeps it)
const utf8 = new TextDecoder("utf-8", { ignoreBOM: true });

/** The assignment's fields dojang reads, found by the walk; undefined when the bytes are not what it expects. */
function walkAssignment(bytes: Uint8Array): { name: string; localities: Locality[]; ranges: number[]; policy: Uint8Array | undefined } | undefined {
  // ClusterLoadAssignment: 1 cluster_name, 2 endpoints (LocalityLbEndpoints), 4 policy
  let name = "";
  const locs: number[] = [];
  let policy: Uint8Array | undefined;
  const w = new Wire(bytes, 0, bytes.length);
  for (let tag = w.field(); tag !== 0; tag = w.field()) {
    if (tag < 0) return undefined;
    if (tag === CLA_NAME) name = utf8.decode(bytes.subarray(w.start, w.stop));
    else if (tag === CLA_ENDPOINTS) locs.push(w.start, w.stop);
    else if (tag === CLA_POLICY_TAG) policy = bytes.subarray(w.start, w.stop);
  }
  // LocalityLbEndpoints: 2 lb_endpoints (LbEndpoint), 5 priority; every LbEndpoint's bytes in one flat list
  const localities: Locality[] = [];
  const ranges: number[] = [];
  for (let k = 0; k < locs.length; k += 2) {
    let priority = 0;
    let count = 0;
    const lw = new Wire(bytes, locs[k]!, locs[k + 1]!);
    for (let tag = lw.field(); tag !== 0; tag = lw.field()) {
      if (tag < 0) return undefined;
      if (tag === LOC_LB_ENDPOINTS) {
        ranges.push(lw.start, lw.stop);
        count++;
      } else if (tag === LOC_PRIORITY) {
        const end = lw.pos;
        lw.pos = lw.start;
        priority = lw.varint() % 2 ** 32;
        lw.pos = end;
      }
    }
    localities.push({ priority, count });
  }
  return { name, localities, ranges, policy };
}

/**
 * A ClusterLoadAssignment from its serialized bytes, starting from what the last one of its
 * cluster_name left (`memoOf`); with its name and what it leaves for the next (undefined when it
 * has an issue). undefined when the bytes are not what the walk expects (then decode the
 * message: mapClusterLoadAssignment). Fields dojang does not read (a locality's `locality`,
 * weights, metadata) are skipped, not decoded.
 */
export function mapClusterLoadAssignmentBytes(
  bytes: Uint8Array,
  decode: AnyDecoder,
  memoOf: (name: string) => ClaMemo | undefined,
): { readonly name: string; readonly mapped: Mapped<XdsEndpoints>; readonly memo: ClaMemo | undefined } | undefined {
  const walked = walkAssignment(bytes);
  if (walked === undefined) return undefined;
  const { name, localities, ranges } = walked;
  let policy: Msg | undefined;
  if (walked.policy !== undefined) {
    try {
      policy = decode({ type_url: CLA_POLICY, value: walked.policy }).value;
    } catch {
      return undefined;
    }
  }
  /** one LbEndpoint decoded and mapped; undefined with `broken` set when its bytes do not decode */
  let broken = false;
  const decodeAt = (c: Ctx, k: number, li: number, ei: number): LbEndpointMapped | undefined => {
    let le: Msg;
    try {
      le = decode({ type_url: LB_ENDPOINT, value: bytes.subarray(ranges[2 * k]!, ranges[2 * k + 1]!) }).value;
    } catch {
      broken = true;
      return undefined;
    }
    return mapLbEndpoint(c, le, lbPath("", li, ei));
  };
  const memo = memoOf(name);
  if (memo !== undefined) {
    const r = incremental(bytes, name, localities, ranges, policy, memo, decode, decodeAt);
    if (broken) return undefined;
    if (r !== undefined) return r;
  }
  // the whole assignment, each endpoint decoded
  const c = new Ctx(decode);
  const first: number[] = [];
  localities.reduce((k, loc) => (first.push(k), k + loc.count), 0);
  const r = assignEndpoints(c, name, "", localities, (li, ei) => decodeAt(c, first[li]! + ei, li, ei), policy);
  if (broken) return undefined;
  const mapped = c.done(r.value);
  const clean = mapped.ok && r.entries.every((e) => e !== undefined);
  return { name, mapped, memo: clean ? { bytes: new Uint8Array(bytes), ranges, entries: r.entries as LbEndpointMapped[], keys: r.keys, value: r.value, ...shape(localities, r.entries) } : undefined };
}

/**
 * The assignment from the last one: the LbEndpoints that are byte for byte where they were (the
 * common prefix and suffix) keep what they mapped to; the ones between are decoded and mapped,
 * and their addresses checked against the ones held. undefined when anything has an issue (the
 * caller maps it whole, which reports every issue with its path).
 */
function incremental(
  bytes: Uint8Array,
  name: string,
  localities: readonly Locality[],
  ranges: readonly number[],
  policy: Msg | undefined,
  memo: ClaMemo,
  decode: AnyDecoder,
  decodeAt: (c: Ctx, k: number, li: number, ei: number) => LbEndpointMapped | undefined,
): { name: string; mapped: Mapped<XdsEndpoints>; memo: ClaMemo } | undefined {
  const n = ranges.length / 2;
  const m = memo.entries.length;
  const max = Math.min(n, m);
  const old = memo.bytes;
  const or = memo.ranges;
  let p = 0;
  while (p < max && sameBytes(bytes, ranges[2 * p]!, ranges[2 * p + 1]!, old, or[2 * p]!, or[2 * p + 1]!)) p++;
  let s = 0;
  while (s < max - p && sameBytes(bytes, ranges[2 * (n - 1 - s)]!, ranges[2 * (n - 1 - s) + 1]!, old, or[2 * (m - 1 - s)]!, or[2 * (m - 1 - s) + 1]!)) s++;
  const c = new Ctx(decode);
  if (name === "") return undefined;
  // the changed middle: decoded, mapped, and its addresses unique among those held
  const leaving = new Set<string>();
  for (let k = p; k < m - s; k++) leaving.add(memo.entries[k]!.key);
  const middle: LbEndpointMapped[] = [];
  const coming = new Set<string>();
  for (let k = p, li = 0, base = 0; k < n - s; k++) {
    while (k >= base + localities[li]!.count) base += localities[li++]!.count;
    const e = decodeAt(c, k, li, k - base);
    if (e === undefined || c.issues.length > 0 || (e.usable && e.weight < 1)) return undefined;
    if (coming.has(e.key) || (memo.keys.has(e.key) && !leaving.has(e.key))) return undefined;
    coming.add(e.key);
    middle.push(e);
  }
  checkPriorities(c, "", localities);
  if (c.issues.length > 0) return undefined;
  policyNotes(c, name, policy);
  // from here on the memo is taken over
  const keys = memo.keys;
  for (const k of leaving) if (!coming.has(k)) keys.delete(k);
  for (const k of coming) keys.set(k, 0);
  const entries = p === m - s && middle.length === 0 ? memo.entries : [...memo.entries.slice(0, p), ...middle, ...memo.entries.slice(m - s)];
  const value: XdsEndpoints = { name, ...chooseEndpoints(localities, entries) };
  const mapped = c.done(value);
  // the usable count moves by the middle alone; the priority is read from the localities (few)
  let usable = memo.usable;
  for (let k = p; k < m - s; k++) if (memo.entries[k]!.usable) usable--;
  for (const e of middle) if (e.usable) usable++;
  const priority = shape(localities, []).priority;
  const delta = middleDelta(memo, priority, usable, memo.entries, p, m - s, middle);
  changes.delete(memo.value);
  if (delta !== undefined && mapped.ok) changes.set(value, { from: memo.value, delta });
  return { name, mapped, memo: { bytes: new Uint8Array(bytes), ranges, entries, keys, value, priority, usable } };
}

/**
 * The change of the chosen endpoints (chooseEndpoints) when the LbEndpoints old[from, to) were
 * replaced by `middle` and nothing else moved; undefined when the choice may have moved as a
 * whole: localities of several priorities (a locality's priority is outside the LbEndpoint bytes
 * compared), or a side with no usable endpoint (none is chosen there). With one priority the
 * chosen endpoints are the usable ones, so the change is the middle's: a usable address that
 * leaves is removed, one that comes or changes weight is upserted. Work in proportion to the
 * middle; nothing per kept endpoint.
 */
function middleDelta(memo: ClaMemo, priority: number, usable: number, old: readonly LbEndpointMapped[], from: number, to: number, middle: readonly LbEndpointMapped[]): EndpointDelta | undefined {
  if (priority < 0 || memo.priority !== priority || usable === 0 || memo.usable === 0) return undefined;
  const weight = (e: LbEndpointMapped): number => Math.min(Math.max(e.weight, 1), LIMITS.weight.max);
  const before = new Map<string, number>();
  for (let k = from; k < to; k++) if (old[k]!.usable) before.set(old[k]!.key, weight(old[k]!));
  const upsert: WeightedAddress[] = [];
  const after = new Set<string>();
  for (const e of middle) {
    if (!e.usable) continue;
    after.add(e.key);
    if (before.get(e.key) !== weight(e)) upsert.push({ host: e.hp.host, port: e.hp.port, weight: weight(e) });
  }
  const remove: HostPort[] = [];
  for (let k = from; k < to; k++) {
    const e = old[k]!;
    if (e.usable && !after.has(e.key)) remove.push(e.hp);
  }
  return { remove, upsert };
}
