// A listener's TLS (config `listeners[].tls`): the certificate files read into secure contexts,
// the one chosen by SNI (exact names and "*.example.com" wildcards), the verified client
// certificate turned into an Envoy-style x-forwarded-client-cert value (once per connection),
// and the files watched so a renewed certificate is served to new handshakes without a restart
// (connections already open keep theirs). Key material lives only in node's secure contexts:
// never in the config, a log line or /config.
import { createHash } from "node:crypto";
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
  cfg.certificates.forEach((c, i) => {
    const at = `tls.certificates[${i}]`;
    const cc = read(`${at}.certFile`, c.certFile);
    const ck = read(`${at}.keyFile`, c.keyFile);
    // each SNI context verifies client certificates against the same CA
    const ctx = context(where, at, ca === undefined ? { cert: cc, key: ck } : { cert: cc, key: ck, ca });
    for (const n of c.serverNames) {
      if (n.startsWith("*.")) {
        if (!wildcard.has(n.slice(2))) wildcard.set(n.slice(2), ctx);
      } else if (!exact.has(n)) exact.set(n, ctx);
    }
  });
  return { digest: h.digest("hex"), defaults, exact, wildcard };
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
  private server: TlsServer | undefined;
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

  /** The SNI choice: an exact name, else a one-label wildcard, else (undefined) the default. */
  contextFor(servername: string): SecureContext | undefined {
    const n = servername.toLowerCase();
    const l = this.loaded;
    const hit = l.exact.get(n);
    if (hit !== undefined) return hit;
    const dot = n.indexOf(".");
    return dot > 0 ? l.wildcard.get(n.slice(dot + 1)) : undefined;
  }

  /** Starts watching the files; `server` gets the new default context on each reload. */
  watch(server: TlsServer): void {
    this.server = server;
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
    this.server?.setSecureContext(d.ca === undefined ? { cert: d.cert, key: d.key } : { cert: d.cert, key: d.key, ca: d.ca });
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
