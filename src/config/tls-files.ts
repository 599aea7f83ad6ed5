// Whether the TLS files a config names can be read: apart from load.ts so that the served process,
// which takes its config already parsed from the launcher (src/config/handover.ts), can run the
// check without loading the parser.
import { readFileSync } from "node:fs";
import type { ConfigIssue } from "../errors.js";
import type { Config } from "./schema.js";

/**
 * Every TLS file the config names (listeners[].tls, clusters[].tls) that cannot be read, as an
 * issue on its key: `listeners[0].tls.certFile: cannot read "x.pem": ENOENT`. The CLI asks this
 * after loading (src/main.ts), so `--check` fails on a missing file; loadConfigFile itself reads
 * only the config (an example config may name certificates that exist only where it is deployed).
 * Only readability is checked here; the proxy parses the PEM when it starts
 * (src/proxy/downstream/tls.ts, src/proxy/upstream/tls.ts) and names the key there too.
 */
export function tlsFileIssues(config: Config): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  const check = (key: string, file: string | null): void => {
    if (file === null) return;
    try {
      readFileSync(file);
    } catch (err: unknown) {
      const code = typeof err === "object" && err !== null && "code" in err ? String(err.code) : err instanceof Error ? err.message : String(err);
      issues.push({ path: key, message: `cannot read ${JSON.stringify(file)}: ${code}` });
    }
  };
  config.listeners.forEach((l, i) => {
    const t = l.tls;
    if (t === null) return;
    const at = `listeners[${i}].tls`;
    check(`${at}.certFile`, t.certFile);
    check(`${at}.keyFile`, t.keyFile);
    check(`${at}.caFile`, t.caFile);
    t.certificates.forEach((c, j) => {
      check(`${at}.certificates[${j}].certFile`, c.certFile);
      check(`${at}.certificates[${j}].keyFile`, c.keyFile);
    });
  });
  config.clusters.forEach((c, i) => {
    const t = c.tls;
    if (t === null) return;
    const at = `clusters[${i}].tls`;
    check(`${at}.caFile`, t.caFile);
    check(`${at}.certFile`, t.certFile);
    check(`${at}.keyFile`, t.keyFile);
  });
  return issues;
}
