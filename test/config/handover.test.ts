// The launcher's config handover (src/config/handover.ts) and launch() (src/launch.ts): what the
// served process takes is the very Config the parser gave the launcher, frozen; anything else
// (another source, a damaged or missing variable, a config too large for one variable, workers)
// is not taken, and the served process parses the file itself.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import fc from "fast-check";
import { afterAll, describe, expect, it } from "vitest";
import { configFromText, type Config } from "../../src/config/index.js";
import { CONFIG_HANDOVER_ENV, HANDOVER_MAX_CHARS, encodeConfigHandover, takeConfigHandover } from "../../src/config/handover.js";
import { launch } from "../../src/launch.js";

const ROOT = resolve(import.meta.dirname, "../..");
const dir = mkdtempSync(join(tmpdir(), "dojang-handover-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A round trip through an environment: encode, take. */
function roundTrip(config: Config, source: string | undefined): { taken: Config | undefined; env: NodeJS.ProcessEnv } {
  const text = encodeConfigHandover(config, source);
  expect(text).toBeDefined();
  const env: NodeJS.ProcessEnv = { [CONFIG_HANDOVER_ENV]: text };
  return { taken: takeConfigHandover(env, source), env };
}

function isDeepFrozen(v: unknown): boolean {
  if (typeof v !== "object" || v === null) return true;
  return Object.isFrozen(v) && Object.values(v).every(isDeepFrozen);
}

const ENV = { DOJANG_ADMIN_TOKEN: "s3cret-token", UPSTREAM: "127.0.0.1:50051", CALL_TIMEOUT: "5s" };

describe("encodeConfigHandover / takeConfigHandover", () => {
  it.each(["dojang.yaml", "sidecar.yaml", "edge.yaml", "example-full.yaml"])("config/%s comes back equal, deep-frozen, and the variable is gone", (name) => {
    const file = join(ROOT, "config", name);
    const config = configFromText(readFileSync(file, "utf8"), file, ENV);
    const { taken, env } = roundTrip(config, file);
    expect(taken).toEqual(config);
    expect(isDeepFrozen(taken)).toBe(true);
    expect(CONFIG_HANDOVER_ENV in env).toBe(false);
  });

  it("a generated config comes back equal (property: listeners, endpoints, timeouts, a token, retries)", () => {
    fc.assert(
      fc.property(
        fc.record({
          listeners: fc.integer({ min: 1, max: 4 }),
          endpoints: fc.integer({ min: 1, max: 6 }),
          timeout: fc.oneof(fc.constant("none"), fc.integer({ min: 1, max: 600 }).map((s) => `${s}s`)),
          token: fc.option(fc.string({ minLength: 16, maxLength: 40 }).filter((t) => !/[\s"'\\$]/.test(t) && t.trim() === t)),
          retries: fc.boolean(),
        }),
        (k) => {
          const yaml = [
            "admin:",
            "  address: 127.0.0.1:9901",
            ...(k.token === null ? [] : [`  token: "${k.token}"`]),
            "listeners:",
            ...Array.from({ length: k.listeners }, (_, i) => [
              `  - name: l${i}`,
              `    address: 127.0.0.1:${8000 + i}`,
              "    routes:",
              '      - match: { prefix: "/" }',
              "        cluster: backend",
              `        timeout: ${k.timeout}`,
              ...(k.retries ? ["        retry: { maxAttempts: 3, retryOn: [UNAVAILABLE, UNAVAILABLE] }"] : []),
            ]).flat(),
            "clusters:",
            "  - name: backend",
            `    endpoints: [${Array.from({ length: k.endpoints }, (_, i) => `"127.0.0.${i + 1}:50051"`).join(", ")}]`,
          ].join("\n");
          const config = configFromText(yaml, "gen.yaml", {});
          const { taken } = roundTrip(config, "gen.yaml");
          expect(taken).toEqual(config);
        },
      ),
      { numRuns: 60 },
    );
  });

  it("is not taken for another source, when damaged, or when absent", () => {
    const config = configFromText(readFileSync(join(ROOT, "config", "dojang.yaml"), "utf8"), "a.yaml", ENV);
    const text = encodeConfigHandover(config, "a.yaml")!;
    for (const [env, source] of [
      [{ [CONFIG_HANDOVER_ENV]: text }, "b.yaml"],
      [{ [CONFIG_HANDOVER_ENV]: text }, undefined],
      [{ [CONFIG_HANDOVER_ENV]: text.slice(0, text.length >> 1) }, "a.yaml"],
      [{ [CONFIG_HANDOVER_ENV]: "not base64 at all" }, "a.yaml"],
      [{}, "a.yaml"],
    ] as const) {
      const e: NodeJS.ProcessEnv = { ...env };
      expect(takeConfigHandover(e, source)).toBeUndefined();
      expect(CONFIG_HANDOVER_ENV in e).toBe(false);
    }
    // the embedded default has its own source ("")
    const embedded = encodeConfigHandover(config, undefined)!;
    expect(takeConfigHandover({ [CONFIG_HANDOVER_ENV]: embedded }, undefined)).toEqual(config);
    expect(takeConfigHandover({ [CONFIG_HANDOVER_ENV]: embedded }, "a.yaml")).toBeUndefined();
  });

  it("is not made for a config too large for one environment variable", () => {
    const endpoints = Array.from({ length: 6000 }, (_, i) => `"10.${(i >> 8) & 255}.${i & 255}.1:50051"`).join(", ");
    const yaml = `listeners: [{ name: main, address: "127.0.0.1:8080", routes: [{ match: { prefix: "/" }, cluster: backend }] }]\nclusters: [{ name: backend, endpoints: [${endpoints}] }]\n`;
    expect(encodeConfigHandover(configFromText(yaml, "big.yaml", {}), "big.yaml")).toBeUndefined();
    const small = encodeConfigHandover(configFromText(readFileSync(join(ROOT, "config", "dojang.yaml"), "utf8"), "x", ENV), "x")!;
    expect(small.length).toBeLessThan(HANDOVER_MAX_CHARS);
  });
});

describe("launch()", () => {
  const file = (name: string, text: string): string => {
    const p = join(dir, name);
    writeFileSync(p, text);
    return p;
  };
  const listener = 'listeners: [{ name: main, address: "127.0.0.1:8080", routes: [{ match: { prefix: "/" }, cluster: backend }] }]\nclusters: [{ name: backend, endpoints: ["127.0.0.1:50051"] }]\n';

  it("hands over the config it parsed (with env expansion) for a serving command line", async () => {
    const f = file("ok.yaml", listener + "drainTimeout: ${DRAIN}\n");
    const l = await launch(["--config", f], { DRAIN: "3s" });
    expect(l?.handover).toBeDefined();
    const taken = takeConfigHandover({ [CONFIG_HANDOVER_ENV]: l!.handover }, f);
    expect(taken).toEqual(configFromText(listener + "drainTimeout: 3s\n", f, {}));
    // DOJANG_CONFIG names the file as --config does
    expect((await launch([], { DOJANG_CONFIG: f, DRAIN: "3s" }))?.handover).toBeDefined();
  });

  it("hands nothing over for workers, --check, or an invalid config (main.ts parses and reports)", async () => {
    expect((await launch(["--config", file("w.yaml", listener + "workers: 2\n")], {}))?.handover).toBeUndefined();
    expect(await launch(["--config", file("c.yaml", listener), "--check"], {})).toBeUndefined();
    expect(await launch(["--config", file("bad.yaml", listener + "drainTimeout: soon\n")], {})).toBeUndefined();
    expect(await launch(["--config", file("tls.yaml", listener.replace("routes:", 'tls: { certFile: "/nonexistent/c.pem", keyFile: "/nonexistent/k.pem" }, routes:'))], {})).toBeUndefined();
  });
});
