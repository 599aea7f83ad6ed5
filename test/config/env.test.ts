import { describe, expect, it } from "vitest";
import { expandEnv, expandString, provenanceSuffix } from "../../src/config/env.js";
import { parseConfigText, parseConfigValue } from "../../src/config/parse.js";

const expand = (s: string, env: Record<string, string | undefined> = {}) => {
  const r = expandString(s, env);
  return r.ok ? r.value : r.errors;
};

describe("expandString()", () => {
  it("substitutes a set variable", () => {
    expect(expand("${HOST}:8080", { HOST: "10.0.0.1" })).toBe("10.0.0.1:8080");
    expect(expand("${A}${B}", { A: "x", B: "y" })).toBe("xy");
  });

  it("uses the default when the variable is unset or empty", () => {
    expect(expand("${PORT:-8080}", {})).toBe("8080");
    expect(expand("${PORT:-8080}", { PORT: "" })).toBe("8080");
    expect(expand("${PORT:-8080}", { PORT: "9090" })).toBe("9090");
    expect(expand("127.0.0.1:${PORT:-8080}", {})).toBe("127.0.0.1:8080");
    expect(expand("${X:-}", {})).toBe("");
    expect(expand("${X:-a:-b}", {})).toBe("a:-b");
  });

  it("gives an empty string for a set-but-empty variable without default", () => {
    expect(expand("a${E}b", { E: "" })).toBe("ab");
  });

  it("treats $$ as a literal $ and keeps a lone $", () => {
    expect(expand("$$", {})).toBe("$");
    expect(expand("$${HOME}", { HOME: "/root" })).toBe("${HOME}");
    expect(expand("cost: $5", {})).toBe("cost: $5");
    expect(expand("$HOME", { HOME: "/root" })).toBe("$HOME");
    expect(expand("a$", {})).toBe("a$");
    expect(expand("$$$${X}", { X: "1" })).toBe("$${X}");
  });

  it("does not expand a value taken from the environment again", () => {
    expect(expand("${A}", { A: "${B}", B: "no" })).toBe("${B}");
  });

  it("reports an unset variable without default by name", () => {
    expect(expand("${UPSTREAM}", {})).toEqual([
      'environment variable "UPSTREAM" is not set (write "${UPSTREAM:-default}" to give a default)',
    ]);
  });

  it("reports every problem in one string", () => {
    expect(expand("${A}-${B}", {})).toHaveLength(2);
  });

  it.each([
    ["${", "unterminated"],
    ["${FOO", "unterminated"],
    ["${}", "empty variable name"],
    ["${1X}", 'invalid variable name "1X"'],
    ["${A-b}", 'invalid variable name "A-b"'],
    ["${A:=b}", 'invalid variable name "A:=b"'],
    ["${ A }", 'invalid variable name " A "'],
  ])("rejects %j", (input, fragment) => {
    const r = expandString(input, {});
    expect(r.ok).toBe(false);
    expect(r.ok ? "" : r.errors.join("\n")).toContain(fragment);
  });
});

describe("expandEnv()", () => {
  it("expands strings at any depth and leaves keys and other scalars alone", () => {
    const r = expandEnv({ "${K}": "${V}", list: [1, true, null, "${V}"], nested: { a: { b: "${V:-d}" } } }, { V: "v" });
    expect(r.issues).toEqual([]);
    expect(JSON.parse(JSON.stringify(r.value))).toEqual({
      "${K}": "v",
      list: [1, true, null, "v"],
      nested: { a: { b: "v" } },
    });
  });

  it("names the key path of an unset variable", () => {
    const r = expandEnv({ clusters: [{ endpoints: ["a:1", "${UP}"] }] }, {});
    expect(r.issues.map((i) => `${i.path}: ${i.message}`)).toEqual([
      'clusters[0].endpoints[1]: environment variable "UP" is not set (write "${UP:-default}" to give a default)',
    ]);
  });

  it("does not mutate the caller's value", () => {
    const input = { a: "${X:-1}" };
    expandEnv(input, {});
    expect(input).toEqual({ a: "${X:-1}" });
  });

  it("reports a circular reference instead of looping", () => {
    const a: Record<string, unknown> = {};
    a["self"] = a;
    expect(expandEnv(a, {}).issues).toEqual([{ path: "self", segments: ["self"], message: "circular reference" }]);
  });
});

const SIDE = `
admin: { address: "\${ADMIN:-127.0.0.1:9901}" }
listeners:
  - name: main
    address: 127.0.0.1:\${PORT:-8080}
    routes:
      - match: { prefix: "\${PREFIX:-/}" }
        cluster: backend
        timeout: \${T:-5s}
        maxRequestMessageBytes: \${MAX:-4MiB}
    maxConcurrentStreams: \${STREAMS:-100}
clusters:
  - name: backend
    endpoints: ["\${UPSTREAM}"]
workers: \${WORKERS:-2}
accessLog: \${ACCESS_LOG:-false}
logLevel: \${LOG_LEVEL:-debug}
drainTimeout: \${DRAIN:-1m}
`;

