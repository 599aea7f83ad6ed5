// Issue 0.5.1 item 1: a method a rule denies must not be reachable by dressing its :path. The
// judges are upstreams that act on the path as they read it (test/engines/path-judge): connect-go
// v1.19, which runs what net/http's decoded path names (query dropped, %-escapes decoded), and
// grpc-go, which reads the path as it came; both count what reaches them. dojang derives one
// canonical method name per call (src/translate/grpc-path.ts) and that one name drives routing,
// rbac and the :path sent upstream: a path outside the gRPC grammar is refused (12, as grpc-go
// answers it), a URL a bridge takes (Connect, JSON) is normalised as Envoy normalises it first.
//
// Every entry protocol (gRPC over h2c and TLS; gRPC-Web binary and text over HTTP/1.1 and HTTP/2,
// and over TLS; Connect POST and GET over HTTP/2 and HTTP/1.1; JSON over both) sends every dressed
// form of the denied method's path, concurrently on one connection where the protocol has one,
// to two kinds of listener: one whose rbac denies pkg.Svc/Unary and allows pkg.Svc/*, and one
// whose per-method route (match.path /pkg.Svc/Unary) denies every call before a catch-all route.
// Asserted from the outside: the denied method's handler never ran on either upstream; whatever
// reached an upstream carried a path in the gRPC grammar, undressed (its request URI is its
// decoded path) and the same name dojang's record shows; no client got the denied method's answer.
import http2 from "node:http2";
import net from "node:net";
import tls from "node:tls";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDojang, type DojangHandle } from "../../src/index.js";
import { CertDir, type Ca, type CertFiles } from "../helpers/certs.js";
import { frame } from "../helpers/peers.js";
import { REPO_ROOT } from "../helpers/process.js";
import { startJudge, type Judge } from "../helpers/path-judge.js";
import { memoryLogger } from "../helpers/auth.js";
import { descriptorSet } from "../helpers/transcode.js";
import { connectRawH2, grpcRequestFields } from "../helpers/raw-h2-client.js";

// === the attack ===

