// GET /tap's filter (src/proxy/observe/tap.ts), pure: what each parameter takes and refuses, and
// which records pass. The stream itself is test/behaviour/tap.test.ts.
import { describe, expect, it } from "vitest";
import type { AccessRecord } from "../../src/proxy/observe/log.js";
import { parseTapFilter, tapMatches, TapHub, type TapFilter } from "../../src/proxy/observe/tap.js";

function filter(q: string): TapFilter {
  const f = parseTapFilter(new URLSearchParams(q));
  if (typeof f === "string") throw new Error(f);
  return f;
}
const rec = (o: Partial<AccessRecord>): AccessRecord => ({ path: "/pkg.Svc/Get", grpc_code: 0, decided_by: "upstream", route: "prefix:/", client_address: "10.1.2.3", ...o }) as AccessRecord;

describe("the tap filter", () => {
  it("a service wildcard matches its methods only, not a longer service name nor a nested path", () => {
    const f = filter("method=pkg.Svc/*");
    expect(tapMatches(f, rec({ path: "/pkg.Svc/Get" }))).toBe(true);
    expect(tapMatches(f, rec({ path: "/pkg.SvcX/Get" }))).toBe(false);
    expect(tapMatches(f, rec({ path: "/pkg.Svc/Get/more" }))).toBe(false);
    expect(tapMatches(filter("method=/pkg.Svc/Get,pkg.Other/Put"), rec({ path: "/pkg.Other/Put" }))).toBe(true);
  });

  it("codes by name (any case) or number; failed is any code but 0", () => {
    expect(tapMatches(filter("code=unavailable"), rec({ grpc_code: 14 }))).toBe(true);
    expect(tapMatches(filter("code=14&code=4"), rec({ grpc_code: 4 }))).toBe(true);
    expect(tapMatches(filter("code=14"), rec({ grpc_code: 0 }))).toBe(false);
    expect(tapMatches(filter("failed"), rec({ grpc_code: 0 }))).toBe(false);
    expect(tapMatches(filter("failed=true"), rec({ grpc_code: 1 }))).toBe(true);
  });

  it("clients by address or CIDR block, IPv4-mapped IPv6 included; a record without an address does not pass", () => {
    expect(tapMatches(filter("client=10.0.0.0/8"), rec({ client_address: "::ffff:10.9.9.9" }))).toBe(true);
    expect(tapMatches(filter("client=10.0.0.0/8"), rec({ client_address: "192.168.1.1" }))).toBe(false);
    expect(tapMatches(filter("client=2001:db8::/32"), rec({ client_address: "2001:db8::7" }))).toBe(true);
    expect(tapMatches(filter("client=10.1.2.3"), rec({ client_address: undefined }))).toBe(false);
  });

  it("every condition given must hold; none given passes every record", () => {
    expect(tapMatches(filter(""), rec({}))).toBe(true);
    expect(tapMatches(filter("decided_by=deadline&route=prefix:/"), rec({ decided_by: "deadline" }))).toBe(true);
    expect(tapMatches(filter("decided_by=deadline&route=service:x"), rec({ decided_by: "deadline" }))).toBe(false);
  });

  it("refuses what it does not know, naming it", () => {
    for (const [q, msg] of [
      ["grpc_code=1", 'unknown filter "grpc_code"'],
      ["code=17", 'code "17"'],
      ["code=OKAY", 'code "OKAY"'],
      ["decided_by=nobody", 'decided_by "nobody"'],
      ["client=10.0.0.300", 'client "10.0.0.300"'],
      ["failed=no", 'failed takes no value'],
    ] as const) {
      const f = parseTapFilter(new URLSearchParams(q));
      expect(typeof f === "string" ? f : "accepted", q).toContain(msg);
    }
  });
});

describe("TapHub", () => {
  it("hands each record to the subscribers whose filter it passes; size counts them, an unsubscribe removes one", () => {
    const hub = new TapHub();
    const a: string[] = [];
    const b: string[] = [];
    const offA = hub.subscribe(filter(""), { push: (r) => a.push(r.path) });
    hub.subscribe(filter("failed"), { push: (r) => b.push(r.path) });
    expect(hub.size).toBe(2);
    hub.publish(rec({ path: "/x.S/Ok" }));
    hub.publish(rec({ path: "/x.S/Bad", grpc_code: 13 }));
    expect(a).toEqual(["/x.S/Ok", "/x.S/Bad"]);
    expect(b).toEqual(["/x.S/Bad"]);
    offA();
    expect(hub.size).toBe(1);
    hub.publish(rec({ path: "/x.S/Again" }));
    expect(a).toHaveLength(2);
  });
});
