// xDS costs (issue 20): one dojang process configured only by the example control plane
// (docs/examples/xds-control-plane, built by `node scripts/engines.mjs`), driven by writing its
// snapshot file, and two raw node:http2 upstreams in this process.
//   update latency   the route is moved from cluster a to cluster b and back (a new snapshot each
//                    time); measured from the control plane serving the new snapshot (its log
//                    line's time, right after SetSnapshot) to the first call answered by the new
//                    cluster (calls back to back on one connection meanwhile)
//   1,000 endpoints  a ClusterLoadAssignment of 1,000 endpoints, all of them replaced each round:
//                    served → dojang's ACK (both on the control plane's log clock), dojang's CPU for
//                    it (utime+stime from /proc) and its RSS after; then one endpoint of the 1,000
//                    changed
// Medians (and max) over the rounds. Everything on 127.0.0.1; the processes are stopped by pid.
//
//   npm run build && node scripts/engines.mjs --only xds-control-plane && node bench/xds.mjs [--updates 20] [--rounds 5] [--endpoints 1000]
import http2 from "node:http2";
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { freePort, httpGet } from "./lib/peers.mjs";
import { CLK_TCK, cpuTicks, rssKiB, sleep, startProcess, stopProcess } from "./lib/proc.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const { values: args } = parseArgs({
  options: {
    updates: { type: "string", default: "20" },
    rounds: { type: "string", default: "5" },
    endpoints: { type: "string", default: "1000" },
  },
});
const UPDATES = Number(args.updates);
const ROUNDS = Number(args.rounds);
const N = Number(args.endpoints);
const NODE = "bench-node";
const T = {
  listener: "type.googleapis.com/envoy.config.listener.v3.Listener",
  route: "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
  cluster: "type.googleapis.com/envoy.config.cluster.v3.Cluster",
  endpoint: "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
};

const bin = join(ROOT, ".engines", "bin", "xds-control-plane");
if (!existsSync(bin)) throw new Error("run `node scripts/engines.mjs --only xds-control-plane` first");
const dir = mkdtempSync(join(tmpdir(), "dojang-bench-xds-"));

function upstream(name) {
  const s = http2.createServer();
  s.on("stream", (st) => {
    st.on("data", () => {});
    st.on("end", () => {
      st.respond({ ":status": 200, "content-type": "application/grpc", "x-who": name }, { waitForTrailers: true });
      st.on("wantTrailers", () => st.sendTrailers({ "grpc-status": "0" }));
      st.end(Buffer.from([0, 0, 0, 0, 0]));
    });
  });
  return new Promise((r) => s.listen(0, "127.0.0.1", () => r({ name, server: s, address: `127.0.0.1:${s.address().port}` })));
}

function call(session) {
  return new Promise((resolve) => {
    const req = session.request({ ":method": "POST", ":path": "/bench.Echo/Unary", "content-type": "application/grpc", te: "trailers" });
    let who = "";
    req.on("response", (h) => (who = String(h["x-who"] ?? "")));
    req.on("data", () => {});
    req.on("close", () => resolve(who));
    req.on("error", () => resolve(""));
    req.end(Buffer.from([0, 0, 0, 0, 0]));
  });
}

const hp = (a) => {
  const i = a.lastIndexOf(":");
  return { address: a.slice(0, i), port_value: Number(a.slice(i + 1)) };
};
const H2 = {
  "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
    "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
    explicit_http_config: { http2_protocol_options: {} },
  },
};
const eds = (name) => ({ name, type: "EDS", eds_cluster_config: { eds_config: { ads: {} } }, typed_extension_protocol_options: H2 });
const cla = (name, addrs) => ({ cluster_name: name, endpoints: [{ lb_endpoints: addrs.map((a) => ({ endpoint: { address: { socket_address: hp(a) } } })) }] });
const bigAddrs = (round, change = -1) => Array.from({ length: N }, (_, i) => `127.0.${(round % 200) + 1}.${1 + (i % 250)}:${20000 + i + (i === change ? 30000 : 0)}`);

