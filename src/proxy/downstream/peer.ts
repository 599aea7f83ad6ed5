// Who the client is (issue 18 item 5): the facts the access record names about the client side,
// read once per connection (an HTTP/2 session, or the socket of HTTP/1.1 gRPC-Web) and kept on
// it (call/headers.ts kPeer). They are per session, not per call: a call keeps a reference.
import type { Socket } from "node:net";
import type { X509Certificate } from "node:crypto";
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
  const facts = {
    address,
    port,
    tlsIdentity: undefined as string | undefined,
    tlsSni: typeof sni === "string" && sni !== "" ? sni : undefined,
    tlsVersion: tls.getProtocol() ?? undefined,
  };
  const cert = tls.authorized ? tls.getPeerX509Certificate() : undefined;
  if (cert === undefined) return facts;
  const sans = splitSans(cert.subjectAltName);
  // (the SANs and the certificate: what access rules and an external authorization check read)
  return { ...facts, tlsIdentity: identityOf(cert, sans), tlsSans: sansForRules(sans), tlsCertificate: cert };
}

/** The verified client certificate's first URI SAN, else its subject in RFC 2253. */
function identityOf(cert: X509Certificate, sans: readonly string[]): string {
  const uri = sans.find((s) => s.startsWith("URI:"));
  if (uri !== undefined) return uri.slice(4);
  // node's subject: one attribute per line, in the certificate's order; RFC 2253 reverses it
  return cert.subject.split("\n").filter((l) => l !== "").reverse().join(",");
}

/** The URI and DNS SANs, values only, URIs first. */
function sansForRules(sans: readonly string[]): string[] {
  const out: string[] = [];
  for (const s of sans) if (s.startsWith("URI:")) out.push(s.slice(4));
  for (const s of sans) if (s.startsWith("DNS:")) out.push(s.slice(4));
  return out;
}
