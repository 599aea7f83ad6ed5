// Live call records for `dojang tap` (GET /tap on the admin listener): Linkerd's tap in dojang's
// words. A subscriber gives a filter and a sink; each call that ends while one is subscribed and
// matches it is handed to the sink as its access record. The sink decides what a slow reader
// costs (the admin's drops past a byte budget and counts, admin.ts; a worker's batches to the
// primary, bounded the same way, workers.ts). With nobody subscribed a call pays one length test
// (call/record.ts), and no access record is made for the tap.
import { CODE_NAMES, DECIDED_BY } from "../../translate/index.js";
import { cidrContains, parseAddress, parseCidr, type Cidr } from "../../translate/cidr.js";
import type { AccessRecord } from "./log.js";

/** What a subscriber wants to see; every condition given must hold (any entry of a list). */
export interface TapFilter {
  /** exact paths ("/pkg.Svc/M") */
  readonly paths: readonly string[];
  /** service prefixes ("/pkg.Svc/") from "pkg.Svc/*" */
  readonly services: readonly string[];
  readonly codes: readonly number[];
  /** calls that did not end 0 OK */
  readonly failed: boolean;
  readonly decidedBy: readonly string[];
  /** route labels, as the access record's `route` ("path:/pkg.Svc/M", "prefix:/") */
  readonly routes: readonly string[];
  readonly clients: readonly Cidr[];
}

/** The filter's query parameters (GET /tap, `dojang tap` flags), and what each takes. */
export const TAP_PARAMS = ["method", "code", "failed", "decided_by", "route", "client"] as const;

const CODE_BY_NAME: ReadonlyMap<string, number> = new Map(CODE_NAMES.map((n, i) => [n, i]));

/** A filter from a query string (`method=pkg.Svc/M,pkg.Other/*&code=UNAVAILABLE,4&failed&decided_by=upstream`), or what is wrong with it. */
export function parseTapFilter(q: URLSearchParams): TapFilter | string {
  const list = (name: string): string[] =>
    q
      .getAll(name)
      .flatMap((v) => v.split(","))
      .map((v) => v.trim())
      .filter((v) => v !== "");
  for (const k of q.keys()) if (!(TAP_PARAMS as readonly string[]).includes(k)) return `unknown filter "${k}": the filters are ${TAP_PARAMS.join(", ")}`;
  const paths: string[] = [];
  const services: string[] = [];
  for (const m of list("method")) {
    const p = m.startsWith("/") ? m : `/${m}`;
    if (p.endsWith("/*")) services.push(p.slice(0, -1));
    else paths.push(p);
  }
  const codes: number[] = [];
  for (const c of list("code")) {
    const n = /^\d{1,2}$/.test(c) ? Number(c) : CODE_BY_NAME.get(c.toUpperCase());
    if (n === undefined || n > 16) return `code "${c}": expected a gRPC code, 0-16 or its name (UNAVAILABLE)`;
    codes.push(n);
  }
  const decidedBy = list("decided_by");
  for (const d of decidedBy) if (!Object.hasOwn(DECIDED_BY, d)) return `decided_by "${d}": not a decided_by value (${Object.keys(DECIDED_BY).join(", ")})`;
  const clients: Cidr[] = [];
  for (const c of list("client")) {
    const b = parseCidr(c);
    if (b === null) return `client "${c}": expected an address or a CIDR block (10.0.0.0/8)`;
    clients.push(b);
  }
  const failed = q.get("failed");
  if (failed !== null && failed !== "" && failed !== "true" && failed !== "1") return `failed takes no value (or true), got "${failed}"`;
  return { paths, services, codes, failed: failed !== null, decidedBy, routes: list("route"), clients };
}

/** Whether `rec` passes `f`. */
export function tapMatches(f: TapFilter, rec: AccessRecord): boolean {
  if (f.failed && rec.grpc_code === 0) return false;
  if (f.codes.length > 0 && !f.codes.includes(rec.grpc_code)) return false;
  if (f.decidedBy.length > 0 && !f.decidedBy.includes(rec.decided_by)) return false;
  if (f.paths.length + f.services.length > 0) {
    const p = rec.path;
    const svc = f.services.some((s) => p.length > s.length && p.startsWith(s) && p.indexOf("/", s.length) < 0);
    if (!svc && !f.paths.includes(p)) return false;
  }
  if (f.routes.length > 0 && (rec.route === undefined || !f.routes.includes(rec.route))) return false;
  if (f.clients.length > 0) {
    const a = rec.client_address === undefined ? null : parseAddress(rec.client_address);
    if (a === null || !f.clients.some((b) => cidrContains(b, a))) return false;
  }
  return true;
}

/** Where a subscriber's records go; it bounds what it holds itself (drop and count). */
export interface TapSink {
  push(rec: AccessRecord): void;
}

interface Subscriber {
  readonly filter: TapFilter;
  readonly sink: TapSink;
}

/** The process's tap subscribers. `size` is what a call tests. */
export class TapHub {
  private subs: readonly Subscriber[] = [];

  get size(): number {
    return this.subs.length;
  }

  /** Adds a subscriber; returns its unsubscribe. */
  subscribe(filter: TapFilter, sink: TapSink): () => void {
    const s: Subscriber = { filter, sink };
    this.subs = [...this.subs, s];
    return () => {
      this.subs = this.subs.filter((x) => x !== s);
    };
  }

  /** An ended call's record to every subscriber whose filter it passes. */
  publish(rec: AccessRecord): void {
    const subs = this.subs;
    for (let i = 0; i < subs.length; i++) {
      const s = subs[i]!;
      if (tapMatches(s.filter, rec)) s.sink.push(rec);
    }
  }
}
