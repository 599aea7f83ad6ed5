import { describe, expect, it } from "vitest";
import { FaultSet, handleFaultsApi, select } from "../../../../src/proxy/filters/fault/index.js";
import { facts, parsers, rule } from "./helpers.js";

type Body = Record<string, unknown> & { faults?: Record<string, unknown>[]; issues?: { path: string; message: string }[]; error?: string };

function api(set: FaultSet, method: string, path: string, body: unknown = "", nowMs = 0) {
  const text = typeof body === "string" ? body : JSON.stringify(body);
  const r = handleFaultsApi(method, path, text, set, nowMs, parsers);
  if (r === null) expect.fail(`${method} ${path} was not handled`);
  return { status: r.status, body: r.body as Body };
}

const ABORT_RULE = { action: { kind: "abort", code: "UNAVAILABLE", message: "down" } };

function withConfigRule(): FaultSet {
  const set = new FaultSet({ seed: 7 });
  set.add(rule({ id: "cfg", match: { service: "pkg.Svc" }, action: { kind: "delay", delay: "10ms" } }), 0);
  return set;
}

describe("handleFaultsApi(): paths", () => {
  it("returns null for paths outside /faults", () => {
    const set = new FaultSet();
    for (const p of ["/metrics", "/faultsx", "/", "/config"]) expect(handleFaultsApi("GET", p, "", set, 0, parsers)).toBeNull();
  });

  it("answers 405 with the allowed methods for other methods", () => {
    const set = withConfigRule();
    expect(api(set, "PUT", "/faults")).toEqual({ status: 405, body: { error: "method not allowed", allow: "GET, POST" } });
    expect(api(set, "GET", "/faults/reset")).toEqual({ status: 405, body: { error: "method not allowed", allow: "POST" } });
    expect(api(set, "POST", "/faults/cfg").body).toMatchObject({ allow: "GET, PATCH, DELETE" });
  });

  it("ignores a query string and a trailing slash", () => {
    const set = withConfigRule();
    expect(api(set, "GET", "/faults/?pretty=1").status).toBe(200);
    expect(api(set, "GET", "/faults/cfg/").status).toBe(200);
  });

  it("answers 404 for a deeper path", () => {
    expect(api(withConfigRule(), "GET", "/faults/cfg/extra").status).toBe(404);
  });
});

describe("handleFaultsApi(): GET /faults lists every rule with its counts", () => {
  it("lists config rules with source, matched and fired, plus the set's settings", () => {
    const set = withConfigRule();
    select(set, facts(), 0);
    select(set, facts({ service: "other.Svc" }), 0);
    expect(api(set, "GET", "/faults")).toEqual({
      status: 200,
      body: {
        faults: [
          {
            id: "cfg",
            enabled: true,
            match: { service: "pkg.Svc" },
            fire: {},
            action: { kind: "delay", at: "request", delay: "10ms" },
            source: "config",
            matched: 1,
            fired: 1,
          },
        ],
        seed: 7,
        maxActiveFaults: null,
        overflowed: 0,
      },
    });
  });
});

describe("handleFaultsApi(): POST /faults adds a rule", () => {
  it("answers 201 with the rule, an assigned id and zero counts", () => {
    const set = withConfigRule();
    const r = api(set, "POST", "/faults", ABORT_RULE);
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ id: "fault-1", source: "api", matched: 0, fired: 0, action: { kind: "abort", code: "UNAVAILABLE", message: "down" } });
    expect(api(set, "GET", "/faults").body.faults?.map((f) => f["id"])).toEqual(["cfg", "fault-1"]);
    expect(select(set, facts({ service: "x.Y" }), 0)).toEqual([{ kind: "abort", code: 14, message: "down", details: null, afterMessages: null }]);
  });

  it("keeps a given id and answers 409 for a duplicate", () => {
    const set = withConfigRule();
    expect(api(set, "POST", "/faults", { id: "mine", ...ABORT_RULE }).body).toMatchObject({ id: "mine" });
    expect(api(set, "POST", "/faults", { id: "cfg", ...ABORT_RULE })).toEqual({ status: 409, body: { error: 'a fault rule with id "cfg" already exists' } });
  });

  const invalid: [string, unknown, string, RegExp][] = [
    ["an unknown kind", { action: { kind: "explode" } }, "action.kind", /unknown fault kind "explode"/],
    ["a bad code", { action: { kind: "abort", code: "UNAVAILBLE" } }, "action.code", /did you mean "UNAVAILABLE"/],
    ["a percentage out of range", { fire: { percentage: 150 }, action: { kind: "blackhole" } }, "fire.percentage", /out of range/],
    ["an unknown key", { action: { kind: "blackhole" }, fires: {} }, "fires", /did you mean "fire"/],
  ];
  for (const [what, body, path, message] of invalid) {
    it(`answers 400 for ${what} with the key path, and adds nothing`, () => {
      const set = withConfigRule();
      const r = api(set, "POST", "/faults", body);
      expect(r.status).toBe(400);
      expect(r.body.issues?.[0]?.path).toBe(path);
      expect(r.body.issues?.[0]?.message).toMatch(message);
      expect(r.body.error).toMatch(new RegExp(`^invalid fault rule: ${path.replace(/\./g, "\\.")}: `));
      expect(set.size).toBe(1);
    });
  }

  it("answers 400 for bad JSON and for an empty body, and adds nothing", () => {
    const set = withConfigRule();
    const bad = api(set, "POST", "/faults", '{"action": {"kind": "abort",');
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatch(/^invalid JSON: /);
    expect(api(set, "POST", "/faults", "  ")).toEqual({ status: 400, body: { error: "the request body must be a JSON fault rule" } });
    expect(set.size).toBe(1);
  });

  it("ignores read-only fields, so a listed rule can be posted back", () => {
    const set = new FaultSet();
    const listed = api(set, "POST", "/faults", { id: "a", ...ABORT_RULE }).body;
    api(set, "DELETE", "/faults/a");
    expect(api(set, "POST", "/faults", listed)).toMatchObject({ status: 201, body: { id: "a", source: "api" } });
  });
});

