// Real peers for behaviour tests, all on 127.0.0.1 port 0: a @grpc/grpc-js server and client
// with a byte-level Echo service (no protobuf: the proxy never looks inside messages), a raw
// node:http2 upstream for misbehaviour, and dojang itself in-process.
import * as grpc from "@grpc/grpc-js";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { startDojang, type DojangHandle } from "../../src/index.js";

const id = (b: Buffer): Buffer => b;

export type Kind = "unary" | "client" | "server" | "bidi";
const KINDS: Record<Kind, [boolean, boolean]> = { unary: [false, false], client: [true, false], server: [false, true], bidi: [true, true] };

/** Service "test.Echo" with methods Unary, ClientStream, ServerStream, Bidi (Buffer in/out). */
export const ECHO_SERVICE: grpc.ServiceDefinition = {
  Unary: def("/test.Echo/Unary", "unary"),
  ClientStream: def("/test.Echo/ClientStream", "client"),
  ServerStream: def("/test.Echo/ServerStream", "server"),
  Bidi: def("/test.Echo/Bidi", "bidi"),
};

function def(path: string, kind: Kind): grpc.MethodDefinition<Buffer, Buffer> {
  const [requestStream, responseStream] = KINDS[kind];
  return { path, requestStream, responseStream, requestSerialize: id, requestDeserialize: id, responseSerialize: id, responseDeserialize: id, originalName: path };
}

export interface GrpcServer {
  readonly address: string;
  readonly server: grpc.Server;
  close(): Promise<void>;
}

export async function startGrpcServer(impl: grpc.UntypedServiceImplementation, opts: grpc.ServerOptions = {}): Promise<GrpcServer> {
  const server = new grpc.Server({ "grpc.max_receive_message_length": -1, "grpc.max_send_message_length": -1, ...opts });
  server.addService(ECHO_SERVICE, impl);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  return {
    address: `127.0.0.1:${port}`,
    server,
    close: () => new Promise<void>((r) => server.tryShutdown(() => r())).then(() => server.forceShutdown()),
  };
}

export type EchoClient = grpc.Client & {
  Unary: (req: Buffer, md: grpc.Metadata, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res?: Buffer) => void) => grpc.ClientUnaryCall;
  ClientStream: (md: grpc.Metadata, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res?: Buffer) => void) => grpc.ClientWritableStream<Buffer>;
  ServerStream: (req: Buffer, md: grpc.Metadata, opts: grpc.CallOptions) => grpc.ClientReadableStream<Buffer>;
  Bidi: (md: grpc.Metadata, opts: grpc.CallOptions) => grpc.ClientDuplexStream<Buffer, Buffer>;
};

const EchoCtor = grpc.makeGenericClientConstructor(ECHO_SERVICE, "Echo");

export function echoClient(address: string, opts: grpc.ClientOptions = {}): EchoClient {
  return new EchoCtor(address, grpc.credentials.createInsecure(), {
    "grpc.max_receive_message_length": -1,
    "grpc.max_send_message_length": -1,
    // Retries would hide what the proxy sent; tests that want them turn them on.
    "grpc.enable_retries": 0,
    ...opts,
  }) as unknown as EchoClient;
}

export interface UnaryResult {
  err: grpc.ServiceError | null;
  res: Buffer | undefined;
  metadata: grpc.Metadata | undefined;
  status: grpc.StatusObject | undefined;
}

/** One unary call; resolves with the error or response, never rejects. */
export function unary(c: EchoClient, req: Buffer, md = new grpc.Metadata(), opts: grpc.CallOptions = {}, method = "Unary"): Promise<UnaryResult> {
  return new Promise((resolve) => {
    let metadata: grpc.Metadata | undefined;
    let status: grpc.StatusObject | undefined;
    let result: { err: grpc.ServiceError | null; res: Buffer | undefined } | undefined;
    const done = (): void => {
      if (result !== undefined && status !== undefined) resolve({ ...result, metadata, status });
    };
    const fn = (c as unknown as Record<string, EchoClient["Unary"]>)[method]!.bind(c);
    const call = fn(req, md, opts, (err, res) => {
      result = { err, res };
      done();
    });
    call.on("metadata", (m) => (metadata = m));
    call.on("status", (s) => {
      status = s;
      done();
    });
  });
}

export interface RawUpstream {
  readonly address: string;
  readonly server: http2.Http2Server;
  /** request headers of every stream seen */
  readonly seen: { headers: http2.IncomingHttpHeaders; raw: string[]; body: Buffer[]; rstCode?: number }[];
  close(): Promise<void>;
}

