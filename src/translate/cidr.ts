// Client addresses and CIDR blocks for access rules (the route's rbac.clientAddresses): parsed
// once at config time into 128-bit ranges, matched per call without allocation beyond the
// address's own parse. IPv4 is kept as IPv4-mapped IPv6 (::ffff:a.b.c.d), so an IPv4 client of
// a dual-stack listener (which node reports as ::ffff:a.b.c.d) matches an IPv4 block. Pure.

/** A block: the address's 128 bits as two 64-bit halves, and the prefix length (0..128). */
export interface Cidr {
  readonly hi: bigint;
  readonly lo: bigint;
  readonly bits: number;
}

const M64 = (1n << 64n) - 1n;

function parseV4(s: string): bigint | null {
  const p = s.split(".");
  if (p.length !== 4) return null;
  let v = 0n;
  for (const x of p) {
    if (!/^\d{1,3}$/.test(x) || Number(x) > 255 || (x.length > 1 && x.startsWith("0"))) return null;
    v = (v << 8n) | BigInt(Number(x));
  }
  return v;
}

/** An address as 128 bits (IPv4 mapped into ::ffff:0:0/96); null when it is not one. */
export function parseAddress(s: string): bigint | null {
  if (s.includes(".") && !s.includes(":")) {
    const v4 = parseV4(s);
    return v4 === null ? null : (0xffffn << 32n) | v4;
  }
  if (!s.includes(":")) return null;
  // a zone (fe80::1%eth0) is not part of the address
  const z = s.indexOf("%");
  let t = z >= 0 ? s.slice(0, z) : s;
  let tail: bigint | null = null;
  const lastColon = t.lastIndexOf(":");
  if (t.slice(lastColon + 1).includes(".")) {
    tail = parseV4(t.slice(lastColon + 1));
    if (tail === null) return null;
    t = t.slice(0, lastColon + 1) + "0:0";
  }
  const halves = t.split("::");
  if (halves.length > 2) return null;
  const groups = (h: string): string[] => (h === "" ? [] : h.split(":"));
  const a = groups(halves[0]!);
  const b = halves.length === 2 ? groups(halves[1]!) : [];
  const missing = 8 - a.length - b.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return null;
  const all = [...a, ...Array<string>(halves.length === 2 ? missing : 0).fill("0"), ...b];
  let v = 0n;
  for (const g of all) {
    if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return null;
    v = (v << 16n) | BigInt(parseInt(g, 16));
  }
  if (tail !== null) v = (v & ~0xffffffffn) | tail;
  return v;
}

/** "10.0.0.0/8", "2001:db8::/32", or one address (a /32 or /128); null when malformed. */
export function parseCidr(s: string): Cidr | null {
  const slash = s.indexOf("/");
  const addr = parseAddress(slash < 0 ? s : s.slice(0, slash));
  if (addr === null) return null;
  const v4 = !s.slice(0, slash < 0 ? undefined : slash).includes(":");
  let bits = 128;
  if (slash >= 0) {
    const n = s.slice(slash + 1);
    if (!/^\d{1,3}$/.test(n)) return null;
    const len = Number(n);
    if (len > (v4 ? 32 : 128)) return null;
    bits = v4 ? 96 + len : len;
  }
  const masked = bits === 0 ? 0n : addr & (((1n << BigInt(bits)) - 1n) << BigInt(128 - bits));
  return { hi: masked >> 64n, lo: masked & M64, bits };
}

/** `addr` (already parsed) lies in block `c`. */
export function cidrContains(c: Cidr, addr: bigint): boolean {
  if (c.bits === 0) return true;
  const shift = BigInt(128 - c.bits);
  return addr >> shift === ((c.hi << 64n) | c.lo) >> shift;
}
