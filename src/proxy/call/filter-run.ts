// Running a call's filter chain (filter.ts): each hook point's loop over `call.filters`, in
// chain order, and the chain's merged facts (statusExtra, resetsWithCodes). The call tests
// `filters !== null` once per hook point and calls these only then, so a call without filters
// never enters this file. A hook that holds ("false") resumes from the next filter with the
// matching continue* on the call (nextAfter). Module functions: no per-call object.
import type { CompiledRoute } from "../router.js";
import type { Cluster } from "../upstream/cluster.js";
import type { Attempt } from "./attempt.js";
import type { CallFilter, FilterCall, FilterFactory } from "./filter.js";
import type { OutgoingHeaders } from "./headers.js";

/** What running the chain needs of a call: what a filter sees (FilterCall), and its filters (implemented by Call). */
export interface ChainHost extends FilterCall {
  /** the filters acting on this call; null on the normal path */
  readonly filters: CallFilter[] | null;
}

/** The filters that act on this call (each factory may decline); null when none does. */
export function filtersFor(c: ChainHost, factories: readonly FilterFactory[], route: CompiledRoute<Cluster>, raw: readonly string[]): CallFilter[] | null {
  let fs: CallFilter[] | null = null;
  for (let i = 0; i < factories.length; i++) {
    const f = factories[i]!.forCall(c, route, raw);
    if (f !== null) (fs ??= []).push(f);
  }
  return fs;
}

/** Where a chain held by `from` goes on: the filter after it. */
export function nextAfter(c: ChainHost, from: CallFilter): number {
  return c.filters!.indexOf(from) + 1;
}

/** Request head hooks from `start`; true when every filter let the call go on. */
export function runRequestHead(c: ChainHost, start: number): boolean {
  const fs = c.filters!;
  for (let i = start; i < fs.length; i++) {
    const f = fs[i]!;
    if (f.onRequestHead !== undefined && !f.onRequestHead(c)) return false;
    if (c.done) return false;
  }
  return true;
}

/** Attempt-start hooks; true when `a` may start (no filter ended the call or failed `a`). */
export function runAttemptStart(c: ChainHost, a: Attempt): boolean {
  const fs = c.filters!;
  for (let i = 0; i < fs.length; i++) {
    const f = fs[i]!;
    if (f.onAttemptStart !== undefined && !f.onAttemptStart(c, a)) return false;
    if (c.done || c.attempt !== a) return false;
  }
  return true;
}

export function runAttemptOpen(c: ChainHost, a: Attempt): void {
  const fs = c.filters!;
  for (let i = 0; i < fs.length && !c.done; i++) fs[i]!.onAttemptOpen?.(c, a);
}

/** Response head hooks from `start`; true when every filter let the head go on. */
export function runResponseHead(c: ChainHost, start: number): boolean {
  const fs = c.filters!;
  for (let i = start; i < fs.length; i++) {
    const f = fs[i]!;
    if (f.onResponseHead !== undefined && !f.onResponseHead(c)) return false;
    if (c.done) return false;
  }
  return true;
}

export function shapeResponseHead(c: ChainHost, out: OutgoingHeaders): void {
  const fs = c.filters!;
  for (let i = 0; i < fs.length; i++) fs[i]!.shapeResponseHead?.(c, out);
}

export function runResponseHeadSent(c: ChainHost): void {
  const fs = c.filters!;
  for (let i = 0; i < fs.length && !c.done; i++) fs[i]!.onResponseHeadSent?.(c);
}

/** Request chunk hooks; true when a filter took the chunk (it writes it on itself). */
export function runRequestData(c: ChainHost, chunk: Buffer): boolean {
  const fs = c.filters!;
  for (let i = 0; i < fs.length; i++) {
    const f = fs[i]!;
    if (f.onRequestData !== undefined && f.onRequestData(c, chunk)) return true;
  }
  return false;
}

/** Request end hooks from `start`; true when every filter let the end go upstream. */
export function runRequestEnd(c: ChainHost, start: number): boolean {
  const fs = c.filters!;
  for (let i = start; i < fs.length; i++) {
    const f = fs[i]!;
    if (f.onRequestEnd !== undefined && !f.onRequestEnd(c)) return false;
    if (c.done) return false;
  }
  return true;
}

/** Response chunk hooks; true when a filter took the chunk (it writes it on itself). */
export function runResponseData(c: ChainHost, chunk: Buffer): boolean {
  const fs = c.filters!;
  for (let i = 0; i < fs.length; i++) {
    const f = fs[i]!;
    if (f.onResponseData !== undefined && f.onResponseData(c, chunk)) return true;
  }
  return false;
}

/** Trailer hooks from `start`; true when every filter let the block go out. */
export function runTrailers(c: ChainHost, start: number, block: OutgoingHeaders): boolean {
  const fs = c.filters!;
  for (let i = start; i < fs.length; i++) {
    const f = fs[i]!;
    if (f.onTrailers !== undefined && !f.onTrailers(c, block)) return false;
    if (c.done) return false;
  }
  return true;
}

export function runTrailersSent(c: ChainHost): void {
  const fs = c.filters!;
  for (let i = 0; i < fs.length; i++) fs[i]!.onTrailersSent?.(c);
}

/** The call's client stream closed. */
export function runEnd(c: ChainHost): void {
  const fs = c.filters!;
  for (let i = 0; i < fs.length; i++) fs[i]!.onEnd?.(c);
}

/** The chain's extra status fields (a rule trailer), merged in chain order; undefined without filters. */
export function statusExtra(fs: readonly CallFilter[] | null): OutgoingHeaders | undefined {
  if (fs === null) return undefined;
  let out: OutgoingHeaders | undefined;
  for (let i = 0; i < fs.length; i++) {
    const e = fs[i]!.statusExtra;
    if (e !== undefined) out = out === undefined ? e : { ...out, ...e };
  }
  return out;
}

/** Some filter may reset the upstream request with any code (it is opened with waitForTrailers). */
export function resetsWithCodes(fs: readonly CallFilter[]): boolean {
  for (let i = 0; i < fs.length; i++) if (fs[i]!.wire?.resetsWithCodes === true) return true;
  return false;
}
