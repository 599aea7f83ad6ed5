import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { ConfigError } from "../../src/errors.js";
import * as config from "../../src/config/index.js";
import { DEFAULT_CONFIG, DEFAULT_CONFIG_YAML, DOCUMENT_SCHEMA, loadConfigFile, parseConfigText } from "../../src/config/index.js";

const CONFIG_DIR = join(import.meta.dirname, "..", "..", "config");
const read = (name: string) => readFileSync(join(CONFIG_DIR, name), "utf8");

describe("config/dojang.yaml", () => {
  it("is the embedded default, byte for byte", () => {
    expect(read("dojang.yaml")).toBe(DEFAULT_CONFIG_YAML);
  });

  it("parses to the same Config as DEFAULT_CONFIG_YAML", () => {
    expect(loadConfigFile(join(CONFIG_DIR, "dojang.yaml"), {})).toEqual(DEFAULT_CONFIG);
  });

  it("is the documented default: h2c listener 127.0.0.1:8080, admin :9901, backend at :50051, prefix / with 30s and 4 MiB", () => {
    expect(DEFAULT_CONFIG.admin).toEqual({ address: { host: "127.0.0.1", port: 9901 }, mutations: false, token: null, readyClusters: [] });
    expect(DEFAULT_CONFIG.listeners).toHaveLength(1);
    expect(DEFAULT_CONFIG.listeners[0]?.address).toEqual({ host: "127.0.0.1", port: 8080 });
    expect(DEFAULT_CONFIG.listeners[0]?.routes).toEqual([
      { match: { prefix: "/" }, cluster: "backend", timeoutMs: 30_000, maxRequestMessageBytes: 4194304, maxResponseMessageBytes: 4194304, faults: [], streamIdleTimeoutMs: null, retry: null, rateLimit: null, headers: null, rewriteAuthority: null, rewritePrefix: null, jwt: null, rbac: null, extAuthz: null },
    ]);
    expect(DEFAULT_CONFIG.clusters.map((c) => [c.name, c.endpoints])).toEqual([["backend", [{ host: "127.0.0.1", port: 50051 }]]]);
    expect(Object.isFrozen(DEFAULT_CONFIG.listeners[0]?.routes[0])).toBe(true);
  });
});

describe("config/sidecar.yaml", () => {
  const text = read("sidecar.yaml");

  it("parses with no environment at all, using every default", () => {
    const r = parseConfigText(text, {});
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.config.listeners[0]?.address).toEqual({ host: "0.0.0.0", port: 8080 });
    expect(r.config.clusters[0]?.endpoints).toEqual([{ host: "127.0.0.1", port: 50051 }]);
    expect(r.config.listeners[0]?.routes[0]?.timeoutMs).toBe(30_000);
    // the 128 MiB plan (issue 22: RSS under load ~100-120 MiB instead of ~110-170)
    expect(r.config.memory.limitBytes).toBe(128 * 1024 * 1024);
  });

  it("takes its values from the environment", () => {
    const r = parseConfigText(text, {
      LISTEN_ADDRESS: "[::]:9000",
      UPSTREAM: "app.local:7000",
      ADMIN_ADDRESS: "127.0.0.1:0",
      CALL_TIMEOUT: "none",
      MAX_MESSAGE: "16MiB",
      CONNECT_TIMEOUT: "750ms",
      DRAIN_TIMEOUT: "45s",
      LOG_LEVEL: "debug",
      ACCESS_LOG: "false",
      MEMORY_LIMIT: "256MiB",
    });
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    const c = r.config;
    expect(c.listeners[0]?.address).toEqual({ host: "::", port: 9000 });
    expect(c.clusters[0]?.endpoints).toEqual([{ host: "app.local", port: 7000 }]);
    expect(c.admin?.address).toEqual({ host: "127.0.0.1", port: 0 });
    expect(c.listeners[0]?.routes[0]).toMatchObject({ timeoutMs: null, maxRequestMessageBytes: 16 * 1024 * 1024 });
    expect(c.clusters[0]?.connectTimeoutMs).toBe(750);
    expect([c.drainTimeoutMs, c.logLevel, c.accessLog]).toEqual([45_000, "debug", false]);
    expect(c.memory.limitBytes).toBe(256 * 1024 * 1024);
  });

  it("reports a bad environment value at its key", () => {
    const r = parseConfigText(text, { UPSTREAM: "app.local" });
    expect(r.ok ? [] : r.issues.map((i) => i.path)).toEqual(["clusters[0].endpoints[0]"]);
  });
});

