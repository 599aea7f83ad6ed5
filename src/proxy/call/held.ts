// A response head held back from the client, one mechanism for both holders: the retry
// controller holds it while a retry is still possible (until the status or the first response
// message decides), then, once the call has committed, a filter may hold it (its onResponseHead
// returned false) until continueResponseHead. The same object passes from the one holder to the
// other; a call that holds nothing makes none. While it is held, nothing of the response reaches
// the client: the attempt's DATA waits in its stream and its trailers in `call.upTrailers`.
import type { IncomingHttpHeaders } from "node:http2";

/** Who holds the head: the retry controller (undecided) or a filter (the call has committed). */
export const BY_RETRY = 1;
export const BY_FILTER = 2;

export class HeldResponse {
  /** the upstream stream closed while a filter held the head: decided once the head has gone out */
  closeDeferred = false;

  constructor(
    readonly headers: IncomingHttpHeaders,
    readonly flags: number,
    readonly raw: readonly string[],
    public by: typeof BY_RETRY | typeof BY_FILTER,
  ) {}
}
