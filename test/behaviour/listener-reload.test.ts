// Contract (issue 11): "Whole-config hot reload: parse and validate, build the new snapshot, swap
// atomically; calls in flight finish on the snapshot they started with; sessions to endpoints
// that remain are kept; clusters that disappear are closed once idle; listeners added, removed or
// re-addressed. An invalid new config is rejected, the old one keeps serving, and the failure
// shows in the log, dojang_config_reloads_total{result} and the admin response (with the key
// paths)." In-process (Dojang.reload, and POST /reload re-reading a real file); the process-level
// triggers (SIGHUP, watchConfig, workers) are in test/process/reload*.test.ts.
import { renameSync } from "node:fs";
import * as grpc from "@grpc/grpc-js";
import { Writable } from "node:stream";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { configFromText, loadConfigFile } from "../../src/config/index.js";
import { Dojang } from "../../src/proxy/dojang.js";
import { watchConfigFile } from "../../src/config/watch.js";
import { startBackend, type Backend } from "../helpers/backends.js";
import { useFixtures, waitFor } from "../helpers/fixtures.js";
import { echoClient, sample, scrape, unary } from "../helpers/peers.js";
import { canConnect, freePort, occupyPort, tempDir } from "../helpers/process.js";

const fx = useFixtures();

async function backend(name: string): Promise<Backend> {
  return fx.track(await startBackend(name), (b) => b.close());
}

interface Opts {
  readonly listeners?: readonly { name: string; port: number | string; cluster: string }[];
  readonly clusters?: readonly { name: string; endpoints: readonly string[]; extra?: string }[];
  readonly admin?: string;
  readonly top?: string;
}

/** A config text: listeners (name, port, the cluster of their catch-all route) and clusters. */
function yaml(o: Opts): string {
  const ls = o.listeners ?? [{ name: "main", port: 0, cluster: "backend" }];
  return [
    `admin: { address: 127.0.0.1:0${o.admin ?? ""} }`,
    "listeners:",
    ...ls.flatMap((l) => [`  - name: ${l.name}`, `    address: 127.0.0.1:${l.port}`, "    routes:", `      - { match: { prefix: "/" }, cluster: ${l.cluster} }`]),
    "clusters:",
    ...(o.clusters ?? []).map((c) => `  - { name: ${c.name}, endpoints: [${c.endpoints.map((e) => `"${e}"`).join(", ")}]${c.extra ?? ""} }`),
    "drainTimeout: 3s",
    "logLevel: info",
    ...(o.top !== undefined ? [o.top] : []),
    "",
  ].join("\n");
}

/** A Dojang on a config file (POST /reload re-reads it), logging into `lines`. */
async function start(text: string): Promise<{ d: Dojang; file: ReturnType<typeof tempDir> & { path: string }; lines: Record<string, unknown>[] }> {
  const dir = fx.track(tempDir(), (t) => t.remove());
  const path = dir.write("dojang.yaml", text);
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString().split("\n")) if (l.startsWith("{")) lines.push(JSON.parse(l) as Record<string, unknown>);
      cb();
    },
  });
  const logger = pino({ level: "info" }, sink);
  // as the CLI does: POST /reload re-reads the file, and a reload sets the log level
  const d = new Dojang(loadConfigFile(path), { logger, configFile: path, reloadLogLevel: true });
  await d.start();
  fx.track(d, (x) => x.close(0));
  return { d, file: Object.assign(dir, { path }), lines };
}

const name = async (address: string): Promise<string | undefined> => {
  const c = fx.client(address);
  const r = await unary(c, Buffer.from("x"));
  c.close();
  return r.err === null ? r.res?.toString() : `error ${r.err.code}`;
};

async function post(admin: string, path: string): Promise<{ status: number; body: any }> {
  const res = await fetch(`http://${admin}${path}`, { method: "POST", signal: AbortSignal.timeout(5000) });
  return { status: res.status, body: await res.json() };
}