const DENIED = "/pkg.Svc/Unary";
const ALLOWED = "/pkg.Svc/Open";
/** The gRPC grammar, written out here (not dojang's): "/" service "/" method, protobuf identifiers. */
const GRAMMAR = /^\/[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\/[A-Za-z_][A-Za-z0-9_]*$/;
/** What the denied method answers (its handler's reply names it): no client may read this. */
const DENIED_ANSWER = "/pkg.Svc/Unary:";
const LONG = "a".repeat(3000);

/** Dressed forms of the denied method's path. */
const FORMS: readonly string[] = [
  DENIED,
  // query, fragment
  `${DENIED}?x=1`, `${DENIED}?`, `${DENIED}?access_token=t0ken`, `${DENIED}#x`, `${DENIED}#`, `${DENIED}?x#y`,
  // percent-encoded letters, in upper and lower case hex, and double encoding
  "/pkg.Svc/Un%61ry", "/pkg.Svc/%55nary", "/pkg.Svc/Un%61%72y", "/pkg.Svc/U%6eary", "/%70kg.Svc/Unary", "/pkg%2ESvc/Unary", "/pkg%2eSvc/Unary", "/pkg.Svc/Un%2561ry",
  // escaped slashes and backslashes, raw backslashes
  "/pkg.Svc%2FUnary", "/pkg.Svc%2fUnary", "/pkg.Svc/x%2F..%2FUnary", "/pkg.Svc%5CUnary", "/pkg.Svc%5cUnary", "/pkg.Svc/x%5C..%5CUnary", "/pkg.Svc\\Unary", "/pkg.Svc/x\\..\\Unary", "\\pkg.Svc\\Unary",
  // doubled slashes, dot segments (raw and encoded)
  "//pkg.Svc/Unary", "/pkg.Svc//Unary", "/pkg.Svc/Unary//", "///pkg.Svc///Unary",
  "/./pkg.Svc/Unary", "/pkg.Svc/./Unary", "/pkg.Svc/Unary/.", "/pkg.Svc/x/../Unary", "/x/../pkg.Svc/Unary", `${ALLOWED}/../Unary`, "/pkg.Svc/Open/%2e%2e/Unary", "/pkg.Svc/Open/%2E%2E/Unary", "/pkg.Svc/Open/.%2e/Unary", "/pkg.Svc/%2e/Unary", "/a/b/../../pkg.Svc/Unary", "/../pkg.Svc/Unary",
  // matrix parameters, also on a dot segment
  `${DENIED};x=1`, `${DENIED};`, "/pkg.Svc;x=1/Unary", `${ALLOWED}/..;x=1/Unary`, "/pkg.Svc/Un;ary",
  // trailing slash, dots in the method, case variants
  `${DENIED}/`, `${DENIED}.`, "/pkg.Svc./Unary", "/pkg..Svc/Unary", "/pkg.Svc/unary", "/PKG.SVC/UNARY", "/pkg.svc/Unary", "/pkg.Svc/UNARY",
  // NUL and control characters, raw and encoded; whitespace
  `${DENIED}\u0000`, "/pkg.Svc/Un\u0000ary", `${DENIED}%00`, "/pkg.Svc/Un%00ary", `${DENIED}%0d%0a`, `${DENIED}%20`, `${DENIED}%09`, `${DENIED} `, ` ${DENIED}`, `${DENIED}\u007f`, `${DENIED}\t`,
  // encoded query and fragment markers
  `${DENIED}%3Fx=1`, `${DENIED}%23x`, `${DENIED}%3B`,
  // overlong UTF-8 ("/" as C0 AF and E0 80 AF, "U" as C1 95), other non-ASCII
  "/pkg.Svc%C0%AFUnary", "/pkg.Svc%E0%80%AFUnary", "/pkg.Svc/%C1%95nary", "/pkg.Svc/Unary\u00e9", "/pkg.Svc/\u00dcnary", "/pkg.Svc/Un%C3%A4ry", "/pkg.Svc/\uff35nary",
  // absolute form, no leading slash, oversized
  `http://localhost${DENIED}`, "pkg.Svc/Unary", `${DENIED}?${LONG}`, `/${LONG}/../pkg.Svc/Unary`, `/pkg.Svc/${LONG}`,
];

/** The JSON entry's rule paths (test/fixtures/path/judge.proto: GET /v1/secret is Unary) and their dressed forms. */
const JSON_FORMS: readonly string[] = [
  "/v1/secret", "/v1/secret?x=1", "/v1/secret#x", "/v1/%73ecret", "/v1/%73%65cret", "/%761/secret", "/v1/./secret", "/v1//secret", "//v1/secret",
  "/v1/open/../secret", "/v1/open/%2e%2e/secret", "/v1/x/..%2Fsecret", "/v1%2Fsecret", "/v1/secret%2F", "/v1\\secret", "/v1/secret;x=1", "/v1/open/..;x/secret",
  "/v1/secret/", "/V1/SECRET", "/v1/secret%00", "/v1/secret\u0000", "/v1/secret%20", "/v1/s%C0%AFecret", "/v1/secret\u00e9", `/v1/secret?${LONG}`,
];

const SV_X = Buffer.from([0x0a, 0x01, 0x78]); // google.protobuf.StringValue{value: "x"}
const RBAC = { rules: [{ name: "no-unary", action: "deny", methods: ["pkg.Svc/Unary"] }, { name: "svc", action: "allow", methods: ["pkg.Svc/*"] }], default: "deny" };

/** One request as an entry protocol sends it. */
interface Req {
  readonly method: string;
  readonly target: string;
  readonly headers: Record<string, string>;
  readonly body: Buffer;
}
/** What came back: the HTTP status (0: none), the fields, the body as the client reads it (-text decoded), or the reset. */
interface Reply {
  readonly status: number;
  readonly fields: Record<string, string>;
  readonly body: Buffer;
  readonly reset: number | undefined;
  readonly error: string | undefined;
}

/** An entry protocol: the request it makes for a target (its body, content type, the Connect GET query), and how a reply's body reads. */
interface Entry {
  readonly name: string;
  readonly transport: "h2" | "h1";
  make(target: string): Req;
  readonly decode?: ((body: Buffer) => Buffer) | undefined;
}

const grpcEntry: Entry = {
  name: "gRPC",
  transport: "h2",
  make: (t) => ({ method: "POST", target: t, headers: { "content-type": "application/grpc", te: "trailers" }, body: frame(SV_X) }),
};
const webEntry = (text: boolean, transport: "h2" | "h1"): Entry => ({
  name: `gRPC-Web ${text ? "text" : "binary"} ${transport === "h2" ? "HTTP/2" : "HTTP/1.1"}`,
  transport,
  make: (t) => ({
    method: "POST",
    target: t,
    headers: { "content-type": text ? "application/grpc-web-text" : "application/grpc-web+proto", "x-grpc-web": "1" },
    body: text ? Buffer.from(frame(SV_X).toString("base64")) : frame(SV_X),
  }),
  decode: text ? (b) => Buffer.from(b.toString("latin1").replace(/[^A-Za-z0-9+/=]/g, ""), "base64") : undefined,
});
const connectPost = (transport: "h2" | "h1"): Entry => ({
  name: `Connect POST ${transport === "h2" ? "HTTP/2" : "HTTP/1.1"}`,
  transport,
  make: (t) => ({ method: "POST", target: t, headers: { "content-type": "application/proto", "connect-protocol-version": "1" }, body: SV_X }),
});
const connectGet = (transport: "h2" | "h1"): Entry => ({
  name: `Connect GET ${transport === "h2" ? "HTTP/2" : "HTTP/1.1"}`,
  transport,
  make: (t) => ({ method: "GET", target: `${t}${t.includes("?") ? "&" : "?"}encoding=proto&base64=1&connect=v1&message=${SV_X.toString("base64url")}`, headers: {}, body: Buffer.alloc(0) }),
});
const jsonEntry = (transport: "h2" | "h1"): Entry => ({
  name: `JSON ${transport === "h2" ? "HTTP/2" : "HTTP/1.1"}`,
  transport,
  make: (t) => ({ method: "GET", target: t, headers: {}, body: Buffer.alloc(0) }),
});

/** Sends every request on one HTTP/2 connection at once. */
async function h2All(address: string, reqs: readonly (Req & { id: string })[], ca?: Buffer): Promise<Reply[]> {
  const session = ca === undefined ? http2.connect(`http://${address}`) : http2.connect(`https://${address}`, { ca, servername: "dojang.test" });
  session.on("error", () => {});
  try {
    return await Promise.all(
      reqs.map(
        (r) =>
          new Promise<Reply>((resolve) => {
            const fields: Record<string, string> = {};
            const chunks: Buffer[] = [];
            let error: string | undefined;
            let s: http2.ClientHttp2Stream;
            try {
              s = session.request({ ":method": r.method, ":path": r.target, "x-attack-id": r.id, "x-request-id": r.id, ...r.headers }, { endStream: r.body.length === 0 });
            } catch (err) {
              resolve({ status: 0, fields, body: Buffer.alloc(0), reset: undefined, error: (err as Error).message });
              return;
            }
            const keep = (h: http2.IncomingHttpHeaders): void => {
              for (const [k, v] of Object.entries(h)) if (typeof v === "string" || typeof v === "number") fields[k] = String(v);
            };
            s.on("response", keep);
            s.on("trailers", keep);
            s.on("data", (d: Buffer) => chunks.push(d));
            s.on("error", (err) => (error = err.message));
            s.on("close", () => resolve({ status: Number(fields[":status"] ?? 0), fields, body: Buffer.concat(chunks), reset: s.rstCode === 0 ? undefined : s.rstCode, error }));
            if (r.body.length > 0) s.end(r.body);
          }),
      ),
    );
  } finally {
    session.close();
  }
}

/** One HTTP/1.1 request on its own connection (plain, or TLS with ALPN http/1.1), the target written byte for byte. */
function h1One(address: string, r: Req & { id: string }, ca?: Buffer): Promise<Reply> {
  const i = address.lastIndexOf(":");
  const host = address.slice(0, i);
  const port = Number(address.slice(i + 1));
  return new Promise((resolve) => {
    const sock: net.Socket = ca === undefined ? net.connect(port, host) : tls.connect({ host, port, ca, servername: "dojang.test", ALPNProtocols: ["http/1.1"] });
    const got: Buffer[] = [];
    sock.on("data", (d: Buffer) => got.push(d));
    sock.on("error", () => {});
    const t = setTimeout(() => sock.destroy(), 10_000);
    sock.on("close", () => {
      clearTimeout(t);
      resolve(parseH1(Buffer.concat(got)));
    });
    const head = [`${r.method} ${r.target} HTTP/1.1`, "host: localhost", `x-attack-id: ${r.id}`, `x-request-id: ${r.id}`, "connection: close", ...Object.entries(r.headers).map(([k, v]) => `${k}: ${v}`)];
    if (r.method !== "GET") head.push(`content-length: ${r.body.length}`);
    // (not end(): node's HTTP server drops a request whose client half-closed before the answer)
    sock.once(ca === undefined ? "connect" : "secureConnect", () => sock.write(Buffer.concat([Buffer.from(head.join("\r\n") + "\r\n\r\n", "utf8"), r.body])));
  });
}

/** An HTTP/1.1 response read to its close: status, fields, body (chunked coding undone). */
function parseH1(b: Buffer): Reply {
  const end = b.indexOf("\r\n\r\n");
  if (end < 0) return { status: 0, fields: {}, body: b, reset: undefined, error: b.length === 0 ? "closed without a response" : "no response head" };
  const lines = b.subarray(0, end).toString("latin1").split("\r\n");
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(lines[0]!)?.[1] ?? 0);
  const fields: Record<string, string> = {};
  for (const l of lines.slice(1)) {
    const c = l.indexOf(":");
    fields[l.slice(0, c).trim().toLowerCase()] = l.slice(c + 1).trim();
  }
  let body = b.subarray(end + 4);
  if (fields["transfer-encoding"] === "chunked") {
    const parts: Buffer[] = [];
    let at = 0;
    for (;;) {
      const nl = body.indexOf("\r\n", at);
      if (nl < 0) break;
      const n = parseInt(body.subarray(at, nl).toString("latin1"), 16);
      if (!(n > 0)) break;
      parts.push(body.subarray(nl + 2, nl + 2 + n));
      at = nl + 2 + n + 2;
    }
    body = Buffer.concat(parts);
  }
  return { status, fields, body, reset: undefined, error: undefined };
}

