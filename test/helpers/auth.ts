// Peers for the auth tests (issue 21): signing keys and tokens (jose), a JWKS served over HTTPS by
// a node https server with a certificate from certs.ts (switchable keys, and a switch that makes it
// fail, one that makes it hang), Istio's sample ext_authz server (the ext-authz engine) started on free ports (and TLS in
// front of it, the engine's tls-front), an upstream
// that echoes every method, and a logger whose lines a test can read.
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import http2 from "node:http2";
import { Writable } from "node:stream";
import { exportJWK, generateKeyPair, SignJWT, type JWK, type JWTPayload, type CryptoKey } from "jose";
import pino, { type Logger } from "pino";
import type { Ca, CertDir } from "./certs.js";
import { engineBinary } from "./engines.js";
import { spawnGroup } from "./process.js";
import { startRawUpstream, type RawUpstream } from "./peers.js";

export interface SigningKey {
  readonly kid: string;
  readonly alg: string;
  readonly privateKey: CryptoKey;
  readonly jwk: JWK;
}

export async function signingKey(alg: "RS256" | "ES256" | "EdDSA" | "PS256", kid: string): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, alg === "EdDSA" ? { crv: "Ed25519", extractable: true } : { extractable: true });
  return { kid, alg, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg, use: "sig" } };
}

export function jwks(...keys: SigningKey[]): { keys: JWK[] } {
  return { keys: keys.map((k) => k.jwk) };
}

/** A signed token: claims plus iat/exp (exp in seconds from now; negative = already expired). */
export function token(k: SigningKey, claims: JWTPayload & { expIn?: number }, header: { kid?: string; alg?: string } = {}): Promise<string> {
  const { expIn = 300, ...rest } = claims;
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ iat: now, exp: now + expIn, ...rest })
    .setProtectedHeader({ alg: header.alg ?? k.alg, kid: header.kid ?? k.kid, typ: "JWT" })
    .sign(k.privateKey);
}

export interface JwksServer {
  readonly url: string;
  /** what it serves now */
  body: unknown;
  /** answer 503 instead */
  failing: boolean;
  /** take the request and never answer (a JWKS server that hangs) */
  hanging: boolean;
  /** the requests held while hanging: when each arrived, and when its connection closed (performance.now()) */
  readonly held: { at: number; closedAt?: number }[];
  fetches: number;
  close(): Promise<void>;
}

/** A JWKS over HTTPS at https://127.0.0.1:<port>/jwks.json, its certificate signed by `ca`. */
export async function startJwksServer(certs: CertDir, ca: Ca, body: unknown): Promise<JwksServer> {
  const leaf = certs.leaf(ca, `jwks-${Math.random().toString(36).slice(2)}`, { cn: "jwks.test", ip: ["127.0.0.1"] });
  const s: JwksServer & { server?: Server } = {
    url: "",
    body,
    failing: false,
    hanging: false,
    held: [],
    fetches: 0,
    close: () => new Promise<void>((r) => {
      s.server!.closeAllConnections();
      s.server!.close(() => r());
    }),
  };
  const server = createServer({ cert: leaf.cert, key: leaf.key }, (req, res) => {
    s.fetches++;
    if (s.hanging) {
      const h: { at: number; closedAt?: number } = { at: performance.now() };
      s.held.push(h);
      req.socket.once("close", () => (h.closedAt = performance.now()));
      return;
    }
    if (s.failing || req.url !== "/jwks.json") {
      res.writeHead(s.failing ? 503 : 404).end();
      return;
    }
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(s.body));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  s.server = server;
  (s as { url: string }).url = `https://127.0.0.1:${(server.address() as AddressInfo).port}/jwks.json`;
  return s;
}

/** An upstream that answers every method: the request bytes back, grpc-status 0. */
export function echoAll(): Promise<RawUpstream> {
  return startRawUpstream((stream) => {
    const body: Buffer[] = [];
    stream.on("data", (d: Buffer) => body.push(d));
    stream.on("end", () => {
      if (stream.destroyed || stream.closed) return;
      stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
      stream.once("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
      stream.end(Buffer.concat(body));
    });
  });
}

/** A pino logger at debug whose lines (parsed) land in `lines`. */
export function memoryLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(chunk.toString("utf8"));
      cb();
    },
  });
  return { logger: pino({ level: "debug" }, sink), lines };
}

