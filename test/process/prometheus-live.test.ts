// A real Prometheus (Debian's /usr/bin/prometheus) scrapes a real dojang process every second,
// with deploy/prometheus/dojang-rules.yaml loaded, while calls run through dojang: some answered,
// some failed by an injected fault (the admin fault API), some by no route. Prometheus then
// answers "failed calls in the last minute by decided_by" (the raw query and the recorded rule),
// evaluates every rule without error, has the fast-burn alert pending for the faulted method, and
// every query of deploy/grafana/dojang.json runs. The judge is Prometheus's HTTP API.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import http2 from "node:http2";
import { describe, expect, it } from "vitest";
import { systemBinary } from "../helpers/engines.js";
import { rawCall, unary } from "../helpers/peers.js";
import { REPO_ROOT, freePort, ownConnectionClient, processTestKit, spawnDojang, spawnGroup, waitFor, waitReady } from "../helpers/process.js";

const kit = processTestKit();

async function promQuery(prom: string, q: string): Promise<{ status: string; error?: string; data?: { result: { metric: Record<string, string>; value: [number, string] }[] } }> {
  const res = await fetch(`http://${prom}/api/v1/query?query=${encodeURIComponent(q)}`, { signal: AbortSignal.timeout(5000) });
  return (await res.json()) as never;
}