/** Sends `targets` through `entry` to `address`; the replies keyed by the attack id each request carried. */
async function attack(entry: Entry, address: string, targets: readonly string[], tag: string, ca?: Buffer): Promise<Map<string, { target: string; reply: Reply }>> {
  const reqs = targets.map((t, i) => ({ ...entry.make(t), id: `${tag}#${i}` }));
  // (a target with CR or LF would be a second request line on HTTP/1.1: HTTP/2 carries those)
  const sendable = entry.transport === "h1" ? reqs.filter((r) => !/[\r\n]/.test(r.target)) : reqs;
  const replies = entry.transport === "h2" ? await h2All(address, sendable, ca) : await Promise.all(sendable.map((r) => h1One(address, r, ca)));
  const out = new Map<string, { target: string; reply: Reply }>();
  sendable.forEach((r, i) => {
    const reply = replies[i]!;
    out.set(r.id, { target: targets[Number(r.id.slice(r.id.indexOf("#") + 1))]!, reply: entry.decode === undefined ? reply : { ...reply, body: entry.decode(reply.body) } });
  });
  return out;
}

function sentBy(r: { target: string; entry: string; listener: string } | undefined): string {
  return r === undefined ? "?" : `${r.listener} ${r.entry} ${JSON.stringify(r.target.slice(0, 80))}`;
}