describe("env expansion in a config", () => {
  it("expands before typed fields coerce (addresses, durations, sizes, counts, flags)", () => {
    const r = parseConfigText(SIDE, { UPSTREAM: "10.1.2.3:50051", T: "1.5s", MAX: "64KiB" });
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    const l = r.config.listeners[0];
    expect(l?.address).toEqual({ host: "127.0.0.1", port: 8080 });
    expect(l?.maxConcurrentStreams).toBe(100);
    expect(l?.routes[0]?.timeoutMs).toBe(1500);
    expect(l?.routes[0]?.maxRequestMessageBytes).toBe(65536);
    expect(l?.routes[0]?.match).toEqual({ prefix: "/" });
    expect(r.config.clusters[0]?.endpoints).toEqual([{ host: "10.1.2.3", port: 50051 }]);
    expect(r.config.admin).toEqual({ address: { host: "127.0.0.1", port: 9901 }, mutations: false, token: null, readyClusters: [] });
    expect(r.config.workers).toBe(2);
    expect(r.config.accessLog).toBe(false);
    expect(r.config.logLevel).toBe("debug");
    expect(r.config.drainTimeoutMs).toBe(60_000);
  });

  it("reports an unset variable with its key path and name, and nothing else for that key", () => {
    const r = parseConfigText(SIDE, {});
    expect(r.ok ? [] : r.issues.map((i) => `${i.path}: ${i.message}`)).toEqual([
      'clusters[0].endpoints[0]: environment variable "UPSTREAM" is not set (write "${UPSTREAM:-default}" to give a default)',
    ]);
  });

  it("reports a bad value that came from the environment at the key it landed in, naming the variable", () => {
    const r = parseConfigText(SIDE, { UPSTREAM: "x:1", T: "soon", WORKERS: "many" });
    expect(r.ok ? [] : r.issues.map((i) => `${i.path}: ${i.message}`)).toEqual([
      'listeners[0].routes[0].timeout: invalid duration "soon": expected a number with a unit ms, s, m or h, e.g. "250ms", "1.5s", "1m30s" (from $T)',
      'workers: expected a whole number, got "many" (from $WORKERS)',
    ]);
  });

  it("cannot inject YAML structure through a variable", () => {
    const evil = '/"},{"prefix":"/evil","cluster":"other"}';
    const r = parseConfigText(SIDE, { UPSTREAM: "x:1", PREFIX: evil });
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.config.listeners[0]?.routes).toHaveLength(1);
    expect(r.config.listeners[0]?.routes[0]?.match.prefix).toBe(evil);
    // A newline in the value stays inside the one string (and is then refused as whitespace).
    const r2 = parseConfigText(SIDE, { UPSTREAM: "x:1", PREFIX: "/\n      cluster: other" });
    expect(r2.ok ? [] : r2.issues.map((i) => i.path)).toEqual(["listeners[0].routes[0].match.prefix"]);
  });

  it("keeps $$ as a literal $ in a value, and does not re-expand values from the environment", () => {
    const r = parseConfigText(SIDE.replace("${PREFIX:-/}", "/price$$"), { UPSTREAM: "x:1" });
    expect(r.ok && r.config.listeners[0]?.routes[0]?.match.prefix).toBe("/price$");
    const r2 = parseConfigText(SIDE, { UPSTREAM: "x:1", PREFIX: "/$$" });
    expect(r2.ok && r2.config.listeners[0]?.routes[0]?.match.prefix).toBe("/$$");
  });

  it("expands in a value passed by a library caller too", () => {
    const r = parseConfigValue(
      {
        listeners: [{ name: "l", address: "${ADDR}", routes: [{ match: { prefix: "/" }, cluster: "c" }] }],
        clusters: [{ name: "c", endpoints: ["127.0.0.1:${P:-50051}"] }],
      },
      { ADDR: "[::1]:0" },
    );
    expect(r.ok && r.config.listeners[0]?.address).toEqual({ host: "::1", port: 0 });
    expect(r.ok && r.config.clusters[0]?.endpoints[0]).toEqual({ host: "127.0.0.1", port: 50051 });
  });
});

