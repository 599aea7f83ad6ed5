// The xDS client's entry, loaded by Dojang.start() only when the config has `xds` (a config
// without it never loads the client, the descriptors or protobufjs).
import { ConfigError } from "../errors.js";
import { readBootstrap } from "./bootstrap.js";
import { XdsClient, type XdsHost, type XdsOptions } from "./client.js";

export { XdsClient } from "./client.js";

/** Reads the bootstrap (a ConfigError naming each bad field) and starts the ADS stream. */
export function startXdsClient(bootstrapFile: string, host: XdsHost, opts: XdsOptions = {}): XdsClient {
  const b = readBootstrap(bootstrapFile);
  if (!b.ok) throw new ConfigError(bootstrapFile, b.issues);
  const c = new XdsClient(b.bootstrap, host, { ...envOptions(), ...opts });
  c.start();
  return c;
}

/**
 * Test hooks from the environment (DOJANG_XDS_MISSING_MS, DOJANG_XDS_BACKOFF_MS): a test of the
 * 15 s does-not-exist timer and of the reconnect back-off keeps its time bounded with them.
 * DOJANG_XDS_ENDPOINTS_IN_PLACE=0 decodes every response whole and applies it with the
 * whole-config reload, as dojang did before 0.7 (bench/eds.mjs measures against it in one run).
 */
function envOptions(): XdsOptions {
  const n = (k: string): number | undefined => {
    const v = Number(process.env[k]);
    return Number.isFinite(v) && v > 0 ? v : undefined;
  };
  const missing = n("DOJANG_XDS_MISSING_MS");
  const backoff = n("DOJANG_XDS_BACKOFF_MS");
  const inPlace = process.env["DOJANG_XDS_ENDPOINTS_IN_PLACE"] === "0" ? { endpointsInPlace: false } : {};
  return { ...(missing === undefined ? {} : { missingAfterMs: missing }), ...(backoff === undefined ? {} : { backoffBaseMs: backoff }), ...inPlace };
}
