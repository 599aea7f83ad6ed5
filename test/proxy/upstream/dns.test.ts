// DNS endpoints against a real (tiny) DNS server on loopback: A and AAAA records, changes seen
// at the next refresh, failures keeping the last known endpoints.
import { promises as dnsp } from "node:dns";
import { afterEach, describe, expect, it } from "vitest";
import { DnsResolver } from "../../../src/proxy/upstream/dns.js";
import { startDnsServer, type DnsServer } from "../../helpers/dns-server.js";
import type { HostPort } from "../../../src/config/index.js";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function setup(records: Record<string, string[]>, refreshIntervalMs = 50): Promise<{ dns: DnsServer; r: DnsResolver; updates: (readonly HostPort[])[]; errors: string[] }> {
  const dns = await startDnsServer(records);
  cleanups.push(() => dns.close());
  const resolver = new dnsp.Resolver({ timeout: 300, tries: 1 });
  resolver.setServers([dns.address]);
  const updates: (readonly HostPort[])[] = [];
  const errors: string[] = [];
  const r = new DnsResolver({ host: "backend.default.svc", port: 50051, refreshIntervalMs }, (e) => updates.push(e), { resolver, onError: (m) => errors.push(m) });
  cleanups.push(() => r.stop());
  return { dns, r, updates, errors };
}

async function until(cond: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await new Promise((res) => setTimeout(res, 10));
  }
}

describe("DnsResolver", () => {
  it("resolves A and AAAA records into endpoints with the target's port", async () => {
    const { r, updates } = await setup({ "backend.default.svc": ["127.0.0.2", "127.0.0.1", "::1"] });
    await r.start();
    expect(updates).toEqual([
      [
        { host: "127.0.0.1", port: 50051 },
        { host: "127.0.0.2", port: 50051 },
        { host: "::1", port: 50051 },
      ],
    ]);
  });

  it("reports additions and removals at the next refresh, and nothing when the set is unchanged", async () => {
    const { dns, r, updates } = await setup({ "backend.default.svc": ["127.0.0.1"] });
    await r.start();
    const q0 = dns.queries;
    await until(() => dns.queries >= q0 + 6); // three more refreshes, no change
    expect(updates).toHaveLength(1);
    dns.records.set("backend.default.svc", ["127.0.0.1", "127.0.0.3"]);
    await until(() => updates.length === 2);
    expect(updates[1]?.map((e) => e.host)).toEqual(["127.0.0.1", "127.0.0.3"]);
    dns.records.set("backend.default.svc", ["127.0.0.3"]);
    await until(() => updates.length === 3);
    expect(r.current.map((e) => e.host)).toEqual(["127.0.0.3"]);
  });

  it("keeps the last endpoints when the name disappears or the server stops answering", async () => {
    const { dns, r, updates, errors } = await setup({ "backend.default.svc": ["127.0.0.1"] });
    await r.start();
    dns.records.delete("backend.default.svc");
    await until(() => errors.length >= 1);
    expect(errors[0]).toMatch(/no A or AAAA records|ENOTFOUND|NXDOMAIN|not found/i);
    await dns.close();
    await until(() => errors.length >= 2);
    expect(updates).toHaveLength(1);
    expect(r.current).toEqual([{ host: "127.0.0.1", port: 50051 }]);
  });
});
