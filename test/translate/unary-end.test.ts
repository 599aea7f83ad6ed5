// How a side call's unary response ends (src/translate/unary-end.ts): the status from the head, the
// trailers, a reset or the connection, by the tables grpc-go's client uses (HTTPStatusConvTab,
// http2ErrConvTab), and the response's one message.
import { describe, expect, it } from "vitest";
import { decideUnaryEnd, unaryMessage, type UnaryEndFacts } from "../../src/translate/unary-end.js";

const GRPC = { status: 200, contentType: "application/grpc", grpcStatus: undefined, endStream: false };
const none: UnaryEndFacts = { head: undefined, headMessage: undefined, trailers: false, trailerStatus: undefined, trailerMessage: undefined, rstCode: undefined, sessionLost: false, connectionError: undefined, refused: false };
const code = (f: Partial<UnaryEndFacts>): number => decideUnaryEnd({ ...none, ...f }).code;

describe("decideUnaryEnd", () => {
  it("an answer: the trailers' grpc-status and its decoded grpc-message, or a Trailers-Only head's", () => {
    expect(decideUnaryEnd({ ...none, head: GRPC, trailers: true, trailerStatus: "0", rstCode: 0 })).toEqual({ code: 0, message: "" });
    expect(decideUnaryEnd({ ...none, head: GRPC, trailers: true, trailerStatus: "14", trailerMessage: "redis%20down", rstCode: 0 })).toEqual({ code: 14, message: "redis down" });
    expect(decideUnaryEnd({ ...none, head: { ...GRPC, grpcStatus: "7", endStream: true }, headMessage: "no", rstCode: 0 })).toEqual({ code: 7, message: "no" });
    // an unparsable grpc-status is 2 (grpc-go: malformed grpc-status); trailers without one too
    expect(code({ head: GRPC, trailers: true, trailerStatus: "x", rstCode: 0 })).toBe(2);
    expect(code({ head: GRPC, trailers: true, rstCode: 0 })).toBe(2);
  });

  it("a head that is no gRPC answer: its HTTP status by HTTPStatusConvTab, a foreign content-type 2, END_STREAM without grpc-status 2", () => {
    expect(code({ head: { status: 503, contentType: undefined, grpcStatus: undefined, endStream: true }, rstCode: 0 })).toBe(14);
    expect(code({ head: { status: 401, contentType: "text/html", grpcStatus: undefined, endStream: false }, rstCode: 0 })).toBe(16);
    expect(code({ head: { status: 200, contentType: "text/html", grpcStatus: undefined, endStream: false }, rstCode: 0 })).toBe(2);
    expect(code({ head: { ...GRPC, endStream: true }, rstCode: 0 })).toBe(2);
  });

  it("no answer: a reset by http2ErrConvTab (REFUSED_STREAM 14, CANCEL 1, others 13 or their own), a refused stream 14, a lost connection 14", () => {
    expect(code({ rstCode: 7 })).toBe(14);
    expect(code({ rstCode: 8 })).toBe(1);
    expect(code({ rstCode: 0 })).toBe(13);
    expect(code({ rstCode: 2 })).toBe(13);
    expect(code({ rstCode: 11 })).toBe(8);
    expect(code({ rstCode: 12 })).toBe(7);
    expect(code({ rstCode: 0, refused: true })).toBe(14);
    // node reports a lost connection as the stream's CANCEL: the session decides
    expect(code({ rstCode: 8, sessionLost: true })).toBe(14);
    // the head came, then no trailers: END_STREAM on DATA is 13, the connection's loss 14
    expect(code({ head: GRPC, rstCode: 0 })).toBe(13);
    expect(code({ head: GRPC, rstCode: 8, sessionLost: true })).toBe(14);
  });

  it("a connection that ended with an HTTP/2 error code takes it through http2ErrConvTab (13 for PROTOCOL_ERROR), not 14", () => {
    expect(decideUnaryEnd({ ...none, rstCode: 1, sessionLost: true, connectionError: 1 })).toEqual({ code: 13, message: "connection error: PROTOCOL_ERROR" });
    expect(code({ head: GRPC, rstCode: 2, sessionLost: true, connectionError: 2 })).toBe(13);
    expect(code({ rstCode: 11, sessionLost: true, connectionError: 11 })).toBe(8);
    // NO_ERROR is no error: the loss decides
    expect(code({ rstCode: 0, sessionLost: true, connectionError: 0 })).toBe(14);
  });
});

describe("unaryMessage", () => {
  const framed = (flag: number, len: number, body: number[]) => Uint8Array.from([flag, len >>> 24, (len >>> 16) & 255, (len >>> 8) & 255, len & 255, ...body]);
  it("the one uncompressed message, as a view", () => {
    const b = framed(0, 3, [1, 2, 3]);
    const m = unaryMessage(b) as Uint8Array;
    expect([...m]).toEqual([1, 2, 3]);
    expect(m.buffer).toBe(b.buffer);
    expect([...(unaryMessage(framed(0, 0, [])) as Uint8Array)]).toEqual([]);
  });
  it("none, cut short, compressed, a bad flag, two: why not", () => {
    expect(unaryMessage(new Uint8Array(0))).toBe("no response message");
    expect(unaryMessage(Uint8Array.from([0, 0, 0]))).toBe("response message cut short");
    expect(unaryMessage(framed(0, 100, [1, 2]))).toBe("response message cut short");
    expect(unaryMessage(framed(1, 1, [1]))).toBe("compressed response message, but no grpc-encoding was offered");
    expect(unaryMessage(framed(2, 1, [1]))).toBe("bad compressed flag 2");
    expect(unaryMessage(Uint8Array.from([...framed(0, 1, [1]), ...framed(0, 1, [2])]))).toBe("more than one response message");
  });
});
