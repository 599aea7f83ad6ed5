// The wire capability (filter.ts CallWire) of one call: its two streams, and the ends a filter
// that acts on the wire itself (the fault filter) has already put on them. Stateless: made by
// call.wire() for a filter that asks (the fault filter, once per call it acts on).
import type { ClientHttp2Stream } from "node:http2";
import type { DecidedBy } from "../../translate/index.js";
import type { Call } from "./call.js";
import type { Downstream } from "./downstream.js";
import type { CallWire } from "./filter.js";
import type { OutgoingHeaders } from "./headers.js";

export class Wire implements CallWire {
  constructor(private readonly call: Call) {}

  get down(): Downstream {
    return this.call.down;
  }

  get upstream(): ClientHttp2Stream | undefined {
    return this.call.attempt?.up;
  }

  recordEnd(code: number, message: string, decidedBy: DecidedBy): void {
    const c = this.call;
    if (!c.settle(code, message, decidedBy)) return;
    c.responded = true;
  }

  endWithTrailers(block: OutgoingHeaders, code: number, message: string, decidedBy: DecidedBy): void {
    const c = this.call;
    if (!c.settle(code, message, decidedBy)) return;
    const down = c.down;
    if (down.destroyed || down.closed) return;
    c.pendingTrailers = block;
    down.end();
  }

  takeOverResponse(): void {
    this.call.responseTakenOver = true;
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
