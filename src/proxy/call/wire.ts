// The wire capability (filter.ts CallWire) of one call: its two streams, and the ends a filter
// that acts on the wire itself (the fault filter) has already put on them. Stateless: made by
// call.wire() for a filter that asks (the fault filter, once per call it acts on). It changes the
// call's state only through settle(), markResponded(), setPendingTrailers() and takeOverResponse().
import type { ClientHttp2Stream } from "node:http2";
import type { DecidedBy } from "../../translate/index.js";
import type { Attempt } from "./attempt.js";
import type { CallContext } from "./context.js";
import type { Downstream } from "./downstream.js";
import type { CallWire } from "./filter.js";
import type { OutgoingHeaders } from "./headers.js";

/** What the wire capability needs of its call (implemented by Call). */
export interface WireHost {
  readonly ctx: CallContext;
  readonly down: Downstream;
  readonly attempt: Attempt | null;
  settle(code: number, message: string, decidedBy: DecidedBy): boolean;
  markResponded(): void;
  setPendingTrailers(t: OutgoingHeaders): void;
  /** a filter owns the rest of the response: upstream events are dropped */
  takeOverResponse(): void;
}

export class Wire implements CallWire {
  constructor(private readonly call: WireHost) {}

  get down(): Downstream {
    return this.call.down;
  }

  get upstream(): ClientHttp2Stream | undefined {
    return this.call.attempt?.up;
  }

  recordEnd(code: number, message: string, decidedBy: DecidedBy): void {
    const c = this.call;
    if (!c.settle(code, message, decidedBy)) return;
    c.markResponded();
  }

  endWithTrailers(block: OutgoingHeaders, code: number, message: string, decidedBy: DecidedBy): void {
    const c = this.call;
    if (!c.settle(code, message, decidedBy)) return;
    const down = c.down;
    if (down.destroyed || down.closed) return;
    c.setPendingTrailers(block);
    down.end();
  }

  takeOverResponse(): void {
    this.call.takeOverResponse();
  }

  lowestStreamIdOnSession(): number {
    const d = this.call.down;
    const session = d.session;
    let low = d.id ?? 1;
    for (const c of this.call.ctx.active) {
      const id = c.down.id;
      if (c.down.session === session && id !== undefined && id < low && !c.down.closed) low = id;
    }
    return low;
  }
}
