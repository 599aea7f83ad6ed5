// Who the client is (issue 18 item 5): the facts the access record names about the client side,
// read once per connection (an HTTP/2 session, or the socket of HTTP/1.1 gRPC-Web) and kept on
// it (call/headers.ts kPeer). They are per session, not per call: a call keeps a reference.
import type { Socket } from "node:net";
import type { TLSSocket } from "node:tls";
import type { ClientPeer } from "../call/headers.js";
import { splitSans } from "./tls.js";

/**
 * The connection's client facts. A client certificate names the client only when the listener's
 * CA verified it (`authorized`: a listener without a CA asks for none).
 */
export function clientPeer(socket: Socket): ClientPeer {
  const address = socket.remoteAddress;
  const port = socket.remotePort;
  if ((socket as TLSSocket).encrypted !== true) return { address, port, tlsIdentity: undefined, tlsSni: undefined, tlsVersion: undefined };
  const tls = socket as TLSSocket;
  const sni = tls.servername;
  return {
    address,
    port,
    tlsIdentity: identityOf(tls),
    tlsSni: typeof sni === "string" && sni !== "" ? sni : undefined,
    tlsVersion: tls.getProtocol() ?? undefined,
  };
}

/** The verified client certificate's first URI SAN, else its subject in RFC 2253; undefined when the CA verified none. */
function identityOf(socket: TLSSocket): string | undefined {
  if (!socket.authorized) return undefined;
  const cert = socket.getPeerX509Certificate();
  if (cert === undefined) return undefined;
  const uri = splitSans(cert.subjectAltName).find((s) => s.startsWith("URI:"));
  if (uri !== undefined) return uri.slice(4);
  // node's subject: one attribute per line, in the certificate's order; RFC 2253 reverses it
  return cert.subject.split("\n").filter((l) => l !== "").reverse().join(",");
}
