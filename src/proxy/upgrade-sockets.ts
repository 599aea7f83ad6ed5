// The listening sockets one dojang process hands to the next on `dojang upgrade` (src/upgrade.ts
// moves them): what each one is (SocketRecord), which listener of the new config takes which
// (matchSockets, pure), and the handles themselves, as a process sees them (a node:net server's
// handle; with `workers: N`, the ones node:cluster's primary accepts on, captured as they open).
//
// Why the very same socket, not a second one on the same port (SO_REUSEPORT, node's `reusePort`):
// with two sockets the kernel spreads new connections over both accept queues, and the connections
// waiting in the old socket's queue when it closes are reset (Linux: inet_csk_listen_stop). One
// socket has one queue: while both processes accept from it each connection is taken by one of
// them, and when the old one closes its handle the socket lives on in the new process, its
// queue untouched. The same is what Envoy's hot restart and HAProxy's seamless reload do.
import dc from "node:diagnostics_channel";
import type { AddressInfo, Server } from "node:net";
import type { HostPort } from "../config/units.js";
import { formatHostPort } from "../config/units.js";

/** Which socket of which listener: a listener's own port, its HTTP/1.1 socket (http1Address), the admin listener. */
export type SocketRole = "listener" | "http1" | "admin";

/** One listening socket handed on (its handle travels beside it over the IPC channel). */
export interface SocketRecord {
  readonly role: SocketRole;
  /** the listener's name ("" for the admin listener) */
  readonly name: string;
  /** the address as the config wrote it, "host:port" (port 0: whatever the kernel gave) */
  readonly configured: string;
  /** the address it is bound to, "ip:port" */
  readonly bound: string;
}

/**
 * What a listener listens on instead of binding its address: a socket handle received from the
 * previous process (a single process, the admin listener), or the number of a descriptor a
 * cluster primary holds (a worker's listen({ fd }) makes the primary accept on that socket and
 * hand the connections round-robin, as for an address).
 */
export type ListenOn = object | { readonly fd: number };

/** "ip:port" of a bound address, as SocketRecord.bound writes it. */
export function boundOf(a: AddressInfo): string {
  return a.family === "IPv6" ? `[${a.address}]:${a.port}` : `${a.address}:${a.port}`;
}

/**
 * Which socket (an index into `records`) a socket of the new config takes, or -1 (bind afresh):
 * one with the same role whose configured address is the same as this one's (for port 0, of the
 * listener with the same name too: the kernel's port is kept), else one bound to exactly the
 * address this one names (a renamed listener, or one whose address was written otherwise). Each
 * socket is taken once (`taken`).
 */
export function matchSocket(records: readonly SocketRecord[], taken: ReadonlySet<number>, role: SocketRole, name: string, address: HostPort): number {
  const configured = formatHostPort(address);
  const free = (i: number): boolean => !taken.has(i) && records[i]!.role === role;
  const same = records.findIndex((r, i) => free(i) && r.configured === configured && (address.port !== 0 || r.name === name));
  if (same >= 0 || address.port === 0) return same;
  return records.findIndex((r, i) => free(i) && r.bound === configured);
}

/** The sockets a starting process received, taken one by one by its listeners; the rest are closed. */
export class InheritedSockets {
  private readonly taken = new Set<number>();

  /**
   * `byKey`: a cluster worker's sockets, taken by role and name alone (its primary matched the
   * addresses, and forks its workers with its own config, so name and role say which is which).
   */
  constructor(
    readonly records: readonly SocketRecord[],
    private readonly handles: readonly ListenOn[],
    private readonly byKey = false,
  ) {}

  /** The socket this listener (role, name, address) listens on, or undefined: it binds its address. */
  take(role: SocketRole, name: string, address: HostPort): ListenOn | undefined {
    const i = this.byKey
      ? this.records.findIndex((r, k) => !this.taken.has(k) && r.role === role && r.name === name)
      : matchSocket(this.records, this.taken, role, name, address);
    if (i < 0) return undefined;
    this.taken.add(i);
    return this.handles[i];
  }

  /** The handles no listener took (their listener is gone from the config): the caller closes them. */
  untaken(): ListenOn[] {
    return this.handles.filter((_, i) => !this.taken.has(i));
  }

  /** A cluster worker's: the descriptor numbers its primary holds, by socketKey(). */
  static fromDescriptors(byKey: Readonly<Record<string, number>>): InheritedSockets {
    const records: SocketRecord[] = [];
    const handles: ListenOn[] = [];
    for (const [key, fd] of Object.entries(byKey)) {
      const at = key.indexOf(":");
      records.push({ role: key.slice(0, at) as SocketRole, name: key.slice(at + 1), configured: "", bound: "" });
      handles.push({ fd });
    }
    return new InheritedSockets(records, handles, true);
  }
}

/** The "role:name" key a primary passes a worker's descriptor under. */
export function socketKey(role: SocketRole, name: string): string {
  return `${role}:${name}`;
}

/** A node:net server's socket handle (what is sent over the IPC channel), or undefined when it is not listening. */
export function handleOf(server: Server): object | undefined {
  return (server as unknown as { _handle?: object | null })._handle ?? undefined;
}

/** The descriptor number of a socket handle (Unix), or undefined. */
export function fdOf(handle: object): number | undefined {
  const fd = (handle as { fd?: unknown }).fd;
  return typeof fd === "number" && fd >= 0 ? fd : undefined;
}

/** "ip:port" a socket handle is bound to, or undefined (closed, or not a TCP socket). */
export function handleBound(handle: object): string | undefined {
  const h = handle as { getsockname?: (out: Record<string, unknown>) => number };
  if (typeof h.getsockname !== "function") return undefined;
  const out: Record<string, unknown> = {};
  if (h.getsockname(out) !== 0 || typeof out["address"] !== "string" || typeof out["port"] !== "number") return undefined;
  return boundOf({ address: out["address"], port: out["port"], family: out["family"] === "IPv6" ? "IPv6" : "IPv4" });
}

/** Closes a socket handle (this process's descriptor only: a process it was handed to keeps its own). */
export function closeHandle(handle: ListenOn): void {
  const h = handle as { close?: () => void };
  if (typeof h.close === "function") h.close();
}

/**
 * A cluster primary's listening sockets. node:cluster's primary opens the socket a worker's
 * listen() asks for (its round-robin handle) and keeps it private; the only public place where
 * it shows is node's `net.server.listen` tracing channel (diagnostics_channel), whose asyncEnd
 * fires once the socket listens, before node:cluster takes the handle off its server object.
 * Subscribed from the primary's start, so every socket the workers open is seen; each is found
 * again by the address it is bound to (handleBound).
 */
export class PrimarySockets {
  private readonly handles: object[] = [];
  private readonly onListen = (ctx: unknown): void => {
    const h = handleOf((ctx as { server: Server }).server);
    if (h !== undefined) this.handles.push(h);
  };

  constructor() {
    dc.tracingChannel("net.server.listen").subscribe({ asyncEnd: this.onListen } as never);
  }

  /** The open socket bound to `bound` ("ip:port"), or undefined. */
  find(bound: string): object | undefined {
    for (let i = this.handles.length - 1; i >= 0; i--) {
      const h = this.handles[i]!;
      const b = handleBound(h);
      if (b === undefined) this.handles.splice(i, 1); // closed since
      else if (b === bound) return h;
    }
    return undefined;
  }
}
