// A tiny authoritative DNS server on 127.0.0.1 (UDP) for tests: answers A and AAAA queries from
// a map that the test changes, so DNS endpoints can be added and removed without a real zone.
import dgram from "node:dgram";
import { isIPv4, isIPv6 } from "node:net";

export interface DnsServer {
  /** "127.0.0.1:port", for Resolver.setServers */
  readonly address: string;
  /** name → addresses (IPv4 and IPv6 mixed); unknown names get NXDOMAIN */
  readonly records: Map<string, string[]>;
  /** queries answered so far */
  queries: number;
  /** when each A query came (performance.now()): one per lookup of a name's IPv4 addresses */
  readonly aQueries: number[];
  close(): Promise<void>;
}

function readName(msg: Buffer, at: number): { name: string; next: number } {
  const labels: string[] = [];
  let i = at;
  while (msg[i]! !== 0) {
    const len = msg[i]!;
    labels.push(msg.subarray(i + 1, i + 1 + len).toString("ascii"));
    i += 1 + len;
  }
  return { name: labels.join(".").toLowerCase(), next: i + 1 };
}

function ipBytes(ip: string): Buffer {
  if (isIPv4(ip)) return Buffer.from(ip.split(".").map(Number));
  // expand "::" and write 8 groups
  const [head, tail] = ip.split("::") as [string, string | undefined];
  const h = head === "" ? [] : head.split(":");
  const t = tail === undefined || tail === "" ? [] : tail.split(":");
  const groups = [...h, ...new Array<string>(8 - h.length - t.length).fill("0"), ...t];
  const b = Buffer.alloc(16);
  groups.forEach((g, k) => b.writeUInt16BE(parseInt(g, 16), k * 2));
  return b;
}

export async function startDnsServer(records: Record<string, string[]> = {}): Promise<DnsServer> {
  const sock = dgram.createSocket("udp4");
  let closed: Promise<void> | undefined;
  const state: DnsServer = {
    address: "",
    records: new Map(Object.entries(records)),
    queries: 0,
    aQueries: [],
    close: () => (closed ??= new Promise<void>((r) => sock.close(() => r()))),
  };
  sock.on("message", (msg, rinfo) => {
    if (msg.length < 12) return;
    const id = msg.readUInt16BE(0);
    const q = readName(msg, 12);
    const qtype = msg.readUInt16BE(q.next);
    const question = msg.subarray(12, q.next + 4);
    state.queries++;
    if (qtype === 1) state.aQueries.push(performance.now());
    const addrs = state.records.get(q.name);
    const wanted = (addrs ?? []).filter((a) => (qtype === 1 ? isIPv4(a) : qtype === 28 ? isIPv6(a) : false));
    const header = Buffer.alloc(12);
    header.writeUInt16BE(id, 0);
    header.writeUInt16BE(0x8400 | (addrs === undefined ? 3 : 0), 2); // QR, AA, rcode NXDOMAIN or NOERROR
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(wanted.length, 6);
    const answers = wanted.map((a) => {
      const rdata = ipBytes(a);
      const rr = Buffer.alloc(12);
      rr.writeUInt16BE(0xc00c, 0); // name: pointer to the question
      rr.writeUInt16BE(qtype, 2);
      rr.writeUInt16BE(1, 4); // IN
      rr.writeUInt32BE(1, 6); // TTL 1 s
      rr.writeUInt16BE(rdata.length, 10);
      return Buffer.concat([rr, rdata]);
    });
    sock.send(Buffer.concat([header, question, ...answers]), rinfo.port, rinfo.address);
  });
  await new Promise<void>((r) => sock.bind(0, "127.0.0.1", r));
  return Object.assign(state, { address: `127.0.0.1:${sock.address().port}` });
}