async function main() {
  const [a, b] = await Promise.all([upstream("a"), upstream("b")]);
  const file = join(dir, "snapshot.json");
  const nodes = {};
  const writeFile = () => {
    writeFileSync(`${file}.tmp`, JSON.stringify({ nodes }));
    renameSync(`${file}.tmp`, file);
  };
  writeFile();
  const cp = startProcess("control-plane", bin, ["-file", file, "-addr", "127.0.0.1:0", "-log", "json"], { logDir: dir });
  /** the control plane's log lines (-log json, to its stderr file) */
  const cpLog = () =>
    readFileSync(cp.stderrFile, "utf8")
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l));
  const waitLog = async (what, pick, ms = 60_000) => {
    const t0 = performance.now();
    for (;;) {
      const lines = cpLog();
      const nack = lines.find((e) => e.msg === "NACK");
      if (nack) throw new Error("NACK: " + JSON.stringify(nack));
      const hit = lines.find(pick);
      if (hit) return { ...hit, at: Date.parse(hit.time) };
      if (performance.now() - t0 > ms) throw new Error(`${what}: not in ${ms} ms`);
      await sleep(5);
    }
  };
  const adsPort = Number(/:(\d+)$/.exec((await waitLog("the control plane listening", (e) => e.msg === "ADS server listening", 20_000)).addr)[1]);
  let version = 0;
  /** writes the snapshot; resolves with its version and when the control plane served it (its clock, ms) */
  const push = async (res) => {
    const v = String(++version);
    nodes[NODE] = { version: v, listeners: res[T.listener], routes: res[T.route], clusters: res[T.cluster], endpoints: res[T.endpoint] };
    writeFile();
    const served = await waitLog(`version ${v} served`, (e) => e.msg === "serving" && e.version === v);
    return { v, at: served.at };
  };
  const listenPort = await freePort();
  const adminPort = await freePort();
  const listener = {
    name: "in",
    address: { socket_address: { address: "127.0.0.1", port_value: listenPort } },
    filter_chains: [
      {
        filters: [
          {
            name: "hcm",
            typed_config: {
              "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
              stat_prefix: "in",
              rds: { route_config_name: "routes", config_source: { ads: {} } },
              http_filters: [{ name: "router", typed_config: { "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router" } }],
            },
          },
        ],
      },
    ],
  };
  const snapshot = (target, big) => ({
    [T.listener]: [listener],
    [T.route]: [{ name: "routes", virtual_hosts: [{ name: "all", domains: ["*"], routes: [{ match: { prefix: "/" }, route: { cluster: target } }] }] }],
    [T.cluster]: [eds("a"), eds("b"), eds("big")],
    [T.endpoint]: [cla("a", [a.address]), cla("b", [b.address]), cla("big", big)],
  });
  writeFileSync(
    join(dir, "bootstrap.yaml"),
    `node: { id: ${NODE}, cluster: bench }\ndynamic_resources:\n  ads_config: { api_type: GRPC, grpc_services: [{ envoy_grpc: { cluster_name: cp } }] }\n  lds_config: { ads: {} }\n  cds_config: { ads: {} }\nstatic_resources:\n  clusters:\n    - name: cp\n      load_assignment: { endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: ${adsPort} } } } }] }] }\n`,
  );
  writeFileSync(join(dir, "dojang.yaml"), `admin: { address: 127.0.0.1:${adminPort} }\nlogLevel: warn\naccessLog: false\nxds: { bootstrap: ${join(dir, "bootstrap.yaml")} }\nlisteners: []\nclusters: []\n`);
  const d = startProcess("dojang", process.execPath, [join(ROOT, "dist", "cli.js"), "--config", join(dir, "dojang.yaml")], { logDir: dir });
  try {
    await push(snapshot("a", []));
    let session;
    for (let i = 0; ; i++) {
      session?.destroy();
      session = http2.connect(`http://127.0.0.1:${listenPort}`);
      session.on("error", () => {});
      if ((await call(session)) === "a") break;
      if (i > 400) throw new Error("dojang did not serve the xDS listener");
      await sleep(50);
    }
    // update latency: push → first call answered by the new cluster
    const lat = [];
    for (let i = 0; i < UPDATES; i++) {
      const target = i % 2 === 0 ? "b" : "a";
      const t0 = performance.now();
      const pushed = push(snapshot(target, []));
      while ((await call(session)) !== target) {
        if (performance.now() - t0 > 30_000) throw new Error("update not applied in 30 s");
      }
      const answered = Date.now();
      lat.push(answered - (await pushed).at);
    }
    session.close();
    // 1,000 endpoints: served → the ACK of the EDS version (both times on the control plane's clock)
    const acked = async ({ v, at }) => (await waitLog(`the ACK of ${v}`, (e) => e.msg === "request" && e.type === T.endpoint && e.version === v)).at - at;
    await sleep(1000);
    const rss0 = rssKiB(d.pid);
    const all = [];
    const one = [];
    const rss = [];
    for (let r = 0; r < ROUNDS; r++) {
      let c0 = cpuTicks(d.pid);
      let p = await push(snapshot("a", bigAddrs(r)));
      all.push({ ms: await acked(p), cpuMs: ((cpuTicks(d.pid) - c0) * 1000) / CLK_TCK });
      rss.push(rssKiB(d.pid));
      await sleep(300);
      c0 = cpuTicks(d.pid);
      p = await push(snapshot("a", bigAddrs(r, 7)));
      one.push({ ms: await acked(p), cpuMs: ((cpuTicks(d.pid) - c0) * 1000) / CLK_TCK });
      await sleep(300);
    }
    const med = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
    const f = (x) => x.toFixed(1);
    const version = JSON.parse((await httpGet(`http://127.0.0.1:${adminPort}/config`)).body).xds.types.eds.version;
    console.log(`xds bench: ${UPDATES} route moves, ${ROUNDS} rounds of ${N} endpoints (last EDS version ${version})`);
    console.log(`| measure | median | max |\n|---|---:|---:|`);
    console.log(`| update latency: served → first call on the new cluster, ms | ${f(med(lat))} | ${f(Math.max(...lat))} |`);
    console.log(`| ${N} endpoints all replaced: served → ACK, ms | ${f(med(all.map((x) => x.ms)))} | ${f(Math.max(...all.map((x) => x.ms)))} |`);
    console.log(`| … dojang CPU for it, ms | ${f(med(all.map((x) => x.cpuMs)))} | ${f(Math.max(...all.map((x) => x.cpuMs)))} |`);
    console.log(`| 1 endpoint of ${N} changed: served → ACK, ms | ${f(med(one.map((x) => x.ms)))} | ${f(Math.max(...one.map((x) => x.ms)))} |`);
    console.log(`| … dojang CPU for it, ms | ${f(med(one.map((x) => x.cpuMs)))} | ${f(Math.max(...one.map((x) => x.cpuMs)))} |`);
    console.log(`| dojang RSS before / after each ${N}-endpoint round, MiB | ${f(rss0 / 1024)} | ${rss.map((x) => f(x / 1024)).join(" / ")} |`);
  } finally {
    await stopProcess(d);
    await stopProcess(cp);
    a.server.close();
    b.server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