describe("config/example-full.yaml", () => {
  const text = read("example-full.yaml");

  it("parses", () => {
    const r = parseConfigText(text, {});
    expect(r.ok ? [] : r.issues).toEqual([]);
  });

  it("shows every key the schema accepts", () => {
    const keys = new Set<string>();
    const walk = (s: z.ZodType): void => {
      if (s instanceof z.ZodPipe) walk(s.in as z.ZodType);
      else if (s instanceof z.ZodOptional || s instanceof z.ZodNullable || s instanceof z.ZodDefault) walk(s.unwrap() as z.ZodType);
      else if (s instanceof z.ZodArray) walk(s.element as z.ZodType);
      else if (s instanceof z.ZodObject) {
        for (const [k, v] of Object.entries(s.shape as Record<string, z.ZodType>)) {
          keys.add(k);
          walk(v);
        }
      }
    };
    walk(DOCUMENT_SCHEMA);
    expect(keys.size).toBeGreaterThan(25);
    const missing = [...keys].filter((k) => !new RegExp(`(^|[\\s{,])${k}:`, "m").test(text));
    expect(missing).toEqual([]);
  });
});

describe("loadConfigFile()", () => {
  const dir = mkdtempSync(join(tmpdir(), "dojang-config-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("reads, parses and deep-freezes a file", () => {
    const path = join(dir, "ok.yaml");
    writeFileSync(path, DEFAULT_CONFIG_YAML);
    const c = loadConfigFile(path, {});
    expect(c).toEqual(DEFAULT_CONFIG);
    expect(Object.isFrozen(c.clusters[0]?.endpoints)).toBe(true);
  });

  it("reads a .json file, reporting syntax errors by line", () => {
    const good = join(dir, "ok.json");
    const value = {
      listeners: [{ name: "m", address: "127.0.0.1:0", routes: [{ match: { prefix: "/" }, cluster: "b" }] }],
      clusters: [{ name: "b", endpoints: ["127.0.0.1:1"] }],
    };
    writeFileSync(good, JSON.stringify(value, null, 2));
    expect(loadConfigFile(good, {}).listeners[0]?.name).toBe("m");
    const bad = join(dir, "bad.json");
    writeFileSync(bad, '{\n  "workers": 1,\n  "listeners": [\n}\n');
    expect(() => loadConfigFile(bad, {})).toThrow(/line \d+, column \d+: /);
  });

  it("throws ConfigError naming the file and every issue", () => {
    const path = join(dir, "bad.yaml");
    writeFileSync(path, DEFAULT_CONFIG_YAML.replace("cluster: backend", "cluster: bakend"));
    let caught: unknown;
    try {
      loadConfigFile(path, {});
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(ConfigError);
    const e = caught as ConfigError;
    expect(e.message.startsWith(`invalid config ${path}:\n`)).toBe(true);
    expect(e.issues).toEqual([
      { path: "listeners[0].routes[0].cluster", message: 'unknown cluster "bakend" (did you mean "backend"?)' },
    ]);
  });

  it("reports a YAML syntax error with its line", () => {
    const path = join(dir, "syntax.yaml");
    writeFileSync(path, "admin:\n  address: 127.0.0.1:9901\nlisteners: { a: 1 }}\n");
    expect(() => loadConfigFile(path, {})).toThrow(ConfigError);
    try {
      loadConfigFile(path, {});
    } catch (err) {
      expect((err as ConfigError).issues[0]?.path).toBe("");
      expect((err as ConfigError).issues[0]?.message).toBe('line 3, column 20: Unexpected flow-map-end token in YAML stream: "}"');
    }
  });

  it.each([
    ["a missing file", "does-not-exist.yaml", "ENOENT"],
    ["a directory", ".", "EISDIR"],
  ])("reports %s with the errno, path \"\" and the cause kept", (_what, name, errno) => {
    const path = join(dir, name);
    try {
      loadConfigFile(path, {});
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      const e = err as ConfigError;
      expect(e.issues).toHaveLength(1);
      expect(e.issues[0]?.path).toBe("");
      expect(e.issues[0]?.message).toContain("cannot read the config file: ");
      expect(e.issues[0]?.message).toContain(errno);
      expect((e.cause as NodeJS.ErrnoException).code).toBe(errno);
    }
  });
});

describe("src/config/index.ts", () => {
  it("re-exports the whole API", () => {
    for (const name of [
      "parseConfigText",
      "parseConfigValue",
      "loadConfigFile",
      "configFromText",
      "DEFAULT_CONFIG_YAML",
      "DEFAULT_CONFIG",
      "DEFAULTS",
      "parseDuration",
      "parseSize",
      "parseHostPort",
      "formatDuration",
      "formatSize",
      "formatHostPort",
    ]) {
      expect(config, name).toHaveProperty(name);
    }
  });
});

describe("config/edge-fleet.yaml", () => {
  it("parses, with tracing on at 1 % of new traces", () => {
    const r = parseConfigText(read("edge-fleet.yaml"), {});
    expect(r.ok ? [] : r.issues).toEqual([]);
    if (r.ok) expect(r.config.tracing).toMatchObject({ endpoint: "http://127.0.0.1:4318/v1/traces", serviceName: "edge-gateway", sampleRatio: 0.01 });
  });
});
