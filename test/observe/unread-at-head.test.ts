// The response-buffer guard's head rule (observe/overload.ts unreadAtHead): a call whose client
// session advertised a stream window under one frame is unread from its response head, so it is
// counted there and cut there past the unread budgets, before any of its DATA is taken. Fake
// calls; the real attack, where the client closes its window after opening 1,000 streams, is
// test/process/zero-window-rss.test.ts.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ResponseBufferGuard } from "../../src/proxy/observe/overload.js";
import { narrowSession, stalledCall as call } from "../helpers/stalled-call.js";

describe("ResponseBufferGuard.unreadAtHead: a window under one frame makes a call unread from its head", () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setInterval", "clearInterval", "performance"] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  /** The default unread budgets: 1 MiB per connection (12 calls of 80 KiB), 4 MiB per process (51). */
  const guard = (): ResponseBufferGuard => new ResponseBufferGuard();

  it("counts nothing and cuts nothing while no client's window is under one frame", () => {
    const g = guard();
    const s = {};
    g.noteClientWindow(s, 65_535);
    expect(g.narrowClients).toBe(false);
    const calls = Array.from({ length: 40 }, () => call(s));
    expect(calls.map((c) => g.unreadAtHead(c))).toEqual(Array(40).fill(false));
    expect(g.unreadCalls).toBe(0);
    expect(g.stalledCalls).toBe(0);
  });

  it("after a client's SETTINGS closes its window, its calls past 12 are cut at their heads, with the connection's message", () => {
    const g = guard();
    const s = narrowSession(g);
    expect(g.narrowClients).toBe(true);
    const calls = Array.from({ length: 40 }, () => call(s));
    const cutAtHead = calls.map((c) => g.unreadAtHead(c));
    expect(cutAtHead.filter((x) => !x)).toHaveLength(12);
    expect(cutAtHead.slice(0, 12)).toEqual(Array(12).fill(false));
    expect(calls.slice(12).every((c) => c.cut === "the client connection's responses wait unread beyond its buffer budget (1048576 bytes at a window under one frame)")).toBe(true);
    expect(g.unreadCalls).toBe(12);
    expect(g.unreadCuts).toBe(28);
  });

  it("a call counted at its head leaves the count when it drains or ends, and its first stall does not count it twice", () => {
    const g = guard();
    const s = narrowSession(g);
    const a = call(s);
    const b = call(s);
    g.unreadAtHead(a);
    g.unreadAtHead(b);
    g.stall(a, true); // its first write did not drain
    expect(g.unreadCalls).toBe(2);
    g.unstall(a); // drained: the client reads
    g.unstall(b); // ended
    expect(g.unreadCalls).toBe(0);
    expect(g.stalledCalls).toBe(0);
  });

  it("past the process's 51, the connection with the most unread calls loses one, not a window-0 client with one call", () => {
    const g = guard();
    const attackers = Array.from({ length: 5 }, () => ({}));
    const reader = {};
    for (const s of [...attackers, reader]) g.noteClientWindow(s, 0);
    for (const s of attackers) for (let i = 0; i < 10; i++) expect(g.unreadAtHead(call(s))).toBe(false);
    expect(g.unreadCalls).toBe(50);
    const r = call(reader);
    expect(g.unreadAtHead(r)).toBe(false);
    const next = call(reader);
    expect(g.unreadAtHead(next)).toBe(false);
    expect(r.cut).toBeUndefined();
    expect(next.cut).toBeUndefined();
    expect(g.unreadCuts).toBe(1); // one call of an attacker's connection
    expect(g.unreadCalls).toBe(51);
  });

  it("a client that opens its window again, or whose session closed, is no longer narrow", () => {
    const g = guard();
    const s = {};
    const t = {};
    g.noteClientWindow(s, 0);
    g.noteClientWindow(t, 16_383);
    g.noteClientWindow(s, 16_384);
    expect(g.unreadAtHead(call(s))).toBe(false);
    expect(g.unreadCalls).toBe(0);
    g.forgetSession(t);
    expect(g.narrowClients).toBe(false);
  });
});
