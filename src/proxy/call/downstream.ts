// The client side of a call, as a contract: what call.ts (and, through FilterCall, a filter)
// reads and calls on the stream a call answers. node:http2's ServerHttp2Stream satisfies it as
// it is (no wrapper, no allocation on the native path); the gRPC-Web adapter
// (src/proxy/downstream/grpc-web.ts) implements it and translates, instead of posing as an
// HTTP/2 stream. Types only; must not import src/proxy/downstream or src/proxy/filters.
import type { Socket } from "node:net";
import type { DecidedBy, Outcome } from "../../translate/index.js";
import type { OutgoingHeaders, kClientCert, kRequestBytes } from "./headers.js";

/** The client connection a call's stream belongs to: an HTTP/2 session, or an HTTP/1.1 socket's stand-in. */
export interface ClientConnection {
  /** the connection's socket (a rate limit keyed by the client's address) */
  readonly socket: Socket;
  /** drops the whole connection */
  destroy(): void;
  readonly closed?: boolean;
  readonly destroyed?: boolean;
  /** HTTP/2 only: GOAWAY (a fault filter's) */
  goaway?(code: number, lastStreamId: number): void;
  /** the verified client certificate as an x-forwarded-client-cert value (a TLS listener with client certificates) */
  [kClientCert]?: string;
  /** request body bytes this connection delivered to its calls (the listener's unproductive-bytes guard) */
  [kRequestBytes]?: number;
}

/** respond()'s options, as node:http2 reads them. */
export interface RespondOptions {
  readonly endStream?: boolean;
  /** trailers follow: 'wantTrailers' is emitted after end(), and sendTrailers() answers it */
  readonly waitForTrailers?: boolean;
}

/** The events a call listens to on its client side. */
export type DownstreamEvent = "data" | "end" | "drain" | "wantTrailers" | "close" | "error";

/**
 * One call's client stream. The request body arrives as 'data' chunks and 'end' (flow-controlled
 * by pause/resume, read only once a listener for 'data' is on); the response goes out as
 * respond() (a head, Trailers-Only with endStream), write()s, end(), and sendTrailers() in
 * 'wantTrailers'; 'close' comes once, last, with `aborted`/`rstCode` telling a complete stream
 * from a reset one.
 */
export interface Downstream {
  /** the HTTP/2 stream id (undefined over HTTP/1.1) */
  readonly id?: number | undefined;
  readonly session: ClientConnection | undefined;
  readonly closed: boolean;
  readonly destroyed: boolean;
  /** the stream was reset or cut before it completed */
  readonly aborted: boolean;
  readonly writableEnded: boolean;
  readonly readableEnded: boolean;
  readonly rstCode: number | undefined;
  /** response bytes queued and not yet taken by the client (the response-buffer guard) */
  readonly writableLength: number;
  /**
   * The response head: a header object, or node's flat name/value list (what a native stream
   * copies least; the call gives the list only to a native stream, Call.clientProtocol undefined).
   */
  respond(head: OutgoingHeaders | readonly string[], options?: RespondOptions): void;
  write(chunk: Buffer, cb?: (err?: Error | null) => void): boolean;
  /** ends the response body (`chunk`: a last piece, written as it is) */
  end(chunk?: Buffer | string): unknown;
  sendTrailers(trailers: OutgoingHeaders): void;
  /** RST_STREAM(code) on HTTP/2; NO_ERROR after a complete response only stops reading the request */
  close(code?: number): void;
  pause(): unknown;
  resume(): unknown;
  on(event: DownstreamEvent, listener: (...args: any[]) => void): unknown;
}

/**
 * What a client side that translates (a bridge: src/proxy/downstream/bridge.ts) may ask of the
 * call it serves, and nothing more: end it with dojang's own status (a request body its protocol
 * cannot read, a response it cannot translate), read the route's request-message limit (a body
 * it must hold whole), and, once the call is decided, who decided it (an HTTP status that tells a
 * local reply from the upstream's). The Call implements it.
 */
export interface DownstreamOwner {
  finish(o: Outcome): void;
  /** the call's route (undefined before routing) */
  readonly route: { readonly maxRequestMessageBytes: number } | undefined;
  readonly decidedBy: DecidedBy;
}
