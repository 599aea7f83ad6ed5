// The request body kept for another attempt: views of the client's request chunks (the Buffers
// node handed over, never copies) up to a byte cap, replayable into the next attempt in order
// (linkerd2-proxy's replay body, http/retry/src/replay.rs, is the model). A call with no retry
// policy has no buffer at all (null); a call that commits to an attempt drops it. Must not import
// src/proxy/filters or anything above the call layer.

/** Where a replay writes: an attempt (attempt.ts has exactly these two methods). */
export interface ReplaySink {
  /** false: the sink wants the writer to wait for its drain */
  write(chunk: Buffer): boolean;
  endRequest(): void;
}

export type RetryBufferState = "buffering" | "overflowed" | "committed";

export class RetryBuffer {
  private chunks: Buffer[] = [];
  private bytes = 0;
  private ended = false;
  private st: RetryBufferState = "buffering";

  /** `capBytes`: the most request bytes kept (the route's bufferBytes); more and the call must commit. */
  constructor(readonly capBytes: number) {
    if (!Number.isSafeInteger(capBytes) || capBytes < 0) throw new RangeError(`retry buffer cap must be a byte count, not ${capBytes}`);
  }

  get state(): RetryBufferState {
    return this.st;
  }

  /** Request bytes kept now. */
  get size(): number {
    return this.bytes;
  }

  /** Chunks kept now. */
  get count(): number {
    return this.chunks.length;
  }

  /** The request's end has been seen (a replay ends the next attempt's request too). */
  get requestEnded(): boolean {
    return this.ended;
  }

  /**
   * Keeps a view of `chunk`. false when it does not fit under the cap: the buffer lets go of
   * everything it kept (state "overflowed") and no further attempt is possible, so the call must
   * commit to the attempt it has. Once overflowed or committed, pushes are ignored (false).
   */
  push(chunk: Buffer): boolean {
    if (this.st !== "buffering") return false;
    if (this.bytes + chunk.length > this.capBytes) {
      this.release("overflowed");
      return false;
    }
    this.chunks.push(chunk);
    this.bytes += chunk.length;
    return true;
  }

  /** The client's request has ended. */
  end(): void {
    this.ended = true;
  }

  /**
   * Writes every kept chunk into `sink`, in order, then ends its request if the client's
   * request has ended. Returns false when the sink's last write asked to wait (the chunks are
   * already in memory, so writing them all costs no more memory; the caller pauses the client
   * until the sink drains, as for any write). A replay leaves the buffer as it was: the next
   * attempt may replay it again. Replaying an overflowed or committed buffer is a bug.
   */
  replayTo(sink: ReplaySink): boolean {
    if (this.st !== "buffering") throw new Error(`retry buffer replayed after it was ${this.st}`);
    let ok = true;
    const list = this.chunks;
    for (let i = 0; i < list.length; i++) ok = sink.write(list[i]!);
    if (this.ended) sink.endRequest();
    return ok;
  }

  /** The call committed to an attempt: let go of the views (state "committed"). */
  commit(): void {
    if (this.st === "buffering") this.release("committed");
  }

  private release(st: RetryBufferState): void {
    this.st = st;
    this.chunks = [];
    this.bytes = 0;
  }
}
