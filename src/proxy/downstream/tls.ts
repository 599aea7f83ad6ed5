// A listener's TLS (config `listeners[].tls`): the certificate files read into secure contexts,
// the one chosen by SNI (exact names and "*.example.com" wildcards), the verified client
// certificate turned into an Envoy-style x-forwarded-client-cert value (once per connection),
// and the files watched so a renewed certificate is served to new handshakes without a restart
// (connections already open keep theirs). Key material lives only in node's secure contexts:
// never in the config, a log line or /config.
import { createHash, X509Certificate } from "node:crypto";
import { readFileSync, watch, type FSWatcher } from "node:fs";
import { dirname, resolve } from "node:path";
import tls, { type SecureContext, type TLSSocket } from "node:tls";
import type { Logger } from "pino";
import type { ListenerTlsConfig } from "../../config/index.js";
import { ConfigError } from "../../errors.js";

/** The header dojang sets from a verified client certificate and strips from every request. */
export const XFCC_HEADER = "x-forwarded-client-cert";

/** Debounce for file changes: a renewal writes cert and key one after the other. */
export const RELOAD_DEBOUNCE_MS = 200;

/** What a key path names: a file the config gave, read or refused as a whole. */
interface Loaded {
  /** SHA-256 over every file's bytes, in config order: a reload of unchanged files does nothing */
  readonly digest: string;
  /** options for node's default context (server.setSecureContext / createSecureServer) */
  readonly defaults: { readonly cert: Buffer; readonly key: Buffer; readonly ca?: Buffer };
  /** exact server name → context */
  readonly exact: ReadonlyMap<string, SecureContext>;
  /** "example.com" for "*.example.com" → context */
  readonly wildcard: ReadonlyMap<string, SecureContext>;
  /** each served certificate's end of validity (its leaf's notAfter), by its key path */
  readonly expiries: readonly CertificateExpiry[];
}

/** When a served certificate stops being valid (dojang_tls_certificate_expiry_timestamp_seconds). */
export interface CertificateExpiry {
  /** its key path in the listener's tls block: "tls.certFile", "tls.certificates[0].certFile" */
  readonly certificate: string;
  /** the leaf's notAfter, seconds since the epoch */
  readonly notAfter: number;
}

/** The leaf's (the file's first certificate's) notAfter in epoch seconds; NaN when it cannot be read. */
function notAfterOf(pem: Buffer): number {
  try {
    return Math.floor(Date.parse(new X509Certificate(pem).validTo) / 1000);
  } catch {
    return NaN;
  }
}

/** Reads a file the config names; a failure names the key and the file, never the contents. */
function readKeyFile(where: string, key: string, file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err: unknown) {
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
    throw new ConfigError(where, [{ path: key, message: `cannot read ${JSON.stringify(file)}: ${code}` }], { cause: err });
  }
}

/** A secure context from PEM; OpenSSL's reason (bad PEM, key mismatch) named on the key. */
function context(where: string, key: string, opts: tls.SecureContextOptions): SecureContext {
  try {
    return tls.createSecureContext(opts);
  } catch (err: unknown) {
    throw new ConfigError(where, [{ path: key, message: `not a usable certificate and key: ${(err as Error).message}` }], { cause: err });
  }
}