// === the setup: one dojang, five listeners, the judge behind ===

let judge: Judge;
let px: DojangHandle;
let certs: CertDir;
let ca: Ca;
let server: CertFiles;
const log = memoryLogger();

beforeAll(async () => {
  judge = await startJudge();
  certs = new CertDir();
  ca = certs.ca("paths-ca");
  server = certs.leaf(ca, "server", { cn: "dojang.test", dns: ["dojang.test"], ip: ["127.0.0.1"] });
  const json = { descriptorSet: descriptorSet(join(REPO_ROOT, "test", "fixtures", "path", "judge.proto"), "path-judge.binpb") };
  const rbacRoutes = [{ match: { prefix: "/" }, cluster: "connect-go", rbac: RBAC }];
  // the per-method route: every call it takes is denied; the catch-all after it has no rules
  const methodRoutes = [{ match: { path: DENIED }, cluster: "connect-go", rbac: { default: "deny" } }, { match: { prefix: "/" }, cluster: "connect-go" }];
  const bridges = { grpcWeb: true, connect: true };
  const tlsFiles = { certFile: server.certFile, keyFile: server.keyFile };
  px = await startDojang({
    logger: log.logger,
    config: {
      listeners: [
        { name: "rbac", address: "127.0.0.1:0", http1Address: "127.0.0.1:0", ...bridges, jsonTranscoding: json, routes: rbacRoutes },
        { name: "route", address: "127.0.0.1:0", http1Address: "127.0.0.1:0", ...bridges, jsonTranscoding: json, routes: methodRoutes },
        { name: "rbac-tls", address: "127.0.0.1:0", ...bridges, tls: tlsFiles, routes: rbacRoutes },
        { name: "route-tls", address: "127.0.0.1:0", ...bridges, tls: tlsFiles, routes: methodRoutes },
        { name: "grpc-go", address: "127.0.0.1:0", ...bridges, routes: [{ match: { prefix: "/" }, cluster: "grpc-go", rbac: RBAC }] },
      ],
      clusters: [
        { name: "connect-go", endpoints: [judge.connect] },
        { name: "grpc-go", endpoints: [judge.grpc] },
      ],
      journal: 20_000,
    },
  });
}, 60_000);