describe("a real Prometheus scraping a real dojang, with the shipped rules", () => {
  it("answers which calls failed in the last minute and who decided; the rules evaluate, the burn alert is pending, the dashboard's queries run", { timeout: 180_000 }, async () => {
    const b = await kit.backend("b");
    const [listenPort, adminPort, promPort] = [await freePort(), await freePort(), await freePort()];
    const dir = kit.dir();
    const file = dir.write(
      "dojang.yaml",
      [
        "admin:",
        `  address: 127.0.0.1:${adminPort}`,
        "  mutations: true",
        "listeners:",
        "  - name: main",
        `    address: 127.0.0.1:${listenPort}`,
        "    routes:",
        "      - match: { service: test.Echo }",
        "        cluster: backend",
        "      - match: { service: shop.Cart }",
        "        cluster: backend",
        "clusters:",
        "  - name: backend",
        `    endpoints: ["${b.address}"]`,
        "accessLog: false",
        "",
      ].join("\n"),
    );
    const p = spawnDojang(["--config", file]);
    const admin = `127.0.0.1:${adminPort}`;
    await waitReady(p, admin);
    // the injected fault: every call to shop.Cart/Pay ends 14, decided_by fault
    const fault = await fetch(`http://${admin}/faults`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ id: "cart-down", match: { service: "shop.Cart", method: "Pay" }, action: { kind: "abort", code: "UNAVAILABLE", message: "injected" } }),
    });
    expect(fault.status).toBe(201);

    const promYaml = dir.write(
      "prometheus.yml",
      [
        "global:",
        "  scrape_interval: 1s",
        "  evaluation_interval: 1s",
        "rule_files:",
        `  - ${join(REPO_ROOT, "deploy", "prometheus", "dojang-rules.yaml")}`,
        "scrape_configs:",
        "  - job_name: dojang",
        "    static_configs:",
        `      - targets: ["${admin}"]`,
        "",
      ].join("\n"),
    );
    const prom = `127.0.0.1:${promPort}`;
    const pp = spawnGroup(systemBinary("prometheus"), [`--config.file=${promYaml}`, `--storage.tsdb.path=${join(dir.dir, "data")}`, `--web.listen-address=${prom}`, "--log.level=warn"], { stdio: ["ignore", "ignore", "pipe"] });
    let promErr = "";
    pp.stderr!.setEncoding("utf8").on("data", (d: string) => (promErr += d));
    await waitFor("Prometheus to scrape dojang", async () => {
      const r = await promQuery(prom, 'up{job="dojang"}').catch(() => undefined);
      return r?.data?.result[0]?.value[1] === "1" ? true : undefined;
    }, 60_000, 250);

    // calls for ~8 s: OK ones, faulted ones, ones with no route
    const c = ownConnectionClient(`127.0.0.1:${listenPort}`, kit.clients);
    const session = http2.connect(`http://127.0.0.1:${listenPort}`);
    session.on("error", () => {});
    let ok = 0;
    let faulted = 0;
    let noRoute = 0;
    const until = Date.now() + 8000;
    while (Date.now() < until) {
      if ((await unary(c, Buffer.from("x"))).err === null) ok++;
      const f = await rawCall("", { ":path": "/shop.Cart/Pay" }, Buffer.alloc(5), { session });
      expect(f.headers?.["grpc-status"] ?? f.trailers?.["grpc-status"]).toBe("14");
      faulted++;
      if (faulted % 3 === 0) {
        const n = await rawCall("", { ":path": "/nowhere.Svc/Nope" }, Buffer.alloc(5), { session });
        expect(n.headers?.["grpc-status"] ?? n.trailers?.["grpc-status"]).toBe("12");
        noRoute++;
      }
      await new Promise((r) => setTimeout(r, 25));
    }
    session.close();
    expect(ok).toBeGreaterThan(10);

    // the question, asked of Prometheus: failed calls in the last minute, by who decided
    const byDecider = await waitFor("Prometheus to see the failed calls", async () => {
      const r = await promQuery(prom, 'sum by (decided_by) (increase(dojang_calls_total{grpc_code!="OK"}[1m]))');
      const m = Object.fromEntries((r.data?.result ?? []).map((x) => [x.metric["decided_by"], Number(x.value[1])]));
      return (m["fault"] ?? 0) > faulted * 0.5 && (m["no_route"] ?? 0) > noRoute * 0.5 ? m : undefined;
    }, 30_000, 500);
    // who decided: the fault and no route, nothing else (the OK calls are not failures)
    expect(Object.keys(byDecider).sort()).toEqual(["fault", "no_route"]);
    // increase() extrapolates over the window: within half of what was sent, never beyond it by much
    expect(byDecider["fault"]).toBeLessThan(faulted * 1.5);

    // the same from the recorded rule
    const rec = await waitFor("the recording rule", async () => {
      const r = await promQuery(prom, 'job_decided_by:dojang_calls_failed:increase1m{job="dojang"}');
      const m = Object.fromEntries((r.data?.result ?? []).map((x) => [x.metric["decided_by"], Number(x.value[1])]));
      return (m["fault"] ?? 0) > 0 ? m : undefined;
    }, 30_000, 500);
    expect(Object.keys(rec).sort()).toEqual(["fault", "no_route"]);

    // every rule evaluates against real series without error
    const rules = (await (await fetch(`http://${prom}/api/v1/rules`)).json()) as { data: { groups: { rules: { name: string; health: string; lastError?: string }[] }[] } };
    const all = rules.data.groups.flatMap((g) => g.rules);
    expect(all.length).toBe(27);
    expect(all.filter((r) => r.health !== "ok").map((r) => `${r.name}: ${r.lastError}`)).toEqual([]);
    // every call of shop.Cart/Pay fails UNAVAILABLE and of nowhere.Svc/Nope UNIMPLEMENTED (both
    // server-side in the SLO): the fast burn is pending for both (it waits 2m to fire); not for Unary
    await waitFor("both burn alerts", async () => {
      const r = (await (await fetch(`http://${prom}/api/v1/alerts`)).json()) as { data: { alerts: { labels: Record<string, string> }[] } };
      return r.data.alerts.filter((x) => x.labels["alertname"] === "DojangMethodErrorBudgetBurnFast").length === 2 ? true : undefined;
    }, 30_000, 500);
    const alerts = await waitFor("the burn alert", async () => {
      const r = (await (await fetch(`http://${prom}/api/v1/alerts`)).json()) as { data: { alerts: { labels: Record<string, string>; state: string }[] } };
      const a = r.data.alerts.filter((x) => x.labels["alertname"] === "DojangMethodErrorBudgetBurnFast");
      return a.length > 0 ? a : undefined;
    }, 30_000, 500);
    expect(alerts.map((a) => [a.labels["grpc_service"], a.labels["grpc_method"], a.state]).sort()).toEqual([
      ["nowhere.Svc", "Nope", "pending"],
      ["shop.Cart", "Pay", "pending"],
    ]);

    // each query of the Grafana dashboard runs ($job as Grafana's "All")
    const dash = JSON.parse(readFileSync(join(REPO_ROOT, "deploy", "grafana", "dojang.json"), "utf8")) as { panels: { title: string; targets?: { expr: string }[] }[] };
    for (const panel of dash.panels) {
      for (const t of panel.targets ?? []) {
        const r = await promQuery(prom, t.expr.replaceAll("$job", ".*"));
        expect(r.status, `${panel.title}: ${r.error ?? ""}`).toBe("success");
      }
    }
    const methods = await promQuery(prom, 'sum by (grpc_service, grpc_method) (job_service_method:dojang_calls:rate1m{job=~".*"})');
    expect(methods.data!.result.map((x) => `${x.metric["grpc_service"]}/${x.metric["grpc_method"]}`).sort()).toEqual(["nowhere.Svc/Nope", "shop.Cart/Pay", "test.Echo/Unary"]);
    expect(promErr).not.toMatch(/level=error/);
  });
});