/** Reads and checks every file of a listener's tls block; throws ConfigError naming the key. */
export function loadListenerTls(cfg: ListenerTlsConfig, where: string): Loaded {
  const h = createHash("sha256");
  const read = (key: string, file: string): Buffer => {
    const b = readKeyFile(where, key, file);
    h.update(`${b.length}:`).update(b);
    return b;
  };
  const ca = cfg.caFile === null ? undefined : read("tls.caFile", cfg.caFile);
  const cert = read("tls.certFile", cfg.certFile);
  const key = read("tls.keyFile", cfg.keyFile);
  const defaults = ca === undefined ? { cert, key } : { cert, key, ca };
  // built once to check the pair (and the CA) now, not at the first handshake
  context(where, "tls", defaults);
  const exact = new Map<string, SecureContext>();
  const wildcard = new Map<string, SecureContext>();
  const expiries: CertificateExpiry[] = [{ certificate: "tls.certFile", notAfter: notAfterOf(cert) }];
  cfg.certificates.forEach((c, i) => {
    const at = `tls.certificates[${i}]`;
    const cc = read(`${at}.certFile`, c.certFile);
    expiries.push({ certificate: `${at}.certFile`, notAfter: notAfterOf(cc) });
    const ck = read(`${at}.keyFile`, c.keyFile);
    // each SNI context verifies client certificates against the same CA
    const ctx = context(where, at, ca === undefined ? { cert: cc, key: ck } : { cert: cc, key: ck, ca });
    for (const n of c.serverNames) {
      if (n.startsWith("*.")) {
        if (!wildcard.has(n.slice(2))) wildcard.set(n.slice(2), ctx);
      } else if (!exact.has(n)) exact.set(n, ctx);
    }
  });
  return { digest: h.digest("hex"), defaults, exact, wildcard, expiries: expiries.filter((e) => !Number.isNaN(e.notAfter)) };
}

/** Every file a tls block names (for the watcher). */
function filesOf(cfg: ListenerTlsConfig): string[] {
  const out = [cfg.certFile, cfg.keyFile];
  if (cfg.caFile !== null) out.push(cfg.caFile);
  for (const c of cfg.certificates) out.push(c.certFile, c.keyFile);
  return [...new Set(out.map((f) => resolve(f)))];
}

/** The Http2SecureServer part of a listener's TLS that the listener needs to know. */
export interface TlsServer {
  setSecureContext(options: tls.SecureContextOptions): void;
}

/**
 * A listener's certificates: the options its secure server is created with, the SNI choice,
 * and the reload when a file changes. One per TLS listener.
 */
export class ListenerTls {
  private loaded: Loaded;
  private servers: readonly TlsServer[] = [];
  private readonly watchers: FSWatcher[] = [];
  private timer: NodeJS.Timeout | undefined;
  /** reloads done and refused (tests and logs) */
  reloads = 0;
  refusedReloads = 0;

  constructor(
    readonly cfg: ListenerTlsConfig,
    private readonly where: string,
    private readonly log: Logger,
  ) {
    this.loaded = loadListenerTls(cfg, where);
  }

  /**
   * Options for http2.createSecureServer. `allowHTTP1` adds http/1.1 to ALPN (gRPC-Web over
   * HTTP/1.1 on the same TLS port); otherwise only h2 is offered and a client that cannot speak
   * it is refused in the handshake (ALPN no_application_protocol).
   */
  serverOptions(allowHTTP1: boolean): tls.TlsOptions & { allowHTTP1: boolean } {
    const d = this.loaded.defaults;
    const mtls = this.cfg.caFile !== null;
    return {
      cert: d.cert,
      key: d.key,
      ...(d.ca === undefined ? {} : { ca: d.ca }),
      // caFile: ask for a certificate; requireClientCert: no verified one, no handshake. Without
      // requireClientCert an unverified certificate is allowed through but never forwarded
      // (xfccOf reads it only when the socket is authorized).
      requestCert: mtls,
      rejectUnauthorized: mtls && this.cfg.requireClientCert,
      SNICallback: (name, cb) => cb(null, this.contextFor(name)),
      allowHTTP1,
      minVersion: "TLSv1.2",
    };
  }

  /** When each certificate it serves now expires (read at scrape time; a reload of the files updates it). */
  expiries(): readonly CertificateExpiry[] {
    return this.loaded.expiries;
  }

  /** The SNI choice: an exact name, else a one-label wildcard, else (undefined) the default. */
  contextFor(servername: string): SecureContext | undefined {
    const n = servername.toLowerCase();
    const l = this.loaded;
    const hit = l.exact.get(n);
    if (hit !== undefined) return hit;
    const dot = n.indexOf(".");
    return dot > 0 ? l.wildcard.get(n.slice(dot + 1)) : undefined;
  }

  /**
   * Options for the HTTPS/1.1 server on `http1Address` (node:https): the same certificates, SNI
   * choice and client-certificate rule as the TLS port, ALPN http/1.1 only (node:https's own).
   */
  http1Options(): tls.TlsOptions {
    const { allowHTTP1: _, ...o } = this.serverOptions(false);
    return o;
  }

