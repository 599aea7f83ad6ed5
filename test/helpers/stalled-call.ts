// A fake call for the response-buffer guard's unit tests (observe/overload.ts StalledCall): a call
// of client connection `session`, holding nothing, that records the guard's cut.
import type { StalledCall } from "../../src/proxy/observe/overload.js";

export type FakeStalledCall = StalledCall & { cut: string | undefined };

export function stalledCall(session: object): FakeStalledCall {
  const c = {
    done: false,
    cut: undefined as string | undefined,
    down: { writableLength: 0, session, destroyed: false },
    attempt: null,
    cutForOverload(message: string) {
      c.cut = message;
      c.done = true;
    },
  };
  return c;
}

/** A client session whose SETTINGS advertised a stream window of 0 to `g` (narrow: its calls are unread). */
export function narrowSession(g: { noteClientWindow(session: object, w: number | undefined): boolean }): object {
  const s = {};
  g.noteClientWindow(s, 0);
  return s;
}