/** A raw upstream's plainest answer (startRawUpstream's onStream): one empty message, then grpc-status 0. */
export function okWithMessage(s: http2.ServerHttp2Stream): void {
  s.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true });
  s.on("wantTrailers", () => s.sendTrailers({ "grpc-status": "0" }));
  s.end(Buffer.alloc(5));
}

/** A raw node:http2 upstream: `onStream` scripts its behaviour (respond, reset, stall …). */
export async function startRawUpstream(
  onStream: (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, seen: RawUpstream["seen"][number]) => void,
  settings: http2.Settings = {},
): Promise<RawUpstream> {
  const seen: RawUpstream["seen"] = [];
  const server = http2.createServer({ settings });
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on("session", (s) => {
    sessions.add(s);
    s.on("close", () => sessions.delete(s));
    s.on("error", () => {});
  });
  server.on("stream", (stream, headers, _flags, raw) => {
    const rec: RawUpstream["seen"][number] = { headers, raw: raw as unknown as string[], body: [] };
    seen.push(rec);
    stream.on("data", (d: Buffer) => rec.body.push(d));
    stream.on("error", () => {});
    stream.on("close", () => (rec.rstCode = stream.rstCode));
    onStream(stream, headers, rec);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  return {
    address: `127.0.0.1:${port}`,
    server,
    seen,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sessions) s.destroy();
        server.close(() => r());
      }),
  };
}

export interface ProxyOptions {
  readonly route?: Record<string, unknown>;
  readonly cluster?: Record<string, unknown>;
  readonly listener?: Record<string, unknown>;
  readonly top?: Record<string, unknown>;
  readonly admin?: boolean;
}

/** dojang in-process in front of `upstream` ("host:port"), one catch-all route. */
export function startProxy(upstream: string, o: ProxyOptions = {}): Promise<DojangHandle> {
  return startDojang({
    logLevel: "silent",
    config: {
      ...(o.admin === false ? {} : { admin: { address: "127.0.0.1:0" } }),
      listeners: [
        {
          name: "main",
          address: "127.0.0.1:0",
          routes: [{ match: { prefix: "/" }, cluster: "backend", ...o.route }],
          ...o.listener,
        },
      ],
      clusters: [{ name: "backend", endpoints: [upstream], ...o.cluster }],
      ...o.top,
    },
  });
}

/** A framed gRPC message (5-byte prefix + payload). */
export function frame(payload: Buffer, flag = 0): Buffer {
  const b = Buffer.allocUnsafe(5 + payload.length);
  b[0] = flag;
  b.writeUInt32BE(payload.length, 1);
  payload.copy(b, 5);
  return b;
}

/** Raw h2 client call through the proxy: returns what arrived, frame by frame. */
export interface RawResult {
  headers: http2.IncomingHttpHeaders | undefined;
  headersFlags: number | undefined;
  trailers: http2.IncomingHttpHeaders | undefined;
  data: Buffer;
  rstCode: number | undefined;
}

export function rawCall(
  address: string,
  headers: http2.OutgoingHttpHeaders,
  body: Buffer | undefined,
  opts: { endStream?: boolean; session?: http2.ClientHttp2Session } = {},
): Promise<RawResult> {
  const session = opts.session ?? http2.connect(`http://${address}`);
  if (opts.session === undefined) session.on("error", () => {});
  return new Promise((resolve) => {
    const req = session.request(
      { ":method": "POST", ":path": "/test.Echo/Unary", "content-type": "application/grpc", te: "trailers", ...headers },
      { endStream: body === undefined && opts.endStream !== false },
    );
    const out: RawResult = { headers: undefined, headersFlags: undefined, trailers: undefined, data: Buffer.alloc(0), rstCode: undefined };
    const chunks: Buffer[] = [];
    req.on("response", (h, flags) => {
      out.headers = h;
      out.headersFlags = flags;
    });
    req.on("trailers", (t) => (out.trailers = t));
    req.on("data", (d: Buffer) => chunks.push(d));
    req.on("error", () => {});
    req.on("close", () => {
      out.data = Buffer.concat(chunks);
      out.rstCode = req.rstCode;
      if (opts.session === undefined) session.close();
      resolve(out);
    });
    if (body !== undefined) req.end(body);
  });
}

/** The grpc-status a client would read: from trailers, or from Trailers-Only headers. */
export function statusOf(r: RawResult): string | undefined {
  const v = r.trailers?.["grpc-status"] ?? r.headers?.["grpc-status"];
  return typeof v === "string" ? v : undefined;
}

export async function scrape(adminAddress: string | undefined): Promise<string> {
  const res = await fetch(`http://${adminAddress}/metrics`);
  return res.text();
}

/** Value of one sample line in Prometheus text, matching all given labels; 0 if absent. */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  let total = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (rest[0] !== "{" && rest[0] !== " ") continue;
    if (!Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) continue;
    total += Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return total;
}