describe("issues about values from the environment name the variable (provenance)", () => {
  const issuesOf = (text: string, env: Record<string, string>) => {
    const r = parseConfigText(text, env);
    return r.ok ? [] : r.issues.map((i) => `${i.path}: ${i.message}`);
  };
  const routeWith = (timeout: string, extra = "") => `
listeners:
  - name: main
    address: 127.0.0.1:0
    routes:
      - match: { prefix: "/" }
        cluster: backend
        timeout: ${timeout}
clusters:
  - name: backend
    endpoints: ["127.0.0.1:50051"]
${extra}`;

  it("names the variable when it is the whole value", () => {
    expect(issuesOf(routeWith("${CALL_TIMEOUT}"), { CALL_TIMEOUT: "abc" })).toEqual([
      expect.stringMatching(/^listeners\[0\]\.routes\[0\]\.timeout: invalid duration "abc".* \(from \$CALL_TIMEOUT\)$/),
    ]);
  });

  it("names the variable when it is part of the value", () => {
    const text = routeWith("5s").replace('"127.0.0.1:50051"', '"127.0.0.1:${PORT}"');
    const issues = issuesOf(text, { PORT: "fifty" });
    expect(issues).toHaveLength(1);
    expect(issues[0]).toMatch(/^clusters\[0\]\.endpoints\[0\]: .*fifty.* \(from \$PORT\)$/);
  });

  it("names every variable of a value made of several, once each", () => {
    const text = routeWith("5s").replace('"127.0.0.1:50051"', '"${HOST}:${PORT}${PORT}"');
    const issues = issuesOf(text, { HOST: "127.0.0.1", PORT: "9" + "9".repeat(3) });
    expect(issues).toHaveLength(1);
    expect(issues[0]).toMatch(/^clusters\[0\]\.endpoints\[0\]: .* \(from \$HOST, \$PORT\)$/);
  });

  it("says so when the default is the bad part, and whether the variable is unset or empty", () => {
    const text = routeWith("${CALL_TIMEOUT:-30 seconds}");
    expect(issuesOf(text, {})).toEqual([
      expect.stringMatching(/timeout: invalid duration "30 seconds".* \(from the default of \$CALL_TIMEOUT, which is unset\)$/),
    ]);
    expect(issuesOf(text, { CALL_TIMEOUT: "" })).toEqual([
      expect.stringMatching(/ \(from the default of \$CALL_TIMEOUT, which is empty\)$/),
    ]);
    // A good value from the variable: the bad default is never used, so nothing to report.
    expect(issuesOf(text, { CALL_TIMEOUT: "2s" })).toEqual([]);
  });

  it("mixes a set variable and a defaulted one in one value", () => {
    const text = routeWith("5s").replace('"127.0.0.1:50051"', '"${HOST}:${PORT:-0}"');
    expect(issuesOf(text, { HOST: "127.0.0.1" })).toEqual([
      expect.stringMatching(/^clusters\[0\]\.endpoints\[0\]: .* \(from \$HOST and the default of \$PORT, which is unset\)$/),
    ]);
  });

  it("names the variable in cross-reference and fault-rule issues too, and leaves literal values' issues alone", () => {
    const text = routeWith("${T}", "logLevel: loud\n").replace("cluster: backend", "cluster: ${CLUSTER}");
    expect(issuesOf(text, { T: "1s", CLUSTER: "bakend" })).toEqual([
      'listeners[0].routes[0].cluster: unknown cluster "bakend" (did you mean "backend"?) (from $CLUSTER)',
      expect.stringMatching(/^logLevel: unknown log level "loud".*[^)]$|^logLevel: unknown log level "loud": expected one of [^(]*$/),
    ]);
    const faults = routeWith("1s").replace("    routes:", '    faults: [{ id: "${ID}", kind: abort, fire: { percentage: 200 } }]\n    routes:');
    const issues = issuesOf(faults, { ID: "x" });
    expect(issues.length).toBeGreaterThan(0);
    for (const i of issues) expect(i).not.toContain("(from $");
    const pct = routeWith("1s").replace("    routes:", '    faults: [{ kind: abort, fire: { percentage: "${PCT}" } }]\n    routes:');
    const pctIssues = issuesOf(pct, { PCT: "lots" });
    expect(pctIssues.some((i) => i.endsWith("(from $PCT)"))).toBe(true);
  });

  it("does not add a second mention to an unset-variable error", () => {
    expect(issuesOf(routeWith("${CALL_TIMEOUT}"), {})).toEqual([
      'listeners[0].routes[0].timeout: environment variable "CALL_TIMEOUT" is not set (write "${CALL_TIMEOUT:-default}" to give a default)',
    ]);
  });

  it("records provenance per path in expandEnv()", () => {
    const r = expandEnv({ a: "${X}", b: ["lit", "${Y:-1}-${X}"], c: "$$" }, { X: "x" });
    expect(r.provenance).toEqual([
      { path: "a", segments: ["a"], uses: [{ name: "X" }] },
      { path: "b[1]", segments: ["b", 1], uses: [{ name: "Y", defaulted: "unset" }, { name: "X" }] },
    ]);
    expect(provenanceSuffix([])).toBe("");
  });
});
