// Where tests leave what a person looks at afterwards (screenshots of the /ui page, of `dojang top`
// in a terminal): .test-output/<test>/ in the repository (ignored by git), or $DOJANG_TEST_OUTPUT.
// With DOJANG_UPDATE_SCREENSHOTS=1 the shots the docs show are copied into docs/ as well
// (docs/guides/img/), which is how the committed ones were made.
import { copyFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "./process.js";

export function artifactDir(test: string): string {
  const d = join(process.env["DOJANG_TEST_OUTPUT"] ?? join(REPO_ROOT, ".test-output"), test);
  mkdirSync(d, { recursive: true });
  return d;
}

/** Copies `file` to docs/guides/img/<name> when DOJANG_UPDATE_SCREENSHOTS=1; whether it did. */
export function updateDocsImage(file: string, name: string): boolean {
  if (process.env["DOJANG_UPDATE_SCREENSHOTS"] !== "1") return false;
  const dir = join(REPO_ROOT, "docs", "guides", "img");
  mkdirSync(dir, { recursive: true });
  copyFileSync(file, join(dir, name));
  return true;
}

/**
 * A terminal's screen (tmux capture-pane -e: text with SGR escapes) as a small HTML page, so a
 * headless browser can take its picture: bold, dim, red and the default colours are all `top` uses.
 */
export function terminalHtml(screen: string, title: string): string {
  const esc = (s: string): string => s.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;");
  let html = "";
  let open = false;
  for (const part of screen.split(/(\x1b\[[0-9;]*m)/)) {
    const m = /^\x1b\[([0-9;]*)m$/.exec(part);
    if (m === null) {
      html += esc(part);
      continue;
    }
    if (open) html += "</span>";
    open = false;
    const codes = m[1]!.split(";").filter((c) => c !== "" && c !== "0" && c !== "39" && c !== "22");
    if (codes.length === 0) continue;
    const cls = codes.map((c) => ({ "1": "b", "2": "d", "31": "r" })[c] ?? "").join(" ");
    html += `<span class="${cls}">`;
    open = true;
  }
  if (open) html += "</span>";
  return `<!doctype html><meta charset="utf-8"><title>${esc(title)}</title><style>body{margin:0;background:#1e1e1e}pre{margin:0;padding:12px 14px;color:#d4d4d4;font:13px/1.35 "DejaVu Sans Mono",monospace}.b{font-weight:bold;color:#fff}.d{color:#8a8a8a}.r{color:#f14c4c}</style><pre>${html}</pre>`;
}
