import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  FAULT_KINDS,
  FAULT_KINDS_DOC,
  TERMINAL_KINDS,
  compileActions,
  drawDelayMs,
  hash32,
  mulberry32,
  ruleSeed,
  tamperTimeoutNs,
  type DeadlineAction,
  type FaultAction,
} from "../../../../src/proxy/filters/fault/index.js";
import { decodeTimeout, encodeTimeout } from "../../../../src/translate/index.js";

describe("drawDelayMs(): one delay point's wait", () => {
  it("returns a fixed delay without drawing", () => {
    let draws = 0;
    expect(drawDelayMs({ type: "fixed", ms: 250 }, () => (draws++, 0.5))).toBe(250);
    expect(draws).toBe(0);
  });

  it("draws a uniform delay within its bounds, both ends reachable", () => {
    const spec = { type: "uniform", minMs: 100, maxMs: 300 } as const;
    expect(drawDelayMs(spec, () => 0)).toBe(100);
    expect(drawDelayMs(spec, () => 0.999999999)).toBe(300);
    const rand = mulberry32(1);
    for (let i = 0; i < 1000; i++) {
      const ms = drawDelayMs(spec, rand);
      expect(ms >= 100 && ms <= 300 && Number.isInteger(ms)).toBe(true);
    }
  });

  it("draws a normal delay around its mean and never below 0", () => {
    const rand = mulberry32(2);
    const draws = Array.from({ length: 2000 }, () => drawDelayMs({ type: "normal", meanMs: 200, stddevMs: 50 }, rand));
    const mean = draws.reduce((a, b) => a + b, 0) / draws.length;
    expect(mean).toBeGreaterThan(190);
    expect(mean).toBeLessThan(210);
    expect(draws.every((d) => d >= 0)).toBe(true);
    expect(drawDelayMs({ type: "normal", meanMs: 0, stddevMs: 1000 }, () => 0.99)).toBeGreaterThanOrEqual(0);
  });
});

describe("tamperTimeoutNs(): the grpc-timeout sent upstream under a deadline fault", () => {
  const d = (mode: DeadlineAction["mode"], factor: number | null, byMs: number | null): DeadlineAction => ({ kind: "deadline", mode, factor, byMs });
  const ns = (s: string) => {
    const r = decodeTimeout(s);
    if (!r.ok) throw new Error(r.error);
    return r.ns;
  };

  it("drops the timeout", () => {
    expect(tamperTimeoutNs(d("drop", null, null), ns("1S"))).toBeNull();
  });
  it("shrinks and grows by a factor", () => {
    expect(encodeTimeout(tamperTimeoutNs(d("shrink", 0.5, null), ns("2S")) ?? -1n)).toBe("1000000u");
    expect(tamperTimeoutNs(d("grow", 3, null), ns("1S"))).toBe(3_000_000_000n);
  });
  it("shrinks by a duration down to 0 at most, and grows by one", () => {
    expect(tamperTimeoutNs(d("shrink", null, 500), ns("2S"))).toBe(1_500_000_000n);
    expect(tamperTimeoutNs(d("shrink", null, 5000), ns("2S"))).toBe(0n);
    expect(tamperTimeoutNs(d("grow", null, 1000), ns("1S"))).toBe(2_000_000_000n);
  });
  it("leaves a request without grpc-timeout without one", () => {
    expect(tamperTimeoutNs(d("grow", null, 1000), null)).toBeNull();
  });
  it("clamps to MaxInt64 nanoseconds", () => {
    expect(tamperTimeoutNs(d("grow", 1e6, null), ns("99999999H"))).toBe(9223372036854775807n);
  });
});