afterAll(async () => {
  await px?.close(0);
  judge?.child.stdin?.end();
  certs?.remove();
});

/** Every (listener, entry, targets) the attack runs. */
function plan(): { listener: string; address: string; entry: Entry; targets: readonly string[]; ca?: Buffer }[] {
  const out: ReturnType<typeof plan> = [];
  const d = px.instance;
  for (const l of ["rbac", "route"]) {
    const h2 = d.address(l);
    const h1 = d.http1Address(l);
    out.push({ listener: l, address: h2, entry: grpcEntry, targets: FORMS });
    for (const text of [false, true]) {
      out.push({ listener: l, address: h2, entry: webEntry(text, "h2"), targets: FORMS });
      out.push({ listener: l, address: h1, entry: webEntry(text, "h1"), targets: FORMS });
    }
    for (const [t, a] of [["h2", h2], ["h1", h1]] as const) {
      out.push({ listener: l, address: a, entry: connectPost(t), targets: FORMS });
      out.push({ listener: l, address: a, entry: connectGet(t), targets: FORMS });
      out.push({ listener: l, address: a, entry: jsonEntry(t), targets: JSON_FORMS });
    }
  }
  for (const l of ["rbac-tls", "route-tls"]) {
    const a = d.address(l);
    out.push({ listener: l, address: a, entry: grpcEntry, targets: FORMS, ca: ca.cert });
    out.push({ listener: l, address: a, entry: webEntry(false, "h1"), targets: FORMS, ca: ca.cert });
    out.push({ listener: l, address: a, entry: connectPost("h1"), targets: FORMS, ca: ca.cert });
    out.push({ listener: l, address: a, entry: connectPost("h2"), targets: FORMS, ca: ca.cert });
  }
  const g = d.address("grpc-go");
  for (const e of [grpcEntry, webEntry(false, "h2"), connectPost("h2")]) out.push({ listener: "grpc-go", address: g, entry: e, targets: FORMS });
  return out;
}