export interface ExtAuthzServer {
  readonly address: string;
  /** its log so far (one line per check: "[gRPCv3][allowed]" / "[denied]") */
  readonly log: () => string;
  checks(verdict?: "allowed" | "denied"): number;
}

/**
 * Istio's sample ext_authz server (samples/extauthz/cmd/extauthz, the ext-authz engine): gRPC v3
 * Check that allows a request carrying `x-ext-authz: allow`, or whose source principal ends in
 * "/sa/<allow_service_account>", and denies the rest (7, 403, its body as the message). Ports are
 * chosen by the kernel (`-grpc 0`); the address is read from its start-up line.
 */
export async function startExtAuthz(ms = 30_000): Promise<ExtAuthzServer> {
  const child = spawnGroup(engineBinary("ext-authz"), ["-http", "0", "-grpc", "0", "-allow_service_account", "a"], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString("utf8")));
  child.stderr!.on("data", (d: Buffer) => (out += d.toString("utf8")));
  const port = await new Promise<number>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`ext-authz did not start in ${ms} ms: ${out}`)), ms);
    const look = (): void => {
      const m = /Starting gRPC server at \S*:(\d+)/.exec(out);
      if (m !== null) {
        clearTimeout(t);
        resolve(Number(m[1]));
      }
    };
    child.stdout!.on("data", look);
    child.stderr!.on("data", look);
    child.on("exit", (code) => reject(new Error(`ext-authz exited ${code}: ${out}`)));
  });
  return {
    address: `127.0.0.1:${port}`,
    log: () => out,
    checks: (v) => out.split("\n").filter((l) => l.includes("[gRPCv3]") && (v === undefined || l.includes(`[${v}]`))).length,
  };
}

/**
 * TLS in front of a plaintext gRPC server (the ext-authz engine's tls-front: Go's crypto/tls,
 * ALPN h2, the bytes relayed unchanged): Istio's ext_authz server has no TLS listener of its own.
 * With `clientCaFile`, only a client certificate that CA signed gets through.
 */
export async function startTlsFront(backend: string, cert: { certFile: string; keyFile: string }, clientCaFile?: string, ms = 30_000): Promise<{ address: string }> {
  const args = ["-listen", "127.0.0.1:0", "-backend", backend, "-cert", cert.certFile, "-key", cert.keyFile, ...(clientCaFile === undefined ? [] : ["-client-ca", clientCaFile])];
  const child = spawnGroup(engineBinary("tls-front"), args, { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stderr!.on("data", (d: Buffer) => (out += d.toString("utf8")));
  const port = await new Promise<number>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`tls-front did not start in ${ms} ms: ${out}`)), ms);
    child.stdout!.on("data", (d: Buffer) => {
      out += d.toString("utf8");
      const m = /tls-front listening on \S*:(\d+)/.exec(out);
      if (m !== null) {
        clearTimeout(t);
        resolve(Number(m[1]));
      }
    });
    child.on("exit", (code) => reject(new Error(`tls-front exited ${code}: ${out}`)));
  });
  return { address: `127.0.0.1:${port}` };
}

/** One raw HTTP/2 unary call (path and headers of our choosing) with an empty message. */
export function h2Call(address: string, path: string, headers: http2.OutgoingHttpHeaders = {}): Promise<{ status: string | undefined; message: string | undefined; all: http2.IncomingHttpHeaders }> {
  return new Promise((resolve) => {
    const s = http2.connect(`http://${address}`);
    s.on("error", () => {});
    const req = s.request({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers", ...headers });
    let all: http2.IncomingHttpHeaders = {};
    req.on("response", (h) => (all = { ...all, ...h }));
    req.on("trailers", (t) => (all = { ...all, ...t }));
    req.on("data", () => {});
    req.on("error", () => {});
    req.on("close", () => {
      s.close();
      const st = all["grpc-status"];
      const msg = all["grpc-message"];
      resolve({ status: typeof st === "string" ? st : undefined, message: typeof msg === "string" ? decodeURIComponent(msg) : undefined, all });
    });
    req.end(Buffer.from([0, 0, 0, 0, 0]));
  });
}
