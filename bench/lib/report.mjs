// Turns a run's raw results into medians and spreads, ratios, a text table (stdout), a markdown
// table (latest.md) and a hand-written SVG chart (latest.svg).

export const METRICS = {
  callsPerSec: { label: "calls/s", better: "higher", fmt: (v) => fmtInt(v) },
  mbPerSec: { label: "MB/s", better: "higher", fmt: (v) => fmtNum(v) },
  p50Us: { label: "p50 µs", better: "lower", fmt: (v) => fmtNum(v) },
  p90Us: { label: "p90 µs", better: "lower", fmt: (v) => fmtNum(v) },
  p99Us: { label: "p99 µs", better: "lower", fmt: (v) => fmtNum(v) },
  p999Us: { label: "p99.9 µs", better: "lower", fmt: (v) => fmtNum(v) },
  cpuUsPerCall: { label: "proxy CPU µs/call", better: "lower", fmt: (v) => fmtNum(v) },
  cpuUsPerMiB: { label: "proxy CPU µs/MiB", better: "lower", fmt: (v) => fmtNum(v) },
  cpuPercent: { label: "proxy CPU %", better: "lower", fmt: (v) => fmtNum(v) },
  upstreamCpuUsPerCall: { label: "upstream CPU µs/call", better: "lower", fmt: (v) => fmtNum(v) },
  rssKiB: { label: "proxy RSS MiB", better: "lower", fmt: (v) => fmtNum(v / 1024) },
  memDeltaKiB: { label: "RSS Δ MiB", better: "lower", fmt: (v) => fmtNum(v / 1024) },
  kibPerUnit: { label: "KiB per call/conn", better: "lower", fmt: (v) => fmtNum(v) },
  rssBaseKiB: { label: "idle RSS MiB", better: "lower", fmt: (v) => fmtNum(v / 1024) },
  rssAnonBaseKiB: { label: "idle anon MiB", better: "lower", fmt: (v) => fmtNum(v / 1024) },
  rssAfterKiB: { label: "RSS after MiB", better: "lower", fmt: (v) => fmtNum(v / 1024) },
  rssAfter10sKiB: { label: "RSS 10 s after MiB", better: "lower", fmt: (v) => fmtNum(v / 1024) },
  rssFirstKiB: { label: "RSS at 100k MiB", better: "lower", fmt: (v) => fmtNum(v / 1024) },
  soakGrowthPct: { label: "RSS 100k→1M %", better: "lower", fmt: (v) => fmtNum(v) },
};

/** Columns of the tables, in order. */
const COLUMNS = ["callsPerSec", "mbPerSec", "p50Us", "p90Us", "p99Us", "p999Us", "cpuUsPerCall", "cpuUsPerMiB", "cpuPercent", "upstreamCpuUsPerCall", "rssKiB", "memDeltaKiB", "kibPerUnit", "rssBaseKiB", "rssAnonBaseKiB", "rssAfterKiB", "rssAfter10sKiB", "rssFirstKiB", "soakGrowthPct"];

/** What the ratios compare, per shape kind. */
const RATIO_METRICS = {
  latency: ["p50Us", "p99Us", "callsPerSec", "cpuUsPerCall"],
  h2load: ["callsPerSec", "p99Us", "cpuUsPerCall", "rssKiB"],
  h2loadBytes: ["mbPerSec", "p99Us", "cpuUsPerMiB", "rssKiB"],
  hold: ["kibPerUnit", "rssKiB"],
  idle: ["kibPerUnit", "rssKiB", "rssBaseKiB", "rssAnonBaseKiB"],
  soak: ["soakGrowthPct", "rssKiB"],
  admin: ["callsPerSec", "p99Us", "cpuUsPerCall"],
};
const RATIO_PAIRS = [
  ["dojang", "nginx"],
  ["dojang", "haproxy"],
  ["dojang", "direct"],
  ["dojang", "node-naive"],
  ["dojang-log", "dojang"],
  ["dojang-2w", "dojang"],
  ["dojang-alt", "dojang"],
];