describe("compileActions(): a call's actions sorted by hook point", () => {
  const abort = (afterMessages: number | null, code = 14): FaultAction => ({ kind: "abort", code, message: "m", details: null, afterMessages });
  const delay = (jitterSeed: number, direction: "request" | "response" = "response"): FaultAction => ({
    kind: "delay",
    at: "message",
    message: null,
    direction,
    delay: { type: "fixed", ms: 5 },
    jitterSeed,
  });

  it("keeps the first action of each kind, and every delay", () => {
    const c = compileActions([abort(null, 14), abort(null, 8), abort(2, 4), abort(3, 5), delay(0), delay(0, "request")]);
    expect(c.before).toMatchObject({ kind: "abort", code: 14 });
    expect(c.abortAfter).toMatchObject({ afterMessages: 2, code: 4 });
    expect(c.delays).toHaveLength(2);
    expect(c.reset).toBeNull();
  });

  it("puts a reset before headers with the terminal actions, and a later one on the response", () => {
    const c = compileActions([
      { kind: "reset", code: 2, at: "after_messages", messages: 1 },
      { kind: "reset", code: 7, at: "before_headers", messages: 0 },
    ] as FaultAction[]);
    expect(c.before).toMatchObject({ kind: "reset", code: 7 });
    expect(c.reset).toMatchObject({ kind: "reset", code: 2 });
    expect(c.responseWork).toBe(true);
  });

  it("takes the last non-zero jitter seed, none when every delay is fixed", () => {
    expect(compileActions([delay(0)]).jitterSeed).toBeNull();
    expect(compileActions([delay(11), delay(0), delay(42)]).jitterSeed).toBe(42);
  });

  it("asks for a pump only in the directions with message-level work", () => {
    expect(compileActions([abort(null)])).toMatchObject({ responseWork: false, requestWork: false });
    expect(compileActions([{ kind: "bandwidth", bytesPerSecond: 1000, direction: "request" }, { kind: "bandwidth", bytesPerSecond: 9, direction: "request" }])).toMatchObject({
      responseWork: false,
      requestWork: true,
      bandwidth: { request: 1000, response: 0 },
    });
    expect(compileActions([{ kind: "stall", direction: "response" }])).toMatchObject({ responseWork: true, requestWork: false, stall: { request: false, response: true } });
    expect(compileActions([delay(0, "request")])).toMatchObject({ responseWork: false, requestWork: true });
  });
});

describe("prng: mulberry32 and seeds", () => {
  it("gives the same stream for the same seed and floats in [0, 1)", () => {
    const a = mulberry32(123);
    const b = mulberry32(123);
    const xs = Array.from({ length: 100 }, () => a());
    expect(Array.from({ length: 100 }, () => b())).toEqual(xs);
    expect(xs.every((x) => x >= 0 && x < 1)).toBe(true);
    expect(mulberry32(124)()).not.toBe(xs[0]);
  });
  it("derives distinct, stable rule seeds from the set seed and the rule id", () => {
    expect(ruleSeed(0, "fault-1")).toBe(ruleSeed(0, "fault-1"));
    expect(ruleSeed(0, "fault-1")).not.toBe(ruleSeed(0, "fault-2"));
    expect(ruleSeed(1, "fault-1")).not.toBe(ruleSeed(0, "fault-1"));
    expect(hash32("")).toBe(hash32(""));
  });
});

describe("FAULT_KINDS_DOC: the README table", () => {
  it("has one row per fault kind", () => {
    for (const kind of FAULT_KINDS) expect(FAULT_KINDS_DOC).toMatch(new RegExp(`^\\| \`${kind}\` \\|`, "m"));
  });
  it("lists exactly the terminal kinds as terminal", () => {
    const listed = /^- Terminal kinds \(([^)]*)\)/m.exec(FAULT_KINDS_DOC)?.[1]?.split(/,\s*/) ?? [];
    expect(new Set(listed)).toEqual(new Set(TERMINAL_KINDS));
  });
  it("names every Envoy header the parser reads", () => {
    for (const h of ["x-envoy-fault-abort-request", "x-envoy-fault-abort-grpc-request", "x-envoy-fault-abort-request-percentage", "x-envoy-fault-delay-request", "x-envoy-fault-delay-request-percentage", "x-envoy-fault-throughput-response", "x-envoy-fault-throughput-response-percentage", "x-dojang-fault"]) {
      expect(FAULT_KINDS_DOC).toContain(`\`${h}\``);
    }
  });
});

describe("src/proxy/filters/fault stays pure, but for its wire side", () => {
  const dir = join(import.meta.dirname, "../../../../src/proxy/filters/fault");
  /** the per-call executor, its body pump (split from exec.ts, issue 30) and its factory: node:http2, timers and the clock are their work */
  const WIRE = ["exec.ts", "pump.ts", "filter.ts"];
  const all = readdirSync(dir).filter((f) => f.endsWith(".ts"));
  const files = all.filter((f) => !WIRE.includes(f));
  it("has its wire side and pure files beside it (the exemption names files that exist)", () => {
    expect(all).toEqual(expect.arrayContaining(WIRE));
    expect(files.length).toBeGreaterThanOrEqual(8);
  });
  for (const f of files) {
    it(`${f} imports no node:* module and reads no clock or Math.random`, () => {
      const src = readFileSync(join(dir, f), "utf8");
      const code = src.replace(/\/\/.*$/gm, "").replace(/\/\*[\s\S]*?\*\//g, "");
      const nodeImports = [...code.matchAll(/from\s+"(node:[^"]+)"/g)].map((m) => m[1]);
      if (f === "admin-api.ts") expect(code).not.toMatch(/^import\s+(?!type)[^;]*from\s+"node:/m);
      else expect(nodeImports).toEqual([]);
      expect(code).not.toMatch(/\bDate\.now\b|\bnew Date\b|\bperformance\.now\b|\bprocess\.hrtime\b|\bMath\.random\b|\bsetTimeout\b|\bsetInterval\b/);
    });
  }
});