describe("attack: a denied method's :path, dressed, through every entry protocol", () => {
  it("never reaches the denied method: denied or refused before the upstream, and what reaches an upstream is the one canonical name", { timeout: 240_000 }, async () => {
    await judge.reset();
    const replies = new Map<string, { target: string; reply: Reply; entry: string; listener: string }>();
    const served: string[] = [];
    // one (listener, entry) at a time: each one's requests go at once, on one connection where it has one
    for (const [k, p] of plan().entries()) {
      // the first target is the allowed method, plain: it must be served (the harness is not blind)
      const got = await attack(p.entry, p.address, [p.entry.name.startsWith("JSON") ? "/v1/open" : ALLOWED, ...p.targets], `${k}`, p.ca);
      for (const [id, r] of got) replies.set(id, { ...r, entry: p.entry.name, listener: p.listener });
      const control = got.get(`${k}#0`)!.reply;
      served.push(`${p.listener} ${p.entry.name}: ${control.body.includes("/pkg.Svc/Open:") ? "served" : `not served (${control.status} ${control.error ?? ""} ${control.body.toString("latin1").slice(0, 120)})`}`);
    }
    const counts = await judge.counts();
    const records = new Map<string, string>();
    for (const rec of px.calls) if (rec.request_id !== undefined) records.set(rec.request_id, rec.path);

    // 0. every entry served the allowed method
    expect(served.filter((x) => !x.endsWith(": served"))).toEqual([]);
    expect(served).toHaveLength(33);
    // 1. the denied method's handler never ran, on connect-go nor grpc-go
    const reachedDenied = counts.requests.filter((x) => x.path === DENIED).map((x) => `${x.server} ${x.uri.slice(0, 80)} ← ${sentBy(replies.get(x.id))}`);
    expect(counts.handled[`connect ${DENIED}`] ?? 0, reachedDenied.join("\n")).toBe(0);
    expect(counts.handled[`grpc ${DENIED}`] ?? 0, reachedDenied.join("\n")).toBe(0);
    // 2. whatever reached an upstream is in the grammar, undressed (its URI is its decoded path),
    // not the denied method, and the name dojang's access record shows for that call
    const dressed = counts.requests.filter((x) => !GRAMMAR.test(x.uri) || x.uri !== x.path || x.path === DENIED || records.get(x.id) !== x.path);
    expect(dressed.map((x) => `${x.server} ${JSON.stringify(x.uri.slice(0, 80))} (record ${JSON.stringify(records.get(x.id))}) ← ${sentBy(replies.get(x.id))}`)).toEqual([]);
    // 3. no client read the denied method's answer
    const leaked = [...replies.entries()].filter(([, r]) => r.reply.body.includes(DENIED_ANSWER)).map(([id, r]) => `${id} ${r.listener} ${r.entry} ${JSON.stringify(r.target)}`);
    expect(leaked).toEqual([]);
    console.log(`attack-paths: ${FORMS.length} forms (${JSON_FORMS.length} for JSON) × ${served.length} entries: ${replies.size} requests; ${counts.requests.length} reached an upstream (each in the grammar, none ${DENIED})`);
  });

  it("what each protocol answers: gRPC and gRPC-Web refuse a path outside the grammar with 12 (grpc-go's words), Connect normalises the URL and is denied 403, a plain call is served", { timeout: 60_000 }, async () => {
    const d = px.instance;
    await judge.reset();
    // native gRPC: refused as grpc-go's server refuses it, nothing sent upstream, the query not echoed
    const g = await h2All(d.address("rbac"), [
      { ...grpcEntry.make("/pkg.Svc/Un%61ry"), id: "g1" },
      { ...grpcEntry.make(`${DENIED}?access_token=t0ken`), id: "g2" },
      { ...grpcEntry.make(DENIED), id: "g3" },
      { ...grpcEntry.make(ALLOWED), id: "g4" },
    ]);
    expect([g[0]!.fields["grpc-status"], decodeURIComponent(g[0]!.fields["grpc-message"] ?? "")]).toEqual(["12", 'malformed method name: "/pkg.Svc/Un%61ry"']);
    expect([g[1]!.fields["grpc-status"], decodeURIComponent(g[1]!.fields["grpc-message"] ?? "")]).toEqual(["12", 'malformed method name: "/pkg.Svc/Unary?<redacted>"']);
    expect(g[2]!.fields["grpc-status"]).toBe("7");
    expect([g[3]!.fields["grpc-status"], g[3]!.body.subarray(5).toString("latin1")]).toEqual(["0", "\n\u000f/pkg.Svc/Open:x"]);
    // gRPC-Web over HTTP/1.1: the same
    const w = await h1One(d.http1Address("rbac"), { ...webEntry(false, "h1").make("/pkg.Svc/Un%61ry"), id: "w1" });
    expect([w.status, w.fields["grpc-status"]]).toEqual([200, "12"]);
    // Connect takes a URL: normalised, the query dropped, then the rules see the one name
    const c = await h2All(d.address("rbac"), [
      { ...connectPost("h2").make("/pkg.Svc/Un%61ry"), id: "c1" },
      { ...connectPost("h2").make(`${ALLOWED}?access_token=t0ken`), id: "c2" },
      { ...connectPost("h2").make("/pkg.Svc/Open/../Unary"), id: "c3" },
      { ...connectPost("h2").make("/pkg.Svc%2FUnary"), id: "c4" },
    ]);
    expect(c.map((r) => r.status)).toEqual([403, 200, 403, 404]);
    expect(c[1]!.body.toString("latin1")).toBe("\n\u000f/pkg.Svc/Open:x");
    // a fault rule on ":path" reads the same one name (a Connect URL's query is not part of it)
    px.faults.add({ id: "open-by-path", match: { metadata: [{ name: ":path", equals: ALLOWED }] }, action: { kind: "abort", code: "UNAVAILABLE", message: "by path" } });
    try {
      const fr = await h2All(d.address("rbac"), [{ ...connectPost("h2").make(`${ALLOWED}?x=1`), id: "f1" }, { ...connectPost("h2").make("/pkg.Svc/Op%65n"), id: "f2" }]);
      expect(fr.map((x) => x.status)).toEqual([503, 503]);
    } finally {
      px.faults.remove("open-by-path");
    }
    // the same name through the per-method route: its rules deny it there
    const r = await h2All(d.address("route"), [{ ...connectPost("h2").make("/pkg.Svc/Un%61ry"), id: "r1" }, { ...grpcEntry.make(`${DENIED}?x=1`), id: "r2" }]);
    expect([r[0]!.status, r[1]!.fields["grpc-status"]]).toEqual([403, "12"]);
    const counts = await judge.counts();
    // only the two allowed calls went upstream, and the query did not go with them
    expect(counts.requests.map((s) => `${s.server} ${s.uri}`).sort()).toEqual([`connect ${ALLOWED}`, `connect ${ALLOWED}`]);
  });

  it("a duplicated :path (the second one the denied method) is reset by the HTTP/2 layer, and never reaches the upstream", { timeout: 30_000 }, async () => {
    await judge.reset();
    const c = await connectRawH2(px.instance.address("rbac"));
    try {
      const fields = grpcRequestFields(ALLOWED);
      const i = fields.findIndex(([n]) => n === ":path");
      fields.splice(i + 1, 0, [":path", DENIED]);
      c.headers(1, fields);
      c.data(1, frame(SV_X), true);
      const t0 = performance.now();
      while (!c.ended(1) && performance.now() - t0 < 5000) await new Promise((res) => setTimeout(res, 10));
      // RST_STREAM PROTOCOL_ERROR, no response head
      expect(c.on(1).filter((f) => f.type === 3 || f.type === 1).map((f) => [f.type, f.errorCode])).toEqual([[3, 1]]);
    } finally {
      c.close();
    }
    expect((await judge.counts()).requests).toEqual([]);
  });
});
