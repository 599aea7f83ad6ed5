// A cluster's upstream TLS (config `clusters[].tls`): the options its sessions connect with —
// the CA to verify against (the system CAs without caFile), the SNI name that is also the name
// verified, and a client certificate for mTLS. Verification is always on. The files are read
// once per cluster config (a reload that changes `tls` builds a new cluster, which reads them
// again); a file that cannot be read fails the start or the reload, naming the key.
import { readFileSync } from "node:fs";
import type { ConnectionOptions } from "node:tls";
import type { ClusterTlsConfig } from "../../config/index.js";
import { ConfigError } from "../../errors.js";

export type UpstreamTlsOptions = Pick<ConnectionOptions, "ca" | "cert" | "key" | "servername" | "rejectUnauthorized" | "minVersion">;

const loaded = new WeakMap<ClusterTlsConfig, UpstreamTlsOptions>();

function read(cluster: string, key: string, file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err: unknown) {
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    throw new ConfigError(`cluster ${JSON.stringify(cluster)}`, [{ path: key, message: `cannot read ${JSON.stringify(file)}: ${code}` }], { cause: err });
  }
}

/** The TLS options for a cluster's connections (read on first use, then kept with the config). */
export function upstreamTlsOptions(cfg: ClusterTlsConfig, cluster: string): UpstreamTlsOptions {
  const hit = loaded.get(cfg);
  if (hit !== undefined) return hit;
  const o: { -readonly [K in keyof UpstreamTlsOptions]: UpstreamTlsOptions[K] } = { rejectUnauthorized: true, minVersion: "TLSv1.2" };
  if (cfg.caFile !== null) o.ca = read(cluster, "tls.caFile", cfg.caFile);
  if (cfg.certFile !== null && cfg.keyFile !== null) {
    o.cert = read(cluster, "tls.certFile", cfg.certFile);
    o.key = read(cluster, "tls.keyFile", cfg.keyFile);
  }
  // node sends the connect host as SNI and verifies against it; serverName overrides both
  if (cfg.serverName !== null) o.servername = cfg.serverName;
  loaded.set(cfg, o);
  return o;
}

/** An endpoint's https: URL (node then offers ALPN h2 and nothing else). */
export function httpsUrl(httpUrl: string): string {
  return "https" + httpUrl.slice(4);
}

/**
 * node's certificate-verification error codes (OpenSSL's X509_V_ERR_* names, and node's own
 * ERR_TLS_CERT_ALTNAME_INVALID for a name mismatch): a connect error with one of these is a
 * verification failure, reported as such.
 */
export function isVerificationError(code: string): boolean {
  return code === "ERR_TLS_CERT_ALTNAME_INVALID" || /^(UNABLE_TO_|CERT_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|INVALID_CA|HOSTNAME_MISMATCH)/.test(code);
}