  /**
   * Starts watching the files; each server (the TLS port, and the HTTPS/1.1 server on
   * http1Address) gets the new default context on each reload.
   */
  watch(...servers: TlsServer[]): void {
    this.servers = servers;
    // Directories are watched, not the files: a renewal usually renames a new file over the old
    // one, which would leave a watch on the old inode deaf. Any change in such a directory
    // schedules a reload, not only one named like a configured file: a Kubernetes secret volume
    // swaps a `..data` symlink and the files keep their names (the reload is a no-op when no
    // file's bytes changed).
    const dirs = new Set(filesOf(this.cfg).map((f) => dirname(f)));
    for (const dir of dirs) {
      try {
        const w = watch(dir, { persistent: false }, () => this.schedule());
        w.on("error", (err) => this.log.warn({ where: this.where, dir, err: err.message }, "tls: cannot watch certificate directory"));
        this.watchers.push(w);
      } catch (err) {
        this.log.warn({ where: this.where, dir, err: (err as Error).message }, "tls: cannot watch certificate directory; certificates will not be reloaded");
      }
    }
  }

  private schedule(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = setTimeout(reloadNow, RELOAD_DEBOUNCE_MS, this);
    this.timer.unref();
  }

  /**
   * Re-reads every file. All good: new handshakes get the new certificates (open connections
   * keep theirs). Anything wrong (a half-written file, a key that does not match): refused with a
   * log line naming the key, and the old certificates stay.
   */
  reload(): boolean {
    this.timer = undefined;
    let next: Loaded;
    try {
      next = loadListenerTls(this.cfg, this.where);
      if (next.digest === this.loaded.digest) return false;
    } catch (err) {
      this.refusedReloads++;
      const issues = err instanceof ConfigError ? err.issues.map((i) => `${i.path}: ${i.message}`).join("; ") : (err as Error).message;
      this.log.warn({ where: this.where, problem: issues }, "tls: changed certificate files refused; the previous certificates are still served");
      return false;
    }
    this.loaded = next;
    const d = next.defaults;
    for (const s of this.servers) s.setSecureContext(d.ca === undefined ? { cert: d.cert, key: d.key } : { cert: d.cert, key: d.key, ca: d.ca });
    this.reloads++;
    this.log.info({ where: this.where }, "tls: certificate files reloaded; new connections get them");
    return true;
  }

  close(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    for (const w of this.watchers) w.close();
    this.watchers.length = 0;
  }
}

function reloadNow(t: ListenerTls): void {
  t.reload();
}

/**
 * The x-forwarded-client-cert value for a connection, in Envoy's format
 * (`Hash=<hex SHA-256 of the DER>;Subject="<RFC 2253>";URI=<uri SAN>;DNS=<dns SAN>…`), or
 * undefined when the client presented no certificate the CA verified. Read once per connection.
 */
export function xfccOf(socket: TLSSocket): string | undefined {
  if (!socket.authorized) return undefined;
  const cert = socket.getPeerX509Certificate();
  if (cert === undefined) return undefined;
  let v = `Hash=${createHash("sha256").update(cert.raw).digest("hex")}`;
  v += `;Subject="${rfc2253(cert.subject)}"`;
  const sans = splitSans(cert.subjectAltName);
  // Envoy: the first URI SAN, then every DNS SAN as its own pair.
  const uri = sans.find((s) => s.startsWith("URI:"));
  if (uri !== undefined) v += `;URI=${xfccValue(uri.slice(4))}`;
  for (const s of sans) if (s.startsWith("DNS:")) v += `;DNS=${xfccValue(s.slice(4))}`;
  return v;
}

/**
 * node's X509Certificate.subject is one attribute per line, in the certificate's order, with
 * RFC 2253 escapes already applied; RFC 2253 (what Envoy prints) is that order reversed and
 * joined by commas. A `"` is escaped for the quoted XFCC value.
 */
