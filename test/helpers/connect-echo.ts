// test.Echo for the Connect tests: the service schema connect-es needs (messages are
// google.protobuf.StringValue; Unary is marked idempotent so a client may use GET), and a
// @grpc/grpc-js upstream that answers in either codec dojang forwards: application/grpc (proto)
// or application/grpc+json (a JSON StringValue is a bare JSON string). grpc-js hands the handler
// raw bytes (peers.ts's ECHO_SERVICE); the first byte tells the codecs apart ('"' is JSON).
import * as grpc from "@grpc/grpc-js";
export { echoClient, echoFile, echoService } from "./connect-echo-schema.js";

/** google.protobuf.StringValue in either codec: [value, json?]. */
export function readValue(b: Buffer): [string, boolean] {
  if (b.length > 0 && b[0] === 0x22) return [JSON.parse(b.toString()) as string, true];
  if (b.length === 0) return ["", false];
  let i = 1;
  let len = 0;
  for (let shift = 0; ; shift += 7) {
    const x = b[i++]!;
    len |= (x & 0x7f) << shift;
    if ((x & 0x80) === 0) break;
  }
  return [b.subarray(i, i + len).toString(), false];
}

export function writeValue(s: string, json: boolean): Buffer {
  if (json) return Buffer.from(JSON.stringify(s));
  const v = Buffer.from(s);
  const len: number[] = [];
  let n = v.length;
  while (n >= 0x80) {
    len.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  len.push(n);
  return Buffer.concat([Buffer.from([0x0a, ...len]), v]);
}

/** google.rpc.Status{code, message, details:[Any{type_url, value}]} for grpc-status-details-bin. */
export function statusDetails(code: number, message: string, typeUrl: string, value: Buffer): Buffer {
  const ld = (field: number, b: Buffer): Buffer => Buffer.concat([Buffer.from([(field << 3) | 2, b.length]), b]);
  const any = Buffer.concat([ld(1, Buffer.from(typeUrl)), ld(2, value)]);
  return Buffer.concat([Buffer.from([0x08, code]), ld(2, Buffer.from(message)), ld(3, any)]);
}

export const NON_ASCII = "잘못된 요청: ✓ ünïcode";

/**
 * The upstream's behaviour, by the request's value: "fail" → 3 INVALID_ARGUMENT with a non-ASCII
 * message and a detail; "slow" → answers after 5 s; "meta" → echoes x-echo as a header and a
 * trailer; anything else → "echo: <value>" (or "<value> <i>" three times for ServerStream; the
 * values joined for ClientStream).
 */
export const echoImpl: grpc.UntypedServiceImplementation = {
  Unary: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
    const [s, json] = readValue(call.request);
    if (s === "fail") {
      const md = new grpc.Metadata();
      md.set("grpc-status-details-bin", statusDetails(3, NON_ASCII, "type.googleapis.com/google.protobuf.StringValue", writeValue("why", false)));
      md.set("x-fail", "yes");
      return cb({ code: grpc.status.INVALID_ARGUMENT, details: NON_ASCII, metadata: md });
    }
    if (s === "slow") return void setTimeout(() => cb(null, writeValue("late", json)), 5000);
    if (s === "meta") {
      const h = new grpc.Metadata();
      h.set("x-echo", String(call.metadata.get("x-echo")[0] ?? ""));
      call.sendMetadata(h);
      const t = new grpc.Metadata();
      t.set("x-trailer", "t1");
      const d = call.getDeadline();
      const at = d instanceof Date ? d.getTime() : Number(d);
      t.set("x-deadline-left-ms", Number.isFinite(at) ? String(Math.round(at - Date.now())) : "none");
      return cb(null, writeValue(`encoding=${String(call.metadata.get("grpc-encoding")[0] ?? "")}`, json), t);
    }
    cb(null, writeValue(`echo: ${s}`, json));
  },
  ServerStream: (call: grpc.ServerWritableStream<Buffer, Buffer>) => {
    const [s, json] = readValue(call.request);
    if (s === "fail") {
      call.write(writeValue("first", json));
      return void setTimeout(() => call.emit("error", { code: grpc.status.PERMISSION_DENIED, details: "no more" }), 20);
    }
    let i = 0;
    const t = setInterval(() => {
      call.write(writeValue(`${s} ${i}`, json));
      if (++i === 3) {
        clearInterval(t);
        const md = new grpc.Metadata();
        md.set("x-count", "3");
        call.end(md);
      }
    }, 20);
  },
  ClientStream: (call: grpc.ServerReadableStream<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
    const got: string[] = [];
    let json = false;
    call.on("data", (b: Buffer) => {
      const [v, j] = readValue(b);
      got.push(v);
      json = j;
    });
    call.on("end", () => cb(null, writeValue(got.join(","), json)));
  },
  Bidi: (call: grpc.ServerDuplexStream<Buffer, Buffer>) => {
    call.on("data", (b: Buffer) => {
      const [v, j] = readValue(b);
      call.write(writeValue(`re: ${v}`, j));
    });
    call.on("end", () => call.end());
  },
};