function fmtInt(v) {
  return Math.round(v).toLocaleString("en-US");
}
function fmtNum(v) {
  const a = Math.abs(v);
  if (a >= 1000) return Math.round(v).toLocaleString("en-US");
  if (a >= 100) return v.toFixed(0);
  if (a >= 10) return v.toFixed(1);
  return v.toFixed(2);
}
function compact(v) {
  const a = Math.abs(v);
  if (a >= 1e6) return (v / 1e6).toFixed(a >= 1e7 ? 1 : 2) + "M";
  if (a >= 1e4) return (v / 1e3).toFixed(a >= 1e5 ? 0 : 1) + "k";
  if (a >= 1000) return (v / 1e3).toFixed(2) + "k";
  if (a >= 100) return v.toFixed(0);
  if (a >= 10) return v.toFixed(1);
  return v.toFixed(2);
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 === 1 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

export function summarize(report) {
  const cells = [];
  const shapeIds = report.plan.shapes.map((s) => s.id);
  for (const shape of shapeIds) {
    for (const peer of report.plan.peers) {
      const rs = report.results.filter((r) => r.shape === shape && r.peer === peer);
      if (rs.length === 0) continue;
      const ok = rs.filter((r) => r.ok);
      const stats = {};
      for (const key of Object.keys(METRICS)) {
        const vs = ok.map((r) => r.metrics?.[key]).filter((v) => typeof v === "number" && Number.isFinite(v));
        if (vs.length > 0) stats[key] = { median: median(vs), min: Math.min(...vs), max: Math.max(...vs), n: vs.length };
      }
      const warnings = [...new Set(rs.flatMap((r) => r.warnings ?? []).map((w) => w.replace(/\d+ bytes received/, "N bytes received")))];
      cells.push({ shape, peer, runs: rs.length, failed: rs.length - ok.length, errors: rs.filter((r) => !r.ok).map((r) => r.error), warnings, stats });
    }
  }
  const ratios = [];
  for (const shape of report.plan.shapes) {
    const kind = shape.kind === "h2load" && shape.bytes ? "h2loadBytes" : shape.kind;
    for (const metric of RATIO_METRICS[kind] ?? []) {
      for (const [a, b] of RATIO_PAIRS) {
        const ca = cells.find((c) => c.shape === shape.id && c.peer === a)?.stats[metric];
        const cb = cells.find((c) => c.shape === shape.id && c.peer === b)?.stats[metric];
        if (ca && cb && cb.median !== 0) ratios.push({ shape: shape.id, metric, a, b, ratio: ca.median / cb.median });
      }
    }
  }
  return { cells, ratios };
}

function cellText(st, key, style) {
  const s = st?.[key];
  if (s === undefined) return "–";
  const f = METRICS[key].fmt;
  if (s.n < 2 || s.min === s.max) return f(s.median);
  if (style === "md") return `${f(s.median)} (${f(s.min)}–${f(s.max)})`;
  const spread = s.median === 0 ? 0 : ((s.max - s.min) / 2 / Math.abs(s.median)) * 100;
  return `${f(s.median)} ±${spread.toFixed(spread < 10 ? 1 : 0)}%`;
}

function usedColumns(cells) {
  return COLUMNS.filter((k) => cells.some((c) => c.stats[k] !== undefined));
}

function shapeTitle(report, id) {
  return report.plan.shapes.find((s) => s.id === id)?.title ?? id;
}

function pad(s, n, right = false) {
  const len = [...s].length;
  return len >= n ? s : right ? " ".repeat(n - len) + s : s + " ".repeat(n - len);
}

/** One line on how disturbed the run was (other processes on the pinned CPUs, hypervisor steal). */
function qualityLine(report) {
  const rs = report.results.filter((r) => r.metrics?.proxyCpuBusyPercent !== undefined || r.metrics?.stealPercent !== undefined);
  if (rs.length === 0) return undefined;
  const disturbed = rs.filter((r) => (r.warnings ?? []).some((w) => /other processes|steal/.test(w))).length;
  const steal = rs.map((r) => r.metrics.stealPercent ?? 0).sort((a, b) => a - b);
  const foreign = rs.map((r) => r.metrics.foreignCpuPercent ?? 0).sort((a, b) => a - b);
  const med = (xs) => xs[Math.floor(xs.length / 2)];
  return `machine noise: ${disturbed} of ${rs.length} timed runs disturbed (other processes >10% of the proxy CPU, or steal >5%); median other-process load on the proxy CPU ${med(foreign).toFixed(0)}%, median steal ${med(steal).toFixed(0)}%, worst steal ${steal[steal.length - 1].toFixed(0)}%`;
}

export function renderTable(report) {
  const { cells, ratios } = report.summary;
  const cols = usedColumns(cells);
  const head = ["shape", "peer", ...cols.map((k) => METRICS[k].label)];
  const rows = cells.map((c) => [c.shape, c.peer + (c.failed ? ` (${c.failed} failed)` : ""), ...cols.map((k) => cellText(c.stats, k, "txt"))]);
  const widths = head.map((h, i) => Math.max([...h].length, ...rows.map((r) => [...r[i]].length)));
  const line = (r) => r.map((v, i) => pad(v, widths[i], i >= 2)).join("  ");
  const out = [`medians over ${report.plan.rounds} round(s), ± half the min–max spread; ${report.machine.pinning}`];
  const q = qualityLine(report);
  if (q) out.push(q);
  out.push(line(head), widths.map((w) => "-".repeat(w)).join("  "));
  let last;
  for (let i = 0; i < rows.length; i++) {
    if (last !== undefined && cells[i].shape !== last) out.push("");
    last = cells[i].shape;
    out.push(line(rows[i]));
  }
  if (ratios.length > 0) {
    out.push("", "ratios (median / median):");
    const byShape = new Map();
    for (const r of ratios) {
      const k = r.shape;
      if (!byShape.has(k)) byShape.set(k, []);
      byShape.get(k).push(`${r.a}/${r.b} ${METRICS[r.metric].label} ${r.ratio.toFixed(2)}`);
    }
    for (const [k, v] of byShape) out.push(`  ${pad(k, 14)} ${v.join("; ")}`);
  }
  for (const s of report.skipped) out.push(`skipped: ${s.peer}${s.shape ? ` × ${s.shape}` : ""}: ${s.reason}`);
  out.push(...correctnessLines(report).map((l) => `correctness: ${l}`));
  for (const c of cells) for (const w of c.warnings) out.push(`WARNING ${c.shape} ${c.peer}: ${w}`);
  for (const c of cells) for (const e of c.errors) out.push(`FAILED ${c.shape} ${c.peer}: ${e}`);
  for (const n of report.notes) out.push(`note: ${n}`);
  for (const [peer, prof] of Object.entries(report.cpuProfiles ?? {})) {
    if (!prof.areas) continue;
    out.push("", `CPU profile ${peer} (${prof.busySeconds}s busy over ${prof.files} process(es), idle left out; ${prof.dir}):`);
    out.push("  by area: " + prof.areas.map((a) => `${a.area} ${a.pct}%`).join(", "));
    for (const t of prof.top) out.push(`  ${pad(t.pct.toFixed(1) + "%", 6, true)}  ${t.fn}  ${t.where}`);
  }
  return out.join("\n");
}

function correctnessLines(report) {
  const lines = [];
  for (const [peer, checks] of Object.entries(report.correctness ?? {})) {
    const bad = checks.filter((c) => c.bad > 0);
    if (bad.length === 0) lines.push(`${peer}: all ${checks.reduce((a, c) => a + c.calls, 0)} probe calls correct (${checks.map((c) => c.name).join(", ")})`);
    for (const c of bad) lines.push(`${peer}: **${c.bad}/${c.calls} ${c.name} calls wrong**, e.g. ${c.example}`);
  }
  return lines;
}

export function renderMarkdown(report) {
  const { cells, ratios } = report.summary;
  const m = report.machine;
  const cols = usedColumns(cells);
  const out = [];
  out.push(`# dojang bench — ${report.startedAt}${report.quick ? " (quick)" : ""}`, "");
  out.push(`- machine: ${m.cpuModel}, ${m.nproc} CPUs, ${m.memTotalGiB} GiB, ${m.kernel}`);
  out.push(`- versions: node ${m.node}; ${m.nginx}; ${m.haproxy}; ${m.h2load}; autocannon ${m.autocannon}; dojang ${m.dojang} ${m.gitCommit ?? ""}`);
  out.push(`- pinning: ${m.pinning}`);
  out.push(
    `- plan: ${report.plan.rounds} round(s), interleaved (each round runs each shape on each peer in turn${report.plan.fresh ? "; every proxy restarted before each measurement, so its RSS is that shape's alone" : ""}); h2load ${report.plan.h2load.warmupS}s warm-up + ${report.plan.h2load.durationS}s measured; latency client ${report.plan.latency.warmupMs}ms warm-up + ${report.plan.latency.durationMs}ms; run took ${report.seconds}s`,
  );
  out.push(`- cells: median (min–max) over the rounds. CPU and RSS are the proxy process's (summed over its workers), from /proc; CPU per call = (utime+stime) delta over the measured window ÷ calls the upstream answered in it`);
  const q = qualityLine(report);
  if (q) out.push(`- ${q}`);
  if (report.plan.dojangConfigExtra) out.push(`- dojang-alt = dojang + \`${report.plan.dojangConfigExtra.file}\``);
  if (report.plan.dojangAltNodeArgs) out.push(`- dojang-alt runs with \`node ${report.plan.dojangAltNodeArgs.join(" ")}\``);
  out.push("", "## Peers", "");
  for (const [p, d] of Object.entries(report.peers)) out.push(`- **${p}**: ${d}`);
  out.push("", "## Shapes", "");
  for (const s of report.plan.shapes) out.push(`- \`${s.id}\`: ${s.title}`);
  out.push("", "## Results", "");
  out.push(`| shape | peer | ${cols.map((k) => METRICS[k].label).join(" | ")} |`);
  out.push(`|---|---|${cols.map(() => "---:").join("|")}|`);
  for (const c of cells) {
    out.push(`| ${c.shape} | ${c.peer}${c.failed ? ` (${c.failed} failed)` : ""} | ${cols.map((k) => cellText(c.stats, k, "md")).join(" | ")} |`);
  }
  if (ratios.length > 0) {
    const pairs = [...new Set(ratios.map((r) => `${r.a}/${r.b}`))];
    out.push("", "## Ratios", "", "Median over median. calls/s and MB/s: below 1 means dojang is slower. Latency, CPU and memory: above 1 means dojang costs more.", "");
    out.push(`| shape | metric | ${pairs.join(" | ")} |`);
    out.push(`|---|---|${pairs.map(() => "---:").join("|")}|`);
    const keys = [...new Set(ratios.map((r) => `${r.shape}\u0000${r.metric}`))];
    for (const k of keys) {
      const [shape, metric] = k.split("\u0000");
      const vals = pairs.map((p) => {
        const r = ratios.find((x) => x.shape === shape && x.metric === metric && `${x.a}/${x.b}` === p);
        return r ? r.ratio.toFixed(2) : "–";
      });
      out.push(`| ${shape} | ${METRICS[metric].label} | ${vals.join(" | ")} |`);
    }
  }
  out.push("", "## Correctness", "", "Checked once per peer before measuring (h2load only sees HTTP 200, so a peer that returns wrong bodies with grpc-status 0 would look fine in the throughput numbers):", "");
  out.push(...correctnessLines(report).map((l) => `- ${l}`));
  const warns = cells.flatMap((c) => c.warnings.map((w) => `- ${c.shape} ${c.peer}: ${w}`));
  if (warns.length > 0) out.push("", "Warnings from the measured runs:", "", ...warns);
  if (report.skipped.length > 0) {
    out.push("", "## Skipped", "");
    for (const s of report.skipped) out.push(`- ${s.peer}${s.shape ? ` × ${s.shape}` : ""}: ${s.reason}`);
  }
  const errs = cells.flatMap((c) => c.errors.map((e) => `- ${c.shape} ${c.peer}: ${e}`));
  if (errs.length > 0 || report.notes.length > 0) {
    out.push("", "## Failures and notes", "", ...errs, ...report.notes.map((n) => `- ${n}`));
  }
  for (const [peer, prof] of Object.entries(report.cpuProfiles ?? {})) {
    if (!prof.areas) continue;
    out.push("", `## CPU profile: ${peer}`, "", `node --cpu-prof, every shape of this run together: ${prof.busySeconds}s busy over ${prof.files} process(es), idle left out. Files: \`${prof.dir}\` (open in Chrome DevTools). Profiling slows dojang: the figures of a profiled run are not comparable.`, "");
    out.push("| area | self time |", "|---|---:|", ...prof.areas.map((a) => `| ${a.area} | ${a.pct}% |`));
    out.push("", "| self time | function | where |", "|---:|---|---|", ...prof.top.map((t) => `| ${t.pct.toFixed(1)}% | \`${t.fn}\` | ${t.where} |`));
  }
  out.push("");
  return out.join("\n");
}

// === SVG ===

const COLORS = {
  direct: "#9e9e9e",
  dojang: "#d62728",
  "dojang-log": "#ff9896",
  "dojang-2w": "#8c564b",
  "dojang-alt": "#e377c2",
  nginx: "#2ca02c",
  haproxy: "#1f77b4",
};
const EXTRA_COLORS = ["#9467bd", "#bcbd22", "#17becf", "#7f7f7f"];

/** Rows of small bar charts: each panel is one shape × one metric, bars grouped by peer. */
const PANEL_ROWS = [
  { title: "Throughput (higher is better)", panels: [["unary-10x10", "callsPerSec"], ["unary-50x20", "callsPerSec"], ["unary-c1", "callsPerSec"], ["unary-1MiB", "callsPerSec"], ["stream-64KiB", "mbPerSec"]] },
  { title: "p99 latency, µs (lower is better)", panels: [["unary-c1", "p99Us"], ["unary-10x10", "p99Us"], ["unary-50x20", "p99Us"], ["unary-1MiB", "p99Us"], ["stream-64KiB", "p99Us"]] },
  { title: "Proxy CPU (lower is better)", panels: [["unary-c1", "cpuUsPerCall"], ["unary-10x10", "cpuUsPerCall"], ["unary-50x20", "cpuUsPerCall"], ["unary-1MiB", "cpuUsPerCall"], ["stream-64KiB", "cpuUsPerMiB"]] },
  { title: "Memory (lower is better)", panels: [["held-1k", "kibPerUnit"], ["held-10k", "kibPerUnit"], ["idle-5k", "kibPerUnit"], ["held-10k", "rssKiB"], ["unary-50x20", "rssKiB"]] },
  { title: "dojang's admin GET /metrics, HTTP/1.1 (autocannon)", panels: [["admin-metrics", "callsPerSec"], ["admin-metrics", "p99Us"], ["admin-metrics", "cpuUsPerCall"]] },
];

function esc(s) {
  return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

function panelLabel(shapeId, metric) {
  const m = {
    callsPerSec: shapeId === "admin-metrics" ? "requests/s" : "calls/s",
    mbPerSec: "MB/s",
    p99Us: "p99 µs",
    cpuUsPerCall: shapeId === "admin-metrics" ? "CPU µs/request" : "CPU µs/call",
    cpuUsPerMiB: "CPU µs/MiB",
    kibPerUnit: shapeId.startsWith("idle") ? "KiB per connection" : "KiB per held call",
    rssKiB: shapeId.startsWith("held") ? "RSS MiB while held" : "RSS MiB after the run",
  }[metric];
  return `${shapeId}: ${m}`;
}

export function renderSvg(report) {
  const { cells } = report.summary;
  const peers = report.plan.peers.filter((p) => cells.some((c) => c.peer === p));
  let extra = 0;
  const color = (p) => COLORS[p] ?? EXTRA_COLORS[extra++ % EXTRA_COLORS.length];
  const colorOf = Object.fromEntries(peers.map((p) => [p, color(p)]));
  const W = 250;
  const H = 200;
  const GAP = 18;
  const LEFT = 24;
  const top0 = 104;
  const rows = PANEL_ROWS.map((r) => ({
    ...r,
    panels: r.panels.filter(([shape, metric]) => cells.some((c) => c.shape === shape && c.stats[metric] !== undefined)),
  })).filter((r) => r.panels.length > 0);
  const ncol = Math.max(1, ...rows.map((r) => r.panels.length));
  const width = LEFT + ncol * (W + GAP);
  const rowH = H + 44;
  const height = top0 + rows.length * rowH + 40;
  const m = report.machine;
  const o = [];
  o.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif">`);
  o.push(`<rect width="100%" height="100%" fill="#ffffff"/>`);
  o.push(`<text x="${LEFT}" y="26" font-size="18" font-weight="bold">dojang bench — ${esc(report.startedAt.slice(0, 16).replace("T", " "))} UTC${report.quick ? " (quick)" : ""}</text>`);
  o.push(
    `<text x="${LEFT}" y="44" font-size="11" fill="#444">${esc(`${m.cpuModel}, ${m.nproc} CPUs · node ${m.node} · ${m.nginx ?? ""} · ${(m.haproxy ?? "").replace(/ - https.*/, "")} · ${m.h2load ?? ""} · medians of ${report.plan.rounds} round(s), whiskers min–max`)}</text>`,
  );
  const q = qualityLine(report);
  o.push(`<text x="${LEFT}" y="58" font-size="11" fill="#444">${esc(m.pinning)}</text>`);
  if (q) o.push(`<text x="${LEFT}" y="72" font-size="11" fill="#444">${esc(q.replace(/; median.*/, ""))}</text>`);
  // legend
  let lx = LEFT;
  for (const p of peers) {
    o.push(`<rect x="${lx}" y="80" width="12" height="12" fill="${colorOf[p]}"/>`);
    o.push(`<text x="${lx + 16}" y="90" font-size="12">${esc(p)}</text>`);
    lx += 24 + p.length * 7.5;
  }
  rows.forEach((row, ri) => {
    const y0 = top0 + ri * rowH;
    o.push(`<text x="${LEFT}" y="${y0 + 12}" font-size="13" font-weight="bold" fill="#222">${esc(row.title)}</text>`);
    row.panels.forEach(([shape, metric], ci) => {
      const x0 = LEFT + ci * (W + GAP);
      const py = y0 + 22;
      o.push(`<rect x="${x0}" y="${py}" width="${W}" height="${H}" fill="#fafafa" stroke="#ddd"/>`);
      o.push(`<text x="${x0 + 6}" y="${py + 14}" font-size="11" font-weight="bold">${esc(panelLabel(shape, metric))}</text>`);
      const data = peers
        .map((p) => ({ p, s: cells.find((c) => c.shape === shape && c.peer === p)?.stats[metric] }))
        .filter((d) => d.s !== undefined);
      const scale = (v) => (metric === "rssKiB" ? v / 1024 : v);
      // The scale follows the medians (and whiskers up to twice the largest median), so one
      // disturbed round does not flatten the panel; a whisker past the top ends in an arrow.
      const medMax = Math.max(...data.map((d) => scale(d.s.median)));
      const vmax = Math.min(Math.max(...data.map((d) => scale(d.s.max))), 2 * medMax) * 1.15 || 1;
      const plotTop = py + 34;
      const plotBottom = py + H - 22;
      const plotH = plotBottom - plotTop;
      const y = (v) => Math.max(plotTop, plotBottom - (v / vmax) * plotH);
      const slot = (W - 16) / Math.max(1, data.length);
      const bw = Math.min(34, slot * 0.7);
      o.push(`<line x1="${x0 + 8}" y1="${plotBottom}" x2="${x0 + W - 8}" y2="${plotBottom}" stroke="#999"/>`);
      data.forEach((d, i) => {
        const cx = x0 + 8 + slot * i + slot / 2;
        const v = scale(d.s.median);
        const top = y(v);
        o.push(`<rect x="${(cx - bw / 2).toFixed(1)}" y="${top.toFixed(1)}" width="${bw.toFixed(1)}" height="${(plotBottom - top).toFixed(1)}" fill="${colorOf[d.p]}"><title>${esc(`${d.p} ${shape} ${metric}: ${v} (min ${scale(d.s.min)}, max ${scale(d.s.max)}, n=${d.s.n})`)}</title></rect>`);
        let labelY = top - 4;
        if (d.s.n > 1 && d.s.max > d.s.min) {
          const yMin = y(scale(d.s.min));
          const clipped = scale(d.s.max) > vmax;
          const yMax = y(scale(d.s.max));
          o.push(`<line x1="${cx.toFixed(1)}" y1="${yMin.toFixed(1)}" x2="${cx.toFixed(1)}" y2="${yMax.toFixed(1)}" stroke="#222" stroke-width="1"/>`);
          o.push(`<line x1="${(cx - 4).toFixed(1)}" y1="${yMin.toFixed(1)}" x2="${(cx + 4).toFixed(1)}" y2="${yMin.toFixed(1)}" stroke="#222"/>`);
          if (clipped) {
            o.push(`<path d="M${(cx - 4).toFixed(1)},${(yMax + 6).toFixed(1)} L${cx.toFixed(1)},${yMax.toFixed(1)} L${(cx + 4).toFixed(1)},${(yMax + 6).toFixed(1)} Z" fill="#222"><title>${esc(`max ${compact(scale(d.s.max))}`)}</title></path>`);
          } else {
            o.push(`<line x1="${(cx - 4).toFixed(1)}" y1="${yMax.toFixed(1)}" x2="${(cx + 4).toFixed(1)}" y2="${yMax.toFixed(1)}" stroke="#222"/>`);
            labelY = Math.min(labelY, yMax - 4);
          }
        }
        labelY = Math.max(plotTop - 4, labelY);
        o.push(`<text x="${cx.toFixed(1)}" y="${labelY.toFixed(1)}" font-size="10" text-anchor="middle" stroke="#fafafa" stroke-width="3" paint-order="stroke">${esc(compact(v))}</text>`);
        o.push(`<text x="${cx.toFixed(1)}" y="${plotBottom + 13}" font-size="9" text-anchor="middle" fill="#444">${esc(d.p.replace("dojang-", "dj-"))}</text>`);
      });
    });
  });
  const failed = cells.filter((c) => c.failed > 0);
  if (failed.length > 0) {
    o.push(`<text x="${LEFT}" y="${height - 16}" font-size="11" fill="#b00">${esc(`failed runs: ${failed.map((c) => `${c.shape}/${c.peer}`).join(", ")} (see latest.md)`)}</text>`);
  }
  o.push(`</svg>`);
  return o.join("\n") + "\n";
}