export function rfc2253(subject: string): string {
  return subject
    .split("\n")
    .filter((l) => l !== "")
    .reverse()
    .join(",")
    .replace(/(?<!\\)"/g, '\\"');
}

/** subjectAltName "DNS:a, URI:b" → ["DNS:a", "URI:b"] (node quotes entries holding ", "). */
export function splitSans(s: string | undefined): string[] {
  if (s === undefined || s === "") return [];
  const out: string[] = [];
  const re = /(?:^|, )([A-Za-z ]+:(?:"(?:[^"\\]|\\.)*"|[^,]*))/g;
  for (let m = re.exec(s); m !== null; m = re.exec(s)) {
    const e = m[1]!;
    const i = e.indexOf(":");
    const val = e.slice(i + 1);
    out.push(e.slice(0, i + 1) + (val.startsWith('"') ? JSON.parse(val) : val));
  }
  return out;
}

/** A value with `,`, `;`, `=` or `"` is double-quoted (Envoy's rule for XFCC values). */
function xfccValue(v: string): string {
  return /[,;="]/.test(v) ? `"${v.replace(/"/g, '\\"')}"` : v;
}

/** How a socket of a listener treats TLS, as the start-up line names it. */
export type TlsMode = "plaintext" | "tls" | "mtls-required" | "mtls-optional";

export function tlsModeOf(cfg: ListenerTlsConfig | null): TlsMode {
  if (cfg === null) return "plaintext";
  if (cfg.caFile === null) return "tls";
  return cfg.requireClientCert ? "mtls-required" : "mtls-optional";
}

// === refused handshakes (dojang_tls_handshake_errors_total, and a rate-limited log line) ===

/**
 * Why a client's TLS handshake did not complete, as the metric's `reason` label says it (Envoy's
 * ssl.fail_verify_no_cert, ssl.fail_verify_error, ssl.connection_error split further). Each
 * reason is documented in the README (TLS and mTLS). `unknown_sni` is not among them: a name no
 * certificate matches gets the default certificate (dojang has no strict-SNI mode), so an SNI
 * name never refuses a handshake.
 */
export const HANDSHAKE_ERROR_REASONS = ["no_client_cert", "bad_client_cert", "protocol", "server_cert_refused", "timeout", "client_closed", "other"] as const;
export type HandshakeErrorReason = (typeof HANDSHAKE_ERROR_REASONS)[number];

/**
 * The alerts a client sends when it does not accept dojang's certificate (OpenSSL-based clients:
 * curl, grpc-go's, Envoy; node's own client closes without an alert).
 */
const SERVER_CERT_ALERT = /^ERR_SSL_(?:SSLV3|TLSV1|TLSV13)_ALERT_(?:UNKNOWN_CA|BAD_CERTIFICATE|UNSUPPORTED_CERTIFICATE|CERTIFICATE_[A-Z_]+)$/;

/**
 * Pure: the reason for a failed handshake from what node's `tlsClientError` gives: the error's
 * code and the socket's authorizationError. Probed on Node 24 (OpenSSL 3) with real handshakes:
 * - no certificate under requireClientCert: ERR_SSL_PEER_DID_NOT_RETURN_A_CERTIFICATE (TLS 1.2
 *   and 1.3);
 * - a certificate the CA does not verify (another CA's, expired): node finishes the handshake,
 *   then destroys the socket and reports ECONNRESET "socket hang up" with the verification error
 *   in authorizationError (UNABLE_TO_VERIFY_LEAF_SIGNATURE, CERT_HAS_EXPIRED, ...);
 * - no common ALPN protocol: ERR_SSL_NO_APPLICATION_PROTOCOL; TLS 1.0/1.1 only:
 *   ERR_SSL_UNSUPPORTED_PROTOCOL; plain HTTP/1.1: ERR_SSL_HTTP_REQUEST; the h2c preface or other
 *   bytes that are not TLS: ERR_SSL_WRONG_VERSION_NUMBER; every other ERR_SSL_ code is the same
 *   kind of mismatch (no shared cipher, a malformed record, an unexpected message);
 * - the client's alert that it does not accept dojang's certificate: ERR_SSL_*_ALERT_UNKNOWN_CA,
 *   _BAD_CERTIFICATE, _CERTIFICATE_*;
 * - node's handshakeTimeout (120 s): ERR_TLS_HANDSHAKE_TIMEOUT;
 * - a client that connects and closes (a TCP health check, a scanner) or sends half a
 *   ClientHello: ECONNRESET with no authorizationError.
 */
export function classifyHandshakeError(code: string | undefined, authorizationError: string | null | undefined): HandshakeErrorReason {
  if (code === "ERR_SSL_PEER_DID_NOT_RETURN_A_CERTIFICATE") return "no_client_cert";
  if (typeof authorizationError === "string" && authorizationError !== "") return "bad_client_cert";
  if (code === undefined) return "other";
  if (code === "ERR_TLS_HANDSHAKE_TIMEOUT") return "timeout";
  if (code === "ECONNRESET" || code === "EPIPE") return "client_closed";
  if (SERVER_CERT_ALERT.test(code)) return "server_cert_refused";
  if (code.startsWith("ERR_SSL_")) return "protocol";
  return "other";
}

/** At most one log line per listener, reason and this period; the next line says how many were left out. */
export const HANDSHAKE_LOG_PERIOD_MS = 1000;

/** A counter child (prom-client's Counter.Internal) */
export interface Inc {
  inc(): void;
}

/** What a failed handshake leaves on its socket (a TLSSocket that never became a connection). */
interface FailedSocket {
  readonly remoteAddress?: string | undefined;
  readonly remotePort?: number | undefined;
  readonly authorizationError?: unknown;
  readonly servername?: string | false | null | undefined;
  /** node's raw socket under the TLS one (internal, read only for the client's address) */
  readonly _parent?: { readonly remoteAddress?: string | undefined; readonly remotePort?: number | undefined } | null;
}

/**
 * One TLS listener's refused handshakes: counted by reason on every event, logged at most once
 * per reason per HANDSHAKE_LOG_PERIOD_MS (warn; a client that only connected and left: debug)
 * with the client's address, the reason and node's error code, never certificate bytes.
 */
export class HandshakeErrors {
  private readonly counters: readonly Inc[];
  private readonly lastLogged: number[];
  private readonly suppressed: number[];

  constructor(
    private readonly listener: string,
    counterFor: (reason: HandshakeErrorReason) => Inc,
    private readonly log: Logger,
  ) {
    this.counters = HANDSHAKE_ERROR_REASONS.map(counterFor);
    this.lastLogged = HANDSHAKE_ERROR_REASONS.map(() => -Infinity);
    this.suppressed = HANDSHAKE_ERROR_REASONS.map(() => 0);
  }

  /** node's `tlsClientError` on a listener's secure server; `port` names which of its sockets. */
  record(err: Error, socket: FailedSocket, port: "address" | "http1Address"): HandshakeErrorReason {
    const code = (err as NodeJS.ErrnoException).code;
    const authz = typeof socket.authorizationError === "string" ? socket.authorizationError : undefined;
    const reason = classifyHandshakeError(code, authz);
    const i = HANDSHAKE_ERROR_REASONS.indexOf(reason);
    this.counters[i]!.inc();
    const now = performance.now();
    if (now - this.lastLogged[i]! < HANDSHAKE_LOG_PERIOD_MS) {
      this.suppressed[i]!++;
      return reason;
    }
    this.lastLogged[i] = now;
    const suppressed = this.suppressed[i]!;
    this.suppressed[i] = 0;
    // A socket node destroyed (a refused client certificate) no longer knows its peer: the raw
    // socket under it does (the listener reads the address when the connection is accepted).
    const host = socket.remoteAddress ?? socket._parent?.remoteAddress;
    const p = socket.remotePort ?? socket._parent?.remotePort;
    const line = {
      listener: this.listener,
      socket: port,
      reason,
      client: host === undefined ? undefined : host.includes(":") ? `[${host}]:${p ?? "?"}` : `${host}:${p ?? "?"}`,
      error: code ?? err.message,
      ...(authz === undefined ? {} : { certificate_error: authz }),
      ...(typeof socket.servername === "string" ? { sni: socket.servername } : {}),
      suppressed,
    };
    if (reason === "client_closed") this.log.debug(line, "client closed the connection during the TLS handshake");
    else this.log.warn(line, "TLS handshake refused");
    return reason;
  }
}