describe("handleFaultsApi(): GET, PATCH and DELETE /faults/{id}", () => {
  it("gets one rule, or 404 for an unknown id", () => {
    const set = withConfigRule();
    expect(api(set, "GET", "/faults/cfg").body).toMatchObject({ id: "cfg", source: "config" });
    expect(api(set, "GET", "/faults/nope")).toEqual({ status: 404, body: { error: 'no fault rule with id "nope"' } });
  });

  it("patches part of a rule, keeps the rest and the counts", () => {
    const set = withConfigRule();
    select(set, facts(), 0);
    const r = api(set, "PATCH", "/faults/cfg", { fire: { percentage: 50 }, action: { delay: "20ms" } });
    expect(r).toMatchObject({
      status: 200,
      body: { id: "cfg", match: { service: "pkg.Svc" }, fire: { percentage: 50 }, action: { kind: "delay", delay: "20ms" }, matched: 1, fired: 1 },
    });
  });

  it("answers 400 for an invalid patch and leaves the old rule unchanged", () => {
    const set = withConfigRule();
    const before = api(set, "GET", "/faults/cfg").body;
    const r = api(set, "PATCH", "/faults/cfg", { action: { delay: "forever" } });
    expect(r.status).toBe(400);
    expect(r.body.issues).toEqual([{ path: "action.delay", message: expect.stringMatching(/invalid duration "forever"/) as unknown as string }]);
    expect(api(set, "GET", "/faults/cfg").body).toEqual(before);
  });

  it("answers 400 for a patch that changes the kind to an invalid action, and for bad JSON", () => {
    const set = withConfigRule();
    expect(api(set, "PATCH", "/faults/cfg", { action: { kind: "abort" } }).body.issues).toEqual([{ path: "action.code", message: "is required" }]);
    expect(api(set, "PATCH", "/faults/cfg", "{").status).toBe(400);
    expect(api(set, "PATCH", "/faults/cfg", "[1]").body.issues).toEqual([{ path: "", message: "expected a JSON object (a merge patch of the rule)" }]);
    expect(api(set, "GET", "/faults/cfg").body).toMatchObject({ action: { kind: "delay" } });
  });

  it("answers 400 when a patch changes the id, and 404 for an unknown id", () => {
    const set = withConfigRule();
    expect(api(set, "PATCH", "/faults/cfg", { id: "other" }).status).toBe(400);
    expect(api(set, "PATCH", "/faults/nope", {}).status).toBe(404);
  });

  it("accepts a listed rule sent back as a patch without changing it", () => {
    const set = withConfigRule();
    const listed = api(set, "GET", "/faults/cfg").body;
    expect(api(set, "PATCH", "/faults/cfg", listed)).toEqual({ status: 200, body: listed });
  });

  it("deletes a rule with 204, then answers 404", () => {
    const set = withConfigRule();
    expect(api(set, "DELETE", "/faults/cfg")).toEqual({ status: 204, body: null });
    expect(api(set, "DELETE", "/faults/cfg").status).toBe(404);
    expect(api(set, "GET", "/faults").body.faults).toEqual([]);
  });

  it("decodes a percent-encoded id", () => {
    const set = new FaultSet();
    api(set, "POST", "/faults", { id: "a.b-c_d", ...ABORT_RULE });
    expect(api(set, "GET", "/faults/a%2Eb-c_d").status).toBe(200);
    expect(api(set, "GET", "/faults/%E0%A4%A").status).toBe(404);
  });
});

describe("handleFaultsApi(): POST /faults/reset", () => {
  it("removes API rules, restores config rules and zeroes every counter", () => {
    const set = withConfigRule();
    api(set, "POST", "/faults", ABORT_RULE);
    select(set, facts(), 0);
    api(set, "PATCH", "/faults/cfg", { action: { delay: "99ms" } });
    const r = api(set, "POST", "/faults/reset", "", 1000);
    expect(r.status).toBe(200);
    expect(r.body.faults).toEqual([
      { id: "cfg", enabled: true, match: { service: "pkg.Svc" }, fire: {}, action: { kind: "delay", at: "request", delay: "10ms" }, source: "config", matched: 0, fired: 0 },
    ]);
    expect(api(set, "GET", "/faults").body).toMatchObject({ overflowed: 0 });
  });
});