describe('"listeners added, removed or re-addressed"', () => {
  it("adds a listener, re-addresses it (new address bound first, the old one drains while its call finishes), and removes it", async () => {
    const a = await backend("a");
    const { d } = await start(yaml({ clusters: [{ name: "backend", endpoints: [a.address] }] }));
    const [p1, p2] = [await freePort(), await freePort()];
    const withExtra = (port: number) => yaml({ listeners: [{ name: "main", port: 0, cluster: "backend" }, { name: "extra", port, cluster: "backend" }], clusters: [{ name: "backend", endpoints: [a.address] }] });
    // main's port 0 is the same address: kept (its socket, its connections)
    const main = d.listeners[0]!;
    let r = await d.reload(configFromText(withExtra(p1), "<test>"));
    expect(r).toMatchObject({ ok: true, applied: ["listeners[1]"], notApplied: [] });
    expect(d.listeners[0]).toBe(main);
    expect(await name(`127.0.0.1:${p1}`)).toBe("a");

    // A long call on the old address, then the re-address.
    a.delayMs = 1000;
    const c = fx.client(`127.0.0.1:${p1}`);
    const long = unary(c, Buffer.from("x"));
    await waitFor("the long call in flight", () => a.calls === 2);
    r = await d.reload(configFromText(withExtra(p2), "<test>"));
    expect(r).toMatchObject({ ok: true, applied: ["listeners[1].address"] });
    a.delayMs = 0;
    expect(await name(`127.0.0.1:${p2}`)).toBe("a");
    expect(await canConnect(p1)).toBe(false);
    const lr = await long;
    expect(lr.err).toBeNull();
    expect(lr.res?.toString()).toBe("a");

    // Removed: its port is closed.
    r = await d.reload(configFromText(yaml({ clusters: [{ name: "backend", endpoints: [a.address] }] }), "<test>"));
    expect(r).toMatchObject({ ok: true, applied: ['listeners["extra"]'] });
    await waitFor("the removed listener to close", () => d.listeners.length === 1);
    expect(await canConnect(p2)).toBe(false);
    expect(await name(d.address())).toBe("a");
  });

  it("refuses a reload whose new listener cannot bind, and changes nothing (the route change with it is not applied)", async () => {
    const a = await backend("a");
    const b = await backend("b");
    const { d, lines } = await start(yaml({ clusters: [{ name: "backend", endpoints: [a.address] }] }));
    const taken = fx.track(await occupyPort(), (o) => o.close());
    const before = d.snapshot;
    const r = await d.reload(
      configFromText(yaml({ listeners: [{ name: "main", port: 0, cluster: "backend" }, { name: "extra", port: taken.port, cluster: "backend" }], clusters: [{ name: "backend", endpoints: [b.address] }] }), "<test>"),
    );
    expect(r.ok).toBe(false);
    expect(r.issues?.[0]?.path).toBe("listeners[1].address");
    expect(d.snapshot).toBe(before);
    expect(d.listeners).toHaveLength(1);
    expect(await name(d.address())).toBe("a");
    expect(lines.find((l) => l["msg"] === "reload failed; nothing changed")?.["err"]).toContain("listeners[1].address");
  });
});

describe('"clusters whose name remains are kept; clusters that disappear are closed once idle"', () => {
  it("keeps the same Cluster object when only its endpoints change (endpoints that stay keep their sessions), and builds a new one when another key changes", async () => {
    const a = await backend("a");
    const b = await backend("b");
    const { d } = await start(yaml({ clusters: [{ name: "backend", endpoints: [a.address] }] }));
    expect(await name(d.address())).toBe("a");
    const first = d.clusters.get("backend")!;
    const epA = first.endpoints[0]!;
    const sessionA = epA.sessions[0];
    expect(sessionA).toBeDefined();

    let r = await d.reload(configFromText(yaml({ clusters: [{ name: "backend", endpoints: [a.address, b.address] }] }), "<test>"));
    expect(r).toMatchObject({ ok: true, applied: ["clusters[0].endpoints"] });
    expect(d.clusters.get("backend")).toBe(first);
    expect(first.endpoints[0]).toBe(epA);
    expect(epA.sessions[0]).toBe(sessionA);
    const seen = new Set<string | undefined>();
    for (let i = 0; i < 6; i++) seen.add(await name(d.address()));
    expect(seen).toEqual(new Set(["a", "b"]));
    // and back: the comparison is with the endpoints in use, not with those the cluster was built with
    r = await d.reload(configFromText(yaml({ clusters: [{ name: "backend", endpoints: [a.address] }] }), "<test>"));
    expect(r).toMatchObject({ ok: true, applied: ["clusters[0].endpoints"] });
    expect(d.clusters.get("backend")).toBe(first);
    const back = new Set<string | undefined>();
    for (let i = 0; i < 4; i++) back.add(await name(d.address()));
    expect(back).toEqual(new Set(["a"]));
    r = await d.reload(configFromText(yaml({ clusters: [{ name: "backend", endpoints: [a.address, b.address] }] }), "<test>"));
    expect(d.clusters.get("backend")).toBe(first);

    r = await d.reload(configFromText(yaml({ clusters: [{ name: "backend", endpoints: [b.address], extra: ", connectTimeout: 2s" }] }), "<test>"));
    expect(r).toMatchObject({ ok: true, applied: ["clusters[0].endpoints", "clusters[0].connectTimeout"] });
    const second = d.clusters.get("backend")!;
    expect(second).not.toBe(first);
    expect(await name(d.address())).toBe("b");
    // the old one is closed once idle: no session left open
    await waitFor("the old cluster's sessions to close", () => first.open.size === 0, 3000);
  });

  it("lets a call in flight on a dropped cluster finish there, and sends new calls to the new cluster", async () => {
    const a = await backend("a");
    const b = await backend("b");
    const { d } = await start(yaml({ clusters: [{ name: "backend", endpoints: [a.address] }] }));
    a.delayMs = 800;
    const c = fx.client(d.address());
    const long = unary(c, Buffer.from("x"));
    await waitFor("the long call", () => a.calls === 1);
    const old = d.clusters.get("backend")!;
    const r = await d.reload(configFromText(yaml({ listeners: [{ name: "main", port: 0, cluster: "next" }], clusters: [{ name: "next", endpoints: [b.address] }] }), "<test>"));
    expect(r.ok).toBe(true);
    expect(await name(d.address())).toBe("b");
    const lr = await long;
    expect(lr.err).toBeNull();
    expect(lr.res?.toString()).toBe("a");
    await waitFor("the dropped cluster closed once idle", () => old.open.size === 0, 3000);
  });
});

