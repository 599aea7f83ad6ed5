// EDS without a reload (0.7 item 3): one endpoint changed in a cluster of N (1,000 and 10,000 by
// default), applied in place, against the whole-config reload dojang did before (the same build
// with DOJANG_XDS_ENDPOINTS_IN_PLACE=0), in one run. Two dojang processes, each its own node id on
// one example control plane (docs/examples/xds-control-plane, built by `node scripts/engines.mjs`),
// driven by writing its snapshot file; they are measured in turn, never at once.
//
// Each node is served: listener "in" → route "/" → cluster "probe" (EDS: one raw node:http2
// upstream, A or B); cluster "big" (EDS: N endpoints on 127.0.x.y, never called). Each round pushes
// one snapshot that changes one endpoint of "big" and moves "probe" from A to B (or back): both
// ClusterLoadAssignments come in the one EDS response and are applied together.
//   apply            dojang's own figures for applying it: the ACK line's applyCpuMs (the
//                    process's CPU, process.cpuUsage(), around the cluster update, or around the
//                    reload; exact: not process.threadCpuUsage(), whose clock, getrusage
//                    RUSAGE_THREAD, moves in 4 ms scheduler ticks on Linux) and applyMs (its wall
//                    time, in which an endpoint update holds the event loop; more than the CPU
//                    when the machine is busy)
//   response CPU     dojang's figure for the whole EDS response (cpuMs: decoding, mapping, diffing,
//                    applying; every thread), and the main thread's CPU
//                    from the push to the ACK + 200 ms read from outside, exact (schedstat while
//                    the thread sleeps: receiving, decoding, mapping, applying, the ACK, the log)
//   process CPU      the process's CPU from the push to 200 ms after its ACK, every thread
//                    (/proc/<pid>/task/*/schedstat, ns), no calls meanwhile
//   push → routed    in another round, with calls back to back on one connection: from the
//                    control plane serving the snapshot (its log's time) to the first call
//                    answered by the probe's new upstream
// Medians over the rounds (the machine may be shared: CPU time is less disturbed than wall time).
// Everything on 127.0.0.1; processes stopped by pid.
//
//   npm run build && node scripts/engines.mjs --only xds-control-plane && node bench/eds.mjs [--sizes 1000,10000] [--rounds 9]
import http2 from "node:http2";
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { freePort } from "./lib/peers.mjs";
import { cpuNs, sleep, startProcess, stopProcess } from "./lib/proc.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const { values: args } = parseArgs({ options: { sizes: { type: "string", default: "1000,10000" }, rounds: { type: "string", default: "9" }, baseline: { type: "string" } } });
// --baseline DIR: a third process, in place, running DIR/cli.js (another build's dist, with a
// node_modules beside it), measured in the same rounds: a before/after in one run
const SIZES = args.sizes.split(",").map(Number);
const ROUNDS = Number(args.rounds);
const T = {
  listener: "type.googleapis.com/envoy.config.listener.v3.Listener",
  route: "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
  cluster: "type.googleapis.com/envoy.config.cluster.v3.Cluster",
  endpoint: "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
};
const bin = join(ROOT, ".engines", "bin", "xds-control-plane");
if (!existsSync(bin)) throw new Error("run `node scripts/engines.mjs --only xds-control-plane` first");
const dir = mkdtempSync(join(tmpdir(), "dojang-bench-eds-"));

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

