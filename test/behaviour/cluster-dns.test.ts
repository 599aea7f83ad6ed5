// Contract (issue 11, step 2): "DNS endpoints (A/AAAA re-resolved every refreshInterval, as a
// Kubernetes headless Service is consumed): endpoints added and removed without dropping calls on
// the ones that stay; tests use a local resolver override." A tiny DNS server on loopback answers
// for "backend.test" (DOJANG_DNS_SERVERS points dojang at it); two grpc-js upstreams share one
// port, on 127.0.0.1 and ::1, so the records alone choose where calls go.
import { afterEach, describe, expect, it } from "vitest";
import { unary } from "../helpers/peers.js";
import { useFixtures, waitFor } from "../helpers/fixtures.js";
import { startDnsServer } from "../helpers/dns-server.js";
import { runCalls, startBackend, type Backend } from "../helpers/backends.js";

const fx = useFixtures();
afterEach(() => {
  delete process.env["DOJANG_DNS_SERVERS"];
});

/** Backends "v4" on 127.0.0.1:P and "v6" on [::1]:P (the same P). */
async function pair(): Promise<[Backend, Backend]> {
  for (let i = 0; ; i++) {
    const v4 = fx.track(await startBackend("v4"), (b) => b.close());
    try {
      const v6 = fx.track(await startBackend("v6", v4.port, "::1"), (b) => b.close());
      return [v4, v6];
    } catch (err) {
      if (i >= 4) throw err;
    }
  }
}

async function setup(records: string[]) {
  const [v4, v6] = await pair();
  const dns = fx.track(await startDnsServer({ "backend.test": records }), (d) => d.close());
  process.env["DOJANG_DNS_SERVERS"] = dns.address;
  const px = await fx.proxyFor(v4.address, { cluster: { endpoints: undefined, dns: `backend.test:${v4.port}`, refreshInterval: "100ms" } });
  const cluster = px.instance.clusters.get("backend")!;
  const c = fx.client(px.address);
  const labels = () => cluster.endpoints.map((e) => e.label).join(" ");
  return { v4, v6, dns, px, cluster, c, labels };
}

describe("clusters[].refreshInterval: how often dns is resolved again", () => {
  // The judge is the DNS server: when dojang asks it. One lookup asks for A and AAAA at once, and
  // the next is timed from the end of the last one, so the A queries are one interval apart at least.
  it("300ms: the resolver is asked again every 300 ms (never sooner); 5s (the control, the default) not at all within 2.5 s", async () => {
    const [v4] = await pair();
    const dns = fx.track(await startDnsServer({ "backend.test": ["127.0.0.1"] }), (d) => d.close());
    const other = fx.track(await startDnsServer({ "backend.test": ["127.0.0.1"] }), (d) => d.close());
    process.env["DOJANG_DNS_SERVERS"] = dns.address;
    await fx.proxyFor(v4.address, { cluster: { endpoints: undefined, dns: `backend.test:${v4.port}`, refreshInterval: "300ms" } });
    process.env["DOJANG_DNS_SERVERS"] = other.address;
    await fx.proxyFor(v4.address, { cluster: { endpoints: undefined, dns: `backend.test:${v4.port}`, refreshInterval: "5s" } });
    await waitFor("both first lookups", () => dns.aQueries.length >= 1 && other.aQueries.length >= 1);
    const from = performance.now();
    await new Promise((r) => setTimeout(r, 2500));
    const t = dns.aQueries;
    for (let i = 1; i < t.length; i++) expect(t[i]! - t[i - 1]!).toBeGreaterThanOrEqual(300 - 1);
    // 2.5 s at one lookup per 300 ms and a little: 8 on a quiet machine; 4 leaves room for a loaded one
    expect(t.filter((x) => x > from).length).toBeGreaterThanOrEqual(4);
    expect(other.aQueries.filter((x) => x > from)).toEqual([]);
  });
});