describe('"clusters that disappear are closed once idle": idle means no call, not only no stream', () => {
  it("keeps a dropped cluster open for a call that has not picked its endpoint yet (a fault delay longer than the idle check), then closes it once that call ends", async () => {
    const a = await backend("a");
    const b = await backend("b");
    const { d } = await start(yaml({ clusters: [{ name: "backend", endpoints: [a.address] }] }).replace('cluster: backend }', "cluster: backend }\n    faultHeaders: true"));
    const old = d.clusters.get("backend")!;
    const c = fx.client(d.address());
    const md = new grpc.Metadata();
    md.set("x-envoy-fault-delay-request", "800");
    const delayed = unary(c, Buffer.from("x"), md);
    await waitFor("the delayed call", () => old.breaker.activeCalls === 1);
    const r = await d.reload(configFromText(yaml({ listeners: [{ name: "main", port: 0, cluster: "next" }], clusters: [{ name: "next", endpoints: [b.address] }] }), "<test>"));
    expect(r.ok).toBe(true);
    const res = await delayed;
    expect(res.err).toBeNull();
    expect(res.res?.toString()).toBe("a");
    // the session the late call opened on the dropped cluster is closed once the call is over
    await waitFor("the dropped cluster closed", () => old.breaker.activeCalls === 0 && old.open.size === 0, 3000);
  });
});

describe('"an invalid new config is rejected, the old one keeps serving, and the failure shows in the log, the metric and the admin response"', () => {
  it("POST /reload: 400 with the issues and their key paths, the old config serving, result=error counted and logged; then 200 with what applied", async () => {
    const a = await backend("a");
    const b = await backend("b");
    const { d, file, lines } = await start(yaml({ admin: ", mutations: true", clusters: [{ name: "backend", endpoints: [a.address] }] }));
    const admin = d.adminAddress!;
    file.write("dojang.yaml", yaml({ admin: ", mutations: true", listeners: [{ name: "main", port: 0, cluster: "bakend" }], clusters: [{ name: "backend", endpoints: [b.address] }] }).replace("drainTimeout: 3s", "drainTimeout: soon"));
    const bad = await post(admin, "/reload");
    expect(bad.status).toBe(400);
    expect(bad.body.result).toBe("error");
    const paths = (bad.body.issues as { path: string }[]).map((i) => i.path);
    expect(paths).toContain("listeners[0].routes[0].cluster");
    expect(paths).toContain("drainTimeout");
    expect(await name(d.address())).toBe("a");
    const failed = lines.find((l) => l["msg"] === "reload failed; nothing changed");
    expect(failed).toMatchObject({ trigger: "POST /reload", file: file.path, level: 50 });
    expect(String(failed!["err"])).toContain("listeners[0].routes[0].cluster");
    let m = await scrape(admin);
    expect(sample(m, "dojang_config_reloads_total", { result: "error" })).toBe(1);
    expect(sample(m, "dojang_config_reloads_total", { result: "ok" })).toBe(0);

    file.write("dojang.yaml", yaml({ admin: ", mutations: true", clusters: [{ name: "backend", endpoints: [b.address] }] }).replace("logLevel: info", "logLevel: warn"));
    const ok = await post(admin, "/reload");
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ result: "ok", ok: true, version: 2, applied: ["clusters[0].endpoints", "logLevel"], notApplied: [] });
    expect(await name(d.address())).toBe("b");
    expect(d.log.level).toBe("warn");
    m = await scrape(admin);
    expect(sample(m, "dojang_config_reloads_total", { result: "ok" })).toBe(1);
  });

  it("POST /reload and POST /drain are mutations: 403 while admin.mutations is off, 405 for GET", async () => {
    const a = await backend("a");
    const { d } = await start(yaml({ clusters: [{ name: "backend", endpoints: [a.address] }] }));
    const admin = d.adminAddress!;
    expect((await post(admin, "/reload")).status).toBe(403);
    expect((await post(admin, "/drain")).status).toBe(403);
    expect((await fetch(`http://${admin}/reload`)).status).toBe(405);
    expect(d.isDraining).toBe(false);
  });

  it("names what a restart would apply: workers and the admin address keep their running values", async () => {
    const a = await backend("a");
    const { d } = await start(yaml({ clusters: [{ name: "backend", endpoints: [a.address] }] }));
    const adminBefore = d.adminAddress;
    const r = await d.reload(configFromText(yaml({ clusters: [{ name: "backend", endpoints: [a.address] }], top: "workers: 2" }).replace("127.0.0.1:0 }", "127.0.0.1:1 }"), "<test>"));
    expect(r).toMatchObject({ ok: true, applied: [], notApplied: ["admin.address", "workers"], message: "config reloaded; some changes need a restart to apply" });
    expect(d.config.workers).toBe(1);
    expect(d.config.admin?.address.port).toBe(0);
    expect(d.adminAddress).toBe(adminBefore);
  });
});

