// The page's script for connect.browser.test.ts (bundled with esbuild at test time): connect-es's
// own Connect transport (@connectrpc/connect-web, fetch) calling test.Echo through dojang, in
// binary and JSON, unary by POST and by GET, and a server stream.
import { ConnectError } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { echoClient } from "../helpers/connect-echo-schema.js";

type Result = { ok: true; value?: string; values?: string[] } | { ok: false; code: number; message: string; details?: number };

/** Runs one scenario against dojang at `baseUrl`; the result is what the test asserts. */
(globalThis as unknown as { runScenario: (u: string, n: string) => Promise<Result> }).runScenario = async (baseUrl: string, name: string): Promise<Result> => {
  const json = name.endsWith("-json");
  const client = echoClient(createConnectTransport({ baseUrl, useBinaryFormat: !json, useHttpGet: name.startsWith("get") }));
  try {
    switch (name.replace(/-json$/, "")) {
      case "unary":
      case "get": {
        const r = await client.unary({ value: `hello from the browser (${name})` });
        return { ok: true, value: r.value };
      }
      case "stream": {
        const got: string[] = [];
        for await (const m of client.serverStream({ value: "tick" })) got.push(m.value);
        return { ok: true, values: got };
      }
      case "error":
        await client.unary({ value: "fail" });
        return { ok: true };
      case "timeout":
        // connect-timeout-ms 500 (the page's own timer is set a little later than dojang's deadline
        // can fire; either way the page reads deadline_exceeded)
        await client.unary({ value: "slow" }, { timeoutMs: 500 });
        return { ok: true };
      default:
        return { ok: false, code: -1, message: `unknown scenario ${name}` };
    }
  } catch (e) {
    const c = ConnectError.from(e);
    return { ok: false, code: c.code, message: c.rawMessage, details: c.details.length };
  }
};