describe('"DNS endpoints … added and removed without dropping calls on the ones that stay"', () => {
  it("resolves the name into endpoints and follows records added and removed", async () => {
    const { v4, v6, dns, cluster, c, labels } = await setup(["127.0.0.1"]);
    await waitFor("the first lookup", () => cluster.endpoints.length === 1);
    expect(labels()).toBe(v4.address);
    expect((await unary(c, Buffer.from("x"))).res?.toString()).toBe("v4");

    dns.records.set("backend.test", ["127.0.0.1", "::1"]);
    await waitFor("::1 to be added", () => cluster.endpoints.length === 2);
    expect(labels()).toBe(`${v4.address} ${v6.address}`);
    const both = await runCalls(10, 1, async () => (await unary(c, Buffer.from("x"))).res?.toString());
    expect(both.filter((x) => x === "v4").length).toBe(5);
    expect(both.filter((x) => x === "v6").length).toBe(5);

    dns.records.set("backend.test", ["::1"]);
    await waitFor("127.0.0.1 to be removed", () => cluster.endpoints.length === 1);
    expect(labels()).toBe(v6.address);
    const after = await runCalls(6, 1, async () => (await unary(c, Buffer.from("x"))).res?.toString());
    expect(after).toEqual(new Array(6).fill("v6"));
  });

  it("calls in flight finish when their endpoint stays, and when it is removed (its sessions drain); the one that stays keeps its session", async () => {
    const { v4, v6, dns, cluster, c } = await setup(["127.0.0.1", "::1"]);
    await waitFor("both endpoints", () => cluster.endpoints.length === 2);
    const stay = cluster.endpoints.find((e) => e.label === v6.address)!;
    v4.delayMs = 600;
    v6.delayMs = 600;
    const inFlight = runCalls(16, 16, () => unary(c, Buffer.from("x")));
    await waitFor("calls on both", () => v4.calls + v6.calls === 16);
    const session = stay.sessions[0];
    expect(session).toBeDefined();

    dns.records.set("backend.test", ["::1"]);
    await waitFor("127.0.0.1 to be removed", () => cluster.endpoints.length === 1);
    const rs = await inFlight;
    expect(rs.map((r) => r.err?.code ?? 0)).toEqual(new Array(16).fill(0));
    expect(rs.filter((r) => r.res?.toString() === "v4").length).toBe(8);
    // the endpoint that stayed is the same object with the same session
    expect(cluster.endpoints[0]).toBe(stay);
    expect(stay.sessions[0]).toBe(session);
    // the removed endpoint's session went away once its calls ended
    await waitFor("the removed endpoint's session to close", () => [...cluster.open].every((s) => s.endpoint === stay));

    v6.delayMs = 0;
    dns.records.set("backend.test", ["127.0.0.1", "::1"]);
    v4.delayMs = 0;
    await waitFor("127.0.0.1 back", () => cluster.endpoints.length === 2);
    const again = await runCalls(4, 1, async () => (await unary(c, Buffer.from("x"))).res?.toString());
    expect(again.filter((x) => x === "v4").length).toBe(2);
  });

  it("a failed lookup keeps the last endpoints, and /clusters shows the target and the error", async () => {
    const { dns, px, cluster, c } = await setup(["127.0.0.1"]);
    await waitFor("the first lookup", () => cluster.endpoints.length === 1);
    dns.records.delete("backend.test");
    await waitFor("a failed lookup", () => cluster.dnsLast?.error !== undefined, 3000);
    expect(cluster.endpoints.length).toBe(1);
    expect((await unary(c, Buffer.from("x"))).res?.toString()).toBe("v4");
    const body = (await (await fetch(`http://${px.adminAddress}/clusters`)).json()) as { dns: { target: string; lastResolution: { error?: string } } }[];
    expect(body[0]!.dns.target).toMatch(/^backend\.test:\d+$/);
    expect(body[0]!.dns.lastResolution.error).toBeDefined();
  });
});