/** CPU of `pid`'s main thread, ns (exact while it sleeps: the kernel adds a thread's run time when it stops running). */
function mainCpuNs(pid) {
  return Number(readFileSync(`/proc/${pid}/task/${pid}/schedstat`, "utf8").split(" ")[0]);
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
/** N addresses on 127.0.x.y (never called) */
const bigAddrs = (n) => Array.from({ length: n }, (_, i) => `127.0.${1 + Math.floor(i / 250)}.${1 + (i % 250)}:${20000 + i}`);
let changes = 0;
/** `addrs` with one endpoint more moved to another port (in place): one endpoint changed per push */
const changeOne = (addrs) => {
  const k = (changes * 7919) % addrs.length;
  const a = addrs[k];
  addrs[k] = `${a.slice(0, a.lastIndexOf(":"))}:${30000 + (changes++ % 30000)}`;
  return addrs;
};

const med = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
const f = (x, d = 2) => (x === undefined ? "–" : x.toFixed(d));

async function main() {
  const [A, B] = await Promise.all([upstream("A"), upstream("B")]);
  const file = join(dir, "snapshot.json");
  const nodes = {};
  const writeFile = () => {
    writeFileSync(`${file}.tmp`, JSON.stringify({ nodes }));
    renameSync(`${file}.tmp`, file);
  };
  writeFile();
  const cp = startProcess("control-plane", bin, ["-file", file, "-addr", "127.0.0.1:0", "-log", "json"], { logDir: dir });
  let cpSeen = 0;
  // (whole lines only: the last one may be still being written)
  const lines = (file) => readFileSync(file, "utf8").split("\n").slice(0, -1);
  const cpLines = () => lines(cp.stderrFile).filter((l) => l.startsWith("{")).map((l) => JSON.parse(l));
  const waitLog = async (what, pick, ms = 120_000) => {
    const t0 = performance.now();
    for (;;) {
      const lines = cpLines().slice(cpSeen);
      const nack = lines.find((e) => e.msg === "NACK");
      if (nack) throw new Error("NACK: " + JSON.stringify(nack));
      const hit = lines.find(pick);
      if (hit) return { ...hit, at: Date.parse(hit.time) };
      if (performance.now() - t0 > ms) throw new Error(`${what}: not in ${ms} ms`);
      await sleep(2);
    }
  };
  const adsPort = Number(/:(\d+)$/.exec((await waitLog("the control plane listening", (e) => e.msg === "ADS server listening", 20_000)).addr)[1]);
  let version = 0;

  // two dojang processes: in place (the default) and the whole reload (before 0.7)
  const peers = [];
  for (const [name, inPlace, dist] of [
    ["in-place", true, join(ROOT, "dist")],
    ...(args.baseline === undefined ? [] : [["baseline-in-place", true, args.baseline]]),
    ["reload", false, join(ROOT, "dist")],
  ]) {
    const node = `bench-${name}`;
    const port = await freePort();
    const boot = join(dir, `${name}.bootstrap.yaml`);
    writeFileSync(
      boot,
      `node: { id: ${node}, cluster: bench }\ndynamic_resources:\n  ads_config: { api_type: GRPC, grpc_services: [{ envoy_grpc: { cluster_name: cp } }] }\n  lds_config: { ads: {} }\n  cds_config: { ads: {} }\nstatic_resources:\n  clusters:\n    - name: cp\n      load_assignment: { endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: ${adsPort} } } } }] }] }\n`,
    );
    const cfg = join(dir, `${name}.yaml`);
    writeFileSync(cfg, `admin: { address: 127.0.0.1:${await freePort()} }\nlogLevel: info\naccessLog: false\nxds: { bootstrap: ${boot} }\nlisteners: []\nclusters: []\n`);
    const env = { ...process.env, ...(inPlace ? {} : { DOJANG_XDS_ENDPOINTS_IN_PLACE: "0" }) };
    const p = startProcess(`dojang-${name}`, process.execPath, [join(dist, "cli.js"), "--config", cfg], { logDir: dir, env });
    peers.push({ name, node, port, p });
  }
  /** the ACK line of EDS `v` in a peer's own log */
  const ackLine = async (peer, v) => {
    for (let i = 0; i < 60_000; i++) {
      const hit = lines(peer.p.stdoutFile)
        .filter((l) => l.startsWith("{"))
        .map((l) => JSON.parse(l)).find((e) => e.msg === "xds: update accepted (ACK)" && e.type === "eds" && e.version === v);
      if (hit) return hit;
      await sleep(2);
    }
    throw new Error(`${peer.name}: no ACK line for eds ${v}`);
  };
  const snapshot = (peer, probe, big) => ({
    version: String(++version),
    listeners: [
      {
        name: "in",
        address: { socket_address: { address: "127.0.0.1", port_value: peer.port } },
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
      },
    ],
    routes: [{ name: "routes", virtual_hosts: [{ name: "all", domains: ["*"], routes: [{ match: { prefix: "/" }, route: { cluster: "probe" } }] }] }],
    clusters: [eds("probe"), eds("big")],
    endpoints: [cla("probe", [probe.address]), cla("big", big)],
  });
  /** writes `peer`'s snapshot; resolves when the control plane serves it, with its version and time */
  const push = async (peer, probe, big) => {
    cpSeen = cpLines().length;
    const s = snapshot(peer, probe, big);
    nodes[peer.node] = s;
    writeFile();
    const served = await waitLog(`${peer.node} ${s.version} served`, (e) => e.msg === "serving" && e.node === peer.node && e.version === s.version);
    return { v: s.version, at: served.at };
  };
  const acked = (peer, v) => waitLog(`the ACK of ${peer.node} eds ${v}`, (e) => e.msg === "request" && e.node === peer.node && e.type === T.endpoint && e.version === v);

  const rows = [];
  try {
    for (const n of SIZES) {
      const results = new Map(peers.map((p) => [p.name, { apply: [], applyWall: [], response: [], main: [], process: [], routed: [], how: new Set() }]));
      const probeOf = new Map();
      const big = new Map(peers.map((p) => [p.name, bigAddrs(n)]));
      for (const peer of peers) {
        const { v } = await push(peer, A, big.get(peer.name));
        await acked(peer, v);
        probeOf.set(peer.name, A);
      }
      await sleep(1000);
      for (let r = 1; r <= ROUNDS; r++) {
        for (const peer of peers) {
          // CPU: no calls meanwhile
          let probe = probeOf.get(peer.name) === A ? B : A;
          probeOf.set(peer.name, probe);
          const c0 = cpuNs(peer.p.pid);
          const m0 = mainCpuNs(peer.p.pid);
          let pushed = await push(peer, probe, changeOne(big.get(peer.name)));
          await acked(peer, pushed.v);
          const line = await ackLine(peer, pushed.v);
          await sleep(200);
          const res = results.get(peer.name);
          res.process.push((cpuNs(peer.p.pid) - c0) / 1e6);
          res.main.push((mainCpuNs(peer.p.pid) - m0) / 1e6);
          res.apply.push(line.applyCpuMs);
          if (line.applyMs !== undefined) res.applyWall.push(line.applyMs);
          res.response.push(line.cpuMs);
          res.how.add(line.how);
          await sleep(200);
          // push → first call routed by it
          const session = http2.connect(`http://127.0.0.1:${peer.port}`);
          session.on("error", () => {});
          const before = probeOf.get(peer.name);
          while ((await call(session)) !== before.name) await sleep(5);
          probe = before === A ? B : A;
          probeOf.set(peer.name, probe);
          const t0 = performance.now();
          const pending = push(peer, probe, changeOne(big.get(peer.name)));
          while ((await call(session)) !== probe.name) {
            if (performance.now() - t0 > 60_000) throw new Error(`${peer.name}: not routed in 60 s`);
          }
          const answered = Date.now();
          pushed = await pending;
          res.routed.push(answered - pushed.at);
          session.close();
          await acked(peer, pushed.v);
          await sleep(300);
        }
      }
      for (const peer of peers) rows.push({ n, name: peer.name, ...results.get(peer.name) });
    }
  } finally {
    for (const p of peers) await stopProcess(p.p);
    await stopProcess(cp);
    A.server.close();
    B.server.close();
  }
  console.log(`eds bench: one endpoint changed per round in a cluster of N (plus the probe cluster moved), ${ROUNDS} rounds, medians; node ${process.version}, ${cpus().length} CPUs (${cpus()[0]?.model ?? "?"})`);
  console.log("| N | path | applied as | apply CPU, ms | apply, wall (event loop held), ms | EDS response CPU (cpuMs), ms | main thread CPU, push → ACK + 200 ms, ms | process CPU, push → ACK + 200 ms, ms | push → first call routed, ms |");
  console.log("|---:|---|---|---:|---:|---:|---:|---:|---:|");
  for (const r of rows) console.log(`| ${r.n} | ${r.name} | ${[...r.how].join(", ")} | ${f(med(r.apply), 3)} | ${f(med(r.applyWall), 3)} | ${f(med(r.response))} | ${f(med(r.main))} | ${f(med(r.process))} | ${f(med(r.routed), 0)} |`);
  // the spread (the machine may be shared): every round's figure, sorted
  console.log("\napply CPU / apply wall, every round sorted (ms):");
  for (const r of rows) console.log(`  ${r.n} ${r.name}: ${[...r.apply].sort((x, y) => x - y).map((x) => f(x, 3)).join(" ")} / ${[...r.applyWall].sort((x, y) => x - y).map((x) => f(x, 3)).join(" ")}`);
  console.log("\n| N | reload ÷ in place: apply CPU | apply wall | EDS response CPU | main thread CPU | process CPU | push → routed |");
  console.log("|---:|---:|---:|---:|---:|---:|---:|");
  for (const n of SIZES) {
    const a = rows.find((r) => r.n === n && r.name === "in-place");
    const b = rows.find((r) => r.n === n && r.name === "reload");
    const ratio = (k) => f(med(b[k]) / med(a[k]), 1);
    console.log(`| ${n} | ${ratio("apply")}× | ${ratio("applyWall")}× | ${ratio("response")}× | ${ratio("main")}× | ${ratio("process")}× | ${ratio("routed")}× |`);
  }
  if (args.baseline !== undefined) {
    console.log("\n| N | baseline ÷ in place: apply CPU | apply wall | EDS response CPU | main thread CPU | process CPU | push → routed |");
    console.log("|---:|---:|---:|---:|---:|---:|---:|");
    for (const n of SIZES) {
      const a = rows.find((r) => r.n === n && r.name === "in-place");
      const b = rows.find((r) => r.n === n && r.name === "baseline-in-place");
      const ratio = (k) => f(med(b[k]) / med(a[k]), 1);
      console.log(`| ${n} | ${ratio("apply")}× | ${ratio("applyWall")}× | ${ratio("response")}× | ${ratio("main")}× | ${ratio("process")}× | ${ratio("routed")}× |`);
    }
  }
  rmSync(dir, { recursive: true, force: true });
}

await main();
