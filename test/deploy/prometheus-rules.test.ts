// deploy/prometheus/dojang-rules.yaml checked by Prometheus's own tool (Debian's prometheus
// package: promtool): `promtool check rules` (syntax, PromQL, templates) and `promtool test rules`
// with the hand-written series of dojang-rules.test.yaml, one case or more per alert. And
// deploy/grafana/dojang.json checked against the rules: every recorded series a panel queries is
// one the rules define, every raw metric it reads is one dojang exports (docs/reference/metrics.md),
// and every per-method recording rule is drawn. (test/process/prometheus-live.test.ts evaluates
// the panels' queries on a real Prometheus scraping a real dojang.)
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse } from "yaml";
import { describe, expect, it } from "vitest";
import { systemBinary } from "../helpers/engines.js";
import { REPO_ROOT } from "../helpers/process.js";

const RULES_DIR = join(REPO_ROOT, "deploy", "prometheus");
const RULES = join(RULES_DIR, "dojang-rules.yaml");
const DASHBOARD = join(REPO_ROOT, "deploy", "grafana", "dojang.json");

interface RuleFile {
  groups: { name: string; rules: ({ record: string; expr: string } | { alert: string; expr: string; labels?: Record<string, string> })[] }[];
}

function promtool(...args: string[]): { status: number | null; out: string } {
  const r = spawnSync(systemBinary("promtool"), args, { cwd: RULES_DIR, encoding: "utf8", timeout: 60_000 });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

const rules = parse(readFileSync(RULES, "utf8")) as RuleFile;
const recorded = new Set(rules.groups.flatMap((g) => g.rules.flatMap((r) => ("record" in r ? [r.record] : []))));
const alerts = rules.groups.flatMap((g) => g.rules.flatMap((r) => ("alert" in r ? [r.alert] : [])));

/** Every metric family dojang documents (the first column of docs/reference/metrics.md's tables). */
function documentedMetrics(): Set<string> {
  const md = readFileSync(join(REPO_ROOT, "docs", "reference", "metrics.md"), "utf8");
  return new Set([...md.matchAll(/^\| `(dojang_[a-z0-9_]+)` \|/gm)].map((m) => m[1]!));
}

describe("deploy/prometheus/dojang-rules.yaml", () => {
  it("passes promtool check rules", () => {
    const r = promtool("check", "rules", "dojang-rules.yaml");
    expect(r.out).toContain("SUCCESS");
    expect(r.status).toBe(0);
  });

  it("passes promtool test rules, with a test case for every alert", () => {
    const tests = readFileSync(join(RULES_DIR, "dojang-rules.test.yaml"), "utf8");
    const tested = new Set([...tests.matchAll(/alertname: (\w+)/g)].map((m) => m[1]!));
    expect(alerts.filter((a) => !tested.has(a))).toEqual([]);
    const r = promtool("test", "rules", "dojang-rules.test.yaml");
    expect(r.out).toContain("SUCCESS");
    expect(r.status).toBe(0);
  });

  it("fails promtool test rules when an expectation is wrong (the check can fail)", () => {
    const tests = readFileSync(join(RULES_DIR, "dojang-rules.test.yaml"), "utf8")
      .replace("fails 16.67% of its checks", "fails 16.6% of its checks")
      .replace("  - dojang-rules.yaml", `  - ${RULES}`);
    const dir = mkdtempSync(join(tmpdir(), "dojang-promtool-"));
    try {
      writeFileSync(join(dir, "wrong.test.yaml"), tests);
      const r = spawnSync(systemBinary("promtool"), ["test", "rules", "wrong.test.yaml"], { cwd: dir, encoding: "utf8", timeout: 60_000 });
      expect(r.status).not.toBe(0);
      expect(`${r.stdout}${r.stderr}`).toContain("DojangRateLimitServiceFailing");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("reads only metrics dojang exports, and alerts on each failure the issue names", () => {
    const known = documentedMetrics();
    // (recorded names, level:metric:operations, are the rules' own; what is left is read from dojang)
    const raw = (expr: string): string[] => [...expr.replace(/\b[a-z_]+:[a-z0-9_]+:[a-z0-9_]+\b/g, "").matchAll(/\b(dojang_[a-z0-9_]+)\b/g)].map((m) => m[1]!.replace(/_bucket$/, ""));
    const used = new Set(rules.groups.flatMap((g) => g.rules.flatMap((r) => raw(r.expr))));
    expect(used.size).toBeGreaterThan(10);
    expect([...used].filter((m) => !known.has(m))).toEqual([]);
    expect(alerts).toEqual(
      expect.arrayContaining([
        "DojangMethodErrorBudgetBurnFast",
        "DojangMethodErrorBudgetBurnSlow",
        "DojangEndpointEjected",
        "DojangRateLimitServiceFailing",
        "DojangAuthorizationServiceFailing",
        "DojangXdsUpdateRejected",
        "DojangOverloadCuts",
        "DojangCertificateExpiresSoon",
      ]),
    );
  });
});

describe("deploy/grafana/dojang.json", () => {
  const dash = JSON.parse(readFileSync(DASHBOARD, "utf8")) as {
    uid: string;
    title: string;
    schemaVersion: number;
    templating: { list: { name: string; type: string }[] };
    panels: { id: number; type: string; title: string; gridPos: { x: number; y: number; w: number; h: number }; targets?: { refId: string; expr: string; datasource: { uid: string } }[] }[];
  };
  const targets = dash.panels.flatMap((p) => p.targets ?? []);

  it("is a dashboard Grafana imports: uid, variables for the data source and the job, unique panel ids within 24 columns", () => {
    expect(dash.uid).toBe("dojang");
    expect(dash.schemaVersion).toBeGreaterThanOrEqual(36);
    expect(dash.templating.list.map((v) => [v.name, v.type])).toEqual([
      ["datasource", "datasource"],
      ["job", "query"],
    ]);
    const ids = dash.panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const p of dash.panels) expect(p.gridPos.x + p.gridPos.w, p.title).toBeLessThanOrEqual(24);
    for (const p of dash.panels.filter((x) => x.type !== "row")) {
      expect(p.targets?.length, p.title).toBeGreaterThan(0);
      for (const t of p.targets!) {
        expect(t.datasource.uid).toBe("${datasource}");
        expect(t.expr, p.title).toContain('job=~"$job"');
      }
    }
  });

  it("queries the series the rules record (each defined there), raw metrics only that dojang exports, and draws every per-method rule", () => {
    const names = targets.flatMap((t) => [...t.expr.matchAll(/\b([a-z_]+:[a-z0-9_]+:[a-z0-9_]+)\b/g)].map((m) => m[1]!));
    expect(names.length).toBeGreaterThan(0);
    expect(names.filter((n) => !recorded.has(n))).toEqual([]);
    const raw = targets.flatMap((t) => [...t.expr.replace(/\b[a-z_]+:[a-z0-9_]+:[a-z0-9_]+\b/g, "").matchAll(/\b(dojang_[a-z0-9_]+)\b/g)].map((m) => m[1]!));
    const known = documentedMetrics();
    expect(raw.filter((m) => !known.has(m))).toEqual([]);
    // the rules a dashboard is for: rates, success, quantiles, who decided, the SLO's hour
    const drawn = new Set(names);
    const perMethod = [...recorded].filter((r) => !r.includes("_le:") && !/ratio_rate(5m|30m|6h)$/.test(r) && r !== "job_service_method_code_decided_by:dojang_calls:rate1m" && r !== "job_service_method:dojang_calls_failed:rate1m");
    expect(perMethod.filter((r) => !drawn.has(r))).toEqual([]);
  });
});