describe('"POST /drain as SIGTERM\'s twin"', () => {
  it("answers 202, turns /ready 503 and drains: the call in flight finishes, new connections are refused", async () => {
    const a = await backend("a");
    const { d } = await start(yaml({ admin: ", mutations: true", clusters: [{ name: "backend", endpoints: [a.address] }] }));
    a.delayMs = 500;
    const c = echoClient(d.address());
    const long = unary(c, Buffer.from("x"));
    await waitFor("the call in flight", () => a.calls === 1);
    const r = await post(d.adminAddress!, "/drain");
    expect(r).toMatchObject({ status: 202, body: { draining: true } });
    expect(d.isDraining).toBe(true);
    const lr = await long;
    expect(lr.err).toBeNull();
    c.close();
    const port = Number(d.address().split(":").at(-1));
    await waitFor("the listener to close", () => !d.listeners[0]!.server.listening, 3000);
    expect(await canConnect(port)).toBe(false);
  });
});

describe('"/ready can be tied to named clusters having a healthy endpoint (admin.readyClusters)"', () => {
  it('answers 503 "cluster X has no healthy endpoint" while it has none, 200 once it has', async () => {
    const a = await backend("a");
    a.serving = false;
    const checks = ", healthCheck: { interval: 50ms, timeout: 500ms, unhealthyThreshold: 1, healthyThreshold: 1 }";
    const { d } = await start(yaml({ admin: ", readyClusters: [backend]", clusters: [{ name: "backend", endpoints: [a.address], extra: checks }] }));
    const ready = async () => {
      const res = await fetch(`http://${d.adminAddress}/ready`);
      return { status: res.status, body: await res.text() };
    };
    await waitFor("503", () => d.notReadyReason() !== null, 3000);
    expect(await ready()).toEqual({ status: 503, body: "cluster backend has no healthy endpoint\n" });
    a.serving = true;
    await waitFor("ready", () => d.notReadyReason() === null, 3000);
    expect(await ready()).toEqual({ status: 200, body: "ready\n" });
    // calls are unaffected by readiness
    expect(await name(d.address())).toBe("a");
  });
});

describe('"opt-in, when the config file changes" (watchConfig: fs.watch on the directory, debounced)', () => {
  it("calls back once per real change: an in-place write, an editor's rename-replace, a burst of writes; never for the same text", async () => {
    const dir = fx.track(tempDir(), (t) => t.remove());
    const path = dir.write("dojang.yaml", "one\n");
    const seen: string[] = [];
    const w = fx.track(watchConfigFile(path, (text) => seen.push(text), pino({ level: "silent" }), 100), (x) => x.close());
    const quiet = () => new Promise((r) => setTimeout(r, 400));

    dir.write("dojang.yaml", "two\n");
    await waitFor("the in-place write", () => seen.length === 1, 3000);
    // vim's way: write a new file beside it, rename it over the old one (a new inode)
    dir.write(".dojang.yaml.swp", "three\n");
    renameSync(`${dir.dir}/.dojang.yaml.swp`, path);
    await waitFor("the rename-replace", () => seen.length === 2, 3000);
    // a burst of writes within the debounce: one callback, with the last text
    for (const t of ["4a\n", "4b\n", "four\n"]) dir.write("dojang.yaml", t);
    await waitFor("the burst", () => seen.length === 3, 3000);
    // the same text again, and a file elsewhere in the directory: nothing
    dir.write("dojang.yaml", "four\n");
    dir.write("other.txt", "x");
    await quiet();
    expect(seen).toEqual(["two\n", "three\n", "four\n"]);
    w.close();
  });
});
