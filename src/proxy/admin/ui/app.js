// dojang's dashboard: polls GET /stats?state=1 on the admin listener it was served from, keeps the
// last 60 answers for the charts, and draws them. Read-only: it only GETs. The admin token, when
// the listener needs one, is asked for once and kept in this tab (sessionStorage), sent as
// Authorization: Bearer. ?every=SECONDS sets the poll period (default 2).
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  const params = new URLSearchParams(location.search);
  const EVERY_MS = Math.max(250, Number(params.get("every") ?? "2") * 1000 || 2000);
  const WINDOWS = ["10s", "1m", "10m"];
  const KEEP = 60;
  let win = WINDOWS.includes(params.get("window")) ? params.get("window") : "1m";
  const history = new Map(); // "kind name" -> [{ rps, success, p99 }]

  const el = (tag, attrs = {}, ...kids) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) e.setAttribute(k, String(v));
    for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
    return e;
  };
  const pct = (x) => (x === null || x === undefined ? "–" : `${(x * 100).toFixed(x === 1 ? 0 : 2)} %`);
  const num = (x, d = 1) => (x === null || x === undefined ? "–" : Number(x).toFixed(d));
  const grade = (s) => (s === null ? "" : s < 0.95 ? "bad" : s < 0.99 ? "warn" : "ok");
  const hue = (s) => {
    let h = 0;
    for (const c of s) h = (h * 31 + c.charCodeAt(0)) % 360;
    return `hsl(${h} 60% 50%)`;
  };

  function spark(values, cls = "spark") {
    const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
    svg.setAttribute("class", cls);
    svg.setAttribute("viewBox", "0 0 100 20");
    svg.setAttribute("preserveAspectRatio", "none");
    const vs = values.filter((v) => typeof v === "number" && Number.isFinite(v));
    if (vs.length > 0) {
      const max = Math.max(...vs);
      const min = Math.min(0, ...vs);
      const span = max - min || 1;
      const pts = values.map((v, i) => `${(i / Math.max(1, KEEP - 1)) * 100},${19 - ((Number.isFinite(v) ? v : min) - min) / span * 18}`);
      const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
      line.setAttribute("points", pts.join(" "));
      svg.append(line);
    }
    return svg;
  }

  function bar(byWho) {
    const total = Object.values(byWho).reduce((a, b) => a + b, 0);
    const b = el("div", { class: "bar", title: Object.entries(byWho).map(([k, v]) => `${k}: ${v}`).join(", ") });
    for (const [k, v] of Object.entries(byWho).sort((x, y) => y[1] - x[1])) {
      const s = el("span", { "data-decided-by": k });
      s.style.width = `${(v / total) * 100}%`;
      s.style.background = hue(k);
      b.append(s);
    }
    return b;
  }

  function remember(kind, r) {
    const k = `${kind} ${r.name}`;
    const h = history.get(k) ?? [];
    h.push({ rps: r.rps, success: r.success, p99: r.p99_ms });
    while (h.length > KEEP) h.shift();
    history.set(k, h);
    return h;
  }

  function rowsTable(id, kind, rows, extra) {
    const t = $(id);
    t.replaceChildren();
    const head = ["name", "calls/s", "", "success", "", "p50 ms", "p95 ms", "p99 ms", "", "failed by"].concat(extra ? extra.head : []);
    t.append(el("tr", {}, ...head.map((h) => el("th", {}, h))));
    for (const r of rows) {
      const h = remember(kind, r);
      const tr = el(
        "tr",
        { class: grade(r.success), "data-name": r.name, "data-success": r.success },
        el("td", {}, r.name),
        el("td", { class: "num" }, num(r.rps, 2)),
        el("td", {}, spark(h.map((x) => x.rps))),
        el("td", { class: "num" }, pct(r.success)),
        el("td", {}, spark(h.map((x) => x.success))),
        el("td", { class: "num" }, num(r.p50_ms, 2)),
        el("td", { class: "num" }, num(r.p95_ms, 2)),
        el("td", { class: "num" }, num(r.p99_ms, 2)),
        el("td", {}, spark(h.map((x) => x.p99))),
        el("td", {}, Object.keys(r.failed_by).length === 0 ? "" : bar(r.failed_by)),
      );
      if (extra) for (const c of extra.cells(r)) tr.append(c);
      t.append(tr);
    }
    if (rows.length === 0) t.append(el("tr", {}, el("td", { colspan: head.length }, `no calls in the last ${win}`)));
  }

  function figure(label, value, values) {
    return el("div", { class: "figure" }, el("small", {}, label), el("b", {}, value), spark(values, "chart"));
  }

  function endpointCells(state) {
    const byKey = new Map();
    for (const c of state?.clusters ?? []) {
      for (const w of c.workers ?? [c]) {
        for (const e of w.endpoints ?? []) {
          const k = `${c.name}/${e.address}`;
          const prev = byKey.get(k);
          // (workers: unhealthy or ejected in any worker shows)
          byKey.set(k, { healthy: (prev?.healthy ?? true) && e.healthy, ejected: (prev?.ejected ?? false) || e.ejected, breaker: w.breaker, inRotation: (prev?.inRotation ?? true) && e.inRotation });
        }
      }
    }
    return {
      byKey,
      head: ["health", "ejected", "breaker"],
      cells: (r) => {
        const s = byKey.get(r.name);
        if (!s) return [el("td", {}, "–"), el("td", {}, "–"), el("td", {}, "–")];
        const full = Object.entries(s.breaker ?? {}).filter(([, v]) => v.current >= v.limit).map(([k]) => k);
        return [
          el("td", { class: s.healthy ? "state-ok" : "state-bad" }, s.healthy ? "healthy" : "unhealthy"),
          el("td", { class: s.ejected ? "state-bad" : "" }, s.ejected ? "ejected" : "no"),
          el("td", { class: full.length > 0 ? "state-bad" : "" }, full.length > 0 ? `full: ${full.join(", ")}` : "closed"),
        ];
      },
    };
  }

  function render(s) {
    const t = s.total;
    const h = remember("total", t);
    $("total").replaceChildren(
      figure(`calls/s (${s.window})`, num(t.rps, 2), h.map((x) => x.rps)),
      figure("success", pct(t.success), h.map((x) => x.success)),
      figure("p99 ms", num(t.p99_ms, 2), h.map((x) => x.p99)),
      figure("failed", String(t.failed), []),
    );
    const legend = el("div", { class: "legend" });
    for (const [k, v] of Object.entries(t.failed_by).sort((a, b) => b[1] - a[1])) {
      const i = el("i");
      i.style.background = hue(k);
      legend.append(el("span", { "data-decided-by": k }, i, `${k} ${v}`));
    }
    $("decided").replaceChildren(Object.keys(t.failed_by).length === 0 ? "no failed calls" : bar(t.failed_by), legend);
    rowsTable("methods", "method", s.methods);
    rowsTable("routes", "route", s.routes);
    const ec = endpointCells(s.state);
    // endpoints without calls in the window are shown too (their health matters)
    const rows = [...s.endpoints];
    for (const k of ec.byKey.keys()) if (!rows.some((r) => r.name === k)) rows.push({ name: k, calls: 0, rps: 0, success: null, p50_ms: null, p95_ms: null, p99_ms: null, failed_by: {} });
    rowsTable("endpoints", "endpoint", rows, ec);
    const faults = $("faults");
    faults.replaceChildren(el("tr", {}, ...["rule", "kind", "enabled", "matched", "fired"].map((x) => el("th", {}, x))));
    for (const f of s.state?.faults ?? []) faults.append(el("tr", { "data-rule": f.id }, el("td", {}, f.id), el("td", {}, f.kind), el("td", {}, f.enabled ? "yes" : "no"), el("td", { class: "num" }, f.matched), el("td", { class: "num" }, f.fired)));
    if ((s.state?.faults ?? []).length === 0) faults.append(el("tr", {}, el("td", { colspan: 5 }, "no fault rules")));
    const xds = $("xds");
    xds.replaceChildren(el("tr", {}, ...["type", "version", "last NACK"].map((x) => el("th", {}, x))));
    const x = s.state?.xds;
    if (!x) xds.append(el("tr", {}, el("td", { colspan: 3 }, "no xDS (static config)")));
    else {
      xds.append(el("tr", {}, el("td", {}, "stream"), el("td", { class: x.connected ? "state-ok" : "state-bad" }, x.connected ? "connected" : "disconnected"), el("td", {}, x.server ?? "")));
      for (const [type, v] of Object.entries(x.types ?? {})) xds.append(el("tr", {}, el("td", {}, type), el("td", {}, v.version ?? "–"), el("td", { class: v.lastRejected ? "state-bad" : "" }, v.lastRejected ? JSON.stringify(v.lastRejected) : "none")));
    }
    const o = s.state?.overload;
    const st = $("status");
    st.className = o?.overloaded ? "overloaded" : "";
    st.textContent = `${o?.overloaded ? "OVERLOADED · " : ""}${s.state?.active_calls ?? 0} calls in flight · updated ${new Date().toLocaleTimeString()}${s.workers ? ` · ${s.workers} workers` : ""}`;
  }

  async function poll() {
    const token = sessionStorage.getItem("dojang-token");
    try {
      const res = await fetch(`/stats?window=${win}&state=1`, { headers: token ? { authorization: `Bearer ${token}` } : {}, cache: "no-store" });
      if (res.status === 401 || res.status === 403) {
        $("main").hidden = true;
        $("login").hidden = false;
        $("status").textContent = res.status === 401 ? "token needed" : "this admin listener shows calls only with admin.token set";
        return;
      }
      if (!res.ok) throw new Error(`/stats answered ${res.status}`);
      const s = await res.json();
      $("login").hidden = true;
      $("main").hidden = false;
      render(s);
    } catch (err) {
      $("status").textContent = `no answer: ${err.message}`;
    }
  }

  for (const w of WINDOWS) {
    const b = el("button", { type: "button", "aria-pressed": w === win, "data-window": w }, w);
    b.addEventListener("click", () => {
      win = w;
      history.clear();
      for (const x of $("windows").children) x.setAttribute("aria-pressed", String(x.dataset.window === w));
      void poll();
    });
    $("windows").append(b);
  }
  $("login").addEventListener("submit", (e) => {
    e.preventDefault();
    sessionStorage.setItem("dojang-token", $("token").value);
    void poll();
  });
  void poll();
  setInterval(poll, EVERY_MS);
})();
