// The trace backend for the tracing tests: the OpenTelemetry Collector's own OTLP receiver
// (test/engines/otelsink, built from the collector's Go modules), which keeps what it receives
// and answers how many spans it holds and how many a trace has. Started on free ports; its
// process group is killed when the test ends (spawnGroup).
import { engineBinary } from "./engines.js";
import { freePort, spawnGroup, waitFor } from "./process.js";

export interface OtelSink {
  /** the OTLP/HTTP traces URL to export to */
  readonly otlpHttp: string;
  /** how many spans of this trace it holds */
  spansOf(traceId: string): Promise<number>;
  /** how many spans it received in all */
  total(): Promise<number>;
}

export async function startOtelSink(): Promise<OtelSink> {
  const [g, h, a] = [await freePort(), await freePort(), await freePort()];
  const child = spawnGroup(engineBinary("otelsink"), ["-grpc", `127.0.0.1:${g}`, "-http", `127.0.0.1:${h}`, "-api", `127.0.0.1:${a}`], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout!.setEncoding("utf8").on("data", (d: string) => (out += d));
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (out += d));
  await waitFor("otelsink ready", () => (out.includes("otelsink ready") ? true : undefined), 20_000);
  const api = `http://127.0.0.1:${a}`;
  return {
    otlpHttp: `http://127.0.0.1:${h}/v1/traces`,
    async spansOf(traceId) {
      const j = (await (await fetch(`${api}/api/traces/${traceId}`)).json()) as { resourceSpans?: { scopeSpans?: { spans?: unknown[] }[] }[] };
      let n = 0;
      for (const rs of j.resourceSpans ?? []) for (const ss of rs.scopeSpans ?? []) n += (ss.spans ?? []).length;
      return n;
    },
    async total() {
      return ((await (await fetch(`${api}/api/spans`)).json()) as { spans: number }).spans;
    },
  };
}
