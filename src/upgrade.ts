// `dojang upgrade` inside the processes (the command that asks for one is src/upgrade-command.ts):
// a new dojang process (a new build, a new config, or both) takes the listening sockets over
// from the serving one, becomes ready, and only then does the old one stop accepting, drain its
// calls (drainTimeout) and exit. Nothing is closed or rebound on the way, so a connection waiting
// in a socket's accept queue is taken by one process or the other, never refused or reset
// (src/proxy/upgrade-sockets.ts says why the same socket and not SO_REUSEPORT).
//
// The roles (one process may play several in turn):
// - the serving process gets the request (SIGUSR2; `dojang upgrade` leaves what it asks for in a
//   request file beside the pid file and writes nothing else) and, once the outcome is known,
//   writes the result file the command waits for;
// - the spawner starts the new process with an IPC channel as its fd 0 (the only descriptors
//   node keeps across the launcher's execve are 0-2: it marks inherited ones close-on-exec at
//   start), sends each socket over it (a descriptor passed with SCM_RIGHTS: a new descriptor of
//   the same socket in the new process) and waits for "ready", a reported failure, its exit or
//   the timeout. The spawner is the serving process itself, or the supervisor;
// - the supervisor: a process whose pid something watches must not go away. A dojang started
//   with --stop-with-parent (npm start: npm ends when its child ends, and dojang stops when npm
//   goes) or as pid 1 (a container ends with its init) stays after its hand-over, drained, with
//   every socket and listener closed, as a thin supervisor (Envoy's hot-restarter wrapper has the
//   same reason): it passes SIGTERM, SIGINT, SIGHUP and SIGUSR2 on to the serving process, exits
//   with its exit code, and starts each later generation itself (the serving one sends it its
//   sockets), so the chain never grows past one supervisor and one serving process (plus the
//   ones draining). Anywhere else the old process exits after its drain, as nginx's does, and
//   the pid file names the new one.
//
// Messages go over node's IPC channel (JSON); sockets travel as raw handles ("net.Native"), which
// node hands over without accepting on them.
import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { existsSync, readFileSync, renameSync, unlinkSync, writeFileSync } from "node:fs";
import { constants } from "node:os";
import { dirname, join } from "node:path";
import type { Logger } from "pino";
import { closeHandle, type ListenOn, InheritedSockets, type SocketRecord } from "./proxy/upgrade-sockets.js";

/** Set in the new process's environment: the pid of the process it takes over from. */
export const UPGRADE_ENV = "DOJANG_UPGRADE";

/** How long the new process has to become ready unless the request says (`dojang upgrade --timeout`). */
export const DEFAULT_UPGRADE_TIMEOUT_MS = 60_000;

/** How long a starting new process waits for its sockets before it gives up. */
const SOCKETS_TIMEOUT_MS = 15_000;

/** A request file older than this is not taken (left by a command that gave up, or by a crash). */
const REQUEST_MAX_AGE_MS = 60_000;

/** A listening socket and its handle, as the serving process hands it on. */
export interface HandedSocket {
  readonly record: SocketRecord;
  readonly handle: object;
}

/** What `dojang upgrade` asks for (the request file), or a bare SIGUSR2's defaults. */
export interface UpgradeRequest {
  /** matches the result to the command that asked; "" for a bare SIGUSR2 */
  readonly id: string;
  /** the config file the new process runs (absolute); absent: the running one's */
  readonly config?: string;
  /** the build's dist/ directory (absolute); absent: the running one's */
  readonly build?: string;
  readonly timeoutMs?: number;
}

/** How the new process is started. */
export interface SpawnSpec {
  readonly execPath: string;
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  readonly cwd: string;
  readonly timeoutMs: number;
}

export type Outcome =
  | { readonly ok: true; readonly pid: number; readonly readyMs: number }
  | { readonly ok: false; readonly reason: string; readonly pid?: number };

/** The result file `dojang upgrade` waits for. */
export interface UpgradeResult {
  readonly id: string;
  readonly ok: boolean;
  /** the process that served before (and now drains, when ok) */
  readonly oldPid: number;
  /** the new process (when ok; when it started but failed, the one that failed) */
  readonly pid?: number;
  /** from the request to the new process's "ready", ms */
  readonly readyMs?: number;
  readonly drainTimeoutMs?: number;
  readonly reason?: string;
}

type Msg =
  | { type: "dojang:upgrade-hello" }
  | { type: "dojang:upgrade-socket"; record: SocketRecord }
  | { type: "dojang:upgrade-sockets"; count: number; supervised: boolean }
  | { type: "dojang:upgrade-ready"; pid: number }
  | { type: "dojang:upgrade-failed"; code: number; reason: string }
  | { type: "dojang:upgrade-request"; spec: SpawnSpec; count: number }
  | { type: "dojang:upgrade-outcome"; outcome: Outcome };

function isMsg<T extends Msg["type"]>(m: unknown, type: T): m is Extract<Msg, { type: T }> {
  return typeof m === "object" && m !== null && (m as { type?: unknown }).type === type;
}

/** The request file `dojang upgrade` writes beside the pid file, and the result file it waits for. */
export function requestFile(pidFile: string): string {
  return `${pidFile}.upgrade`;
}
export function resultFile(pidFile: string): string {
  return `${pidFile}.upgrade-result`;
}

/** Writes `text` to `path` atomically (a temporary file renamed over it). */
export function writeAtomically(path: string, text: string): void {
  const tmp = join(dirname(path), `.${randomUUID()}.tmp`);
  writeFileSync(tmp, text, { mode: 0o600 });
  renameSync(tmp, path);
}

/** The request in the file beside the pid file (taken: the file is removed), or a bare signal's. */
export function takeRequest(pidFile: string | undefined, now = Date.now()): UpgradeRequest {
  if (pidFile === undefined) return { id: "" };
  const path = requestFile(pidFile);
  let v: unknown;
  try {
    v = JSON.parse(readFileSync(path, "utf8"));
    unlinkSync(path);
  } catch {
    return { id: "" };
  }
  const r = v as Partial<UpgradeRequest> & { at?: unknown };
  if (typeof r.id !== "string" || typeof r.at !== "number" || now - r.at > REQUEST_MAX_AGE_MS) return { id: "" };
  return {
    id: r.id,
    ...(typeof r.config === "string" ? { config: r.config } : {}),
    ...(typeof r.build === "string" ? { build: r.build } : {}),
    ...(typeof r.timeoutMs === "number" && r.timeoutMs > 0 ? { timeoutMs: r.timeoutMs } : {}),
  };
}

/** The node flags the launcher added (src/cli.ts): left out, the new build's launcher adds its own. */
export function userNodeFlags(execArgv: readonly string[], env: NodeJS.ProcessEnv): string[] {
  let planned: readonly string[] = [];
  try {
    const p = JSON.parse(env["DOJANG_MEMORY_PLAN"] ?? "") as { nodeFlags?: unknown };
    if (Array.isArray(p.nodeFlags)) planned = p.nodeFlags.filter((f): f is string => typeof f === "string");
  } catch {
    /* no plan */
  }
  return execArgv.filter((f) => f !== "--no-memory-reducer" && !planned.includes(f));
}

/** The environment for the new process: this one's, less what a launcher or a parent handed this one. */
export function successorEnv(env: NodeJS.ProcessEnv, from: number): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined) out[k] = v;
  for (const k of ["DOJANG_MEMORY_PLAN", "DOJANG_CONFIG_HANDOVER", "DOJANG_STARTED_BY", "NODE_CHANNEL_FD", "NODE_CHANNEL_SERIALIZATION_MODE", "NODE_UNIQUE_ID"]) delete out[k];
  out[UPGRADE_ENV] = String(from);
  return out;
}

// === the spawner ===

/**
 * Starts the new process (`spec`), hands it `sockets` and waits until it is ready, has failed
 * (what it reported, or its exit), or `spec.timeoutMs` passed (then it is killed). `supervised`
 * tells it whether this process stays as its supervisor. Resolves with the outcome and the child
 * (still running when ok).
 */
export function startSuccessor(spec: SpawnSpec, sockets: readonly HandedSocket[], supervised: boolean, log: Logger): Promise<{ outcome: Outcome; child: ChildProcess | undefined }> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    let child: ChildProcess;
    try {
      child = spawn(spec.execPath, [...spec.args], { cwd: spec.cwd, env: spec.env, stdio: ["ipc", "inherit", "inherit"] });
    } catch (err) {
      resolve({ outcome: { ok: false, reason: `cannot start ${spec.args.find((a) => a.endsWith("cli.js")) ?? spec.execPath}: ${(err as Error).message}` }, child: undefined });
      return;
    }
    let reported: string | undefined;
    let settled = false;
    const settle = (outcome: Outcome): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      child.off("message", onMessage);
      if (!outcome.ok && child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      resolve({ outcome, child: outcome.ok ? child : undefined });
    };
    const pid = child.pid;
    const timer = setTimeout(() => settle({ ok: false, reason: `the new process (pid ${pid}) was not ready within ${spec.timeoutMs}ms; it was killed`, ...(pid === undefined ? {} : { pid }) }), spec.timeoutMs);
    const onMessage = (m: unknown): void => {
      if (isMsg(m, "dojang:upgrade-hello")) {
        for (const s of sockets) child.send({ type: "dojang:upgrade-socket", record: s.record } satisfies Msg, s.handle as never, undefined, ignoreSendError);
        child.send({ type: "dojang:upgrade-sockets", count: sockets.length, supervised } satisfies Msg, undefined, undefined, ignoreSendError);
      } else if (isMsg(m, "dojang:upgrade-ready")) {
        settle({ ok: true, pid: m.pid, readyMs: Math.round(performance.now() - t0) });
      } else if (isMsg(m, "dojang:upgrade-failed")) {
        reported = m.reason;
      }
    };
    child.on("message", onMessage);
    child.once("error", (err) => settle({ ok: false, reason: `cannot start the new process: ${err.message}` }));
    child.once("exit", (code, signal) => {
      const how = signal !== null ? `was killed by ${signal}` : `exited with code ${code}`;
      settle({ ok: false, reason: reported ?? `the new process (pid ${pid}) ${how} before it was ready (its output is in this log)`, ...(pid === undefined ? {} : { pid }) });
    });
    log.info({ pid, args: spec.args, sockets: sockets.map((s) => s.record) }, "upgrade: new process started");
  });
}

function ignoreSendError(): void {
  /* the child is gone: its 'exit' settles the outcome */
}

// === the new process ===

/** What a process started by an upgrade received from its spawner. */
export interface Arrival {
  /** the process it takes over from */
  readonly from: number;
  readonly sockets: InheritedSockets;
  /** whether the spawner stays as this process's supervisor */
  readonly supervised: boolean;
}

/**
 * In a process started by an upgrade (UPGRADE_ENV and an IPC channel): says hello and takes the
 * sockets its spawner sends. undefined in any other process. The environment variable is removed
 * (the cluster workers this process may fork are not upgrade children).
 */
export function receiveSockets(env: NodeJS.ProcessEnv): Promise<Arrival> | undefined {
  const from = Number(env[UPGRADE_ENV]);
  delete env[UPGRADE_ENV];
  if (!Number.isSafeInteger(from) || from <= 0 || process.send === undefined) return undefined;
  return new Promise((resolve, reject) => {
    const records: SocketRecord[] = [];
    const handles: ListenOn[] = [];
    const t = setTimeout(() => {
      process.off("message", onMessage);
      reject(new Error(`no sockets from the previous process (pid ${from}) within ${SOCKETS_TIMEOUT_MS}ms`));
    }, SOCKETS_TIMEOUT_MS);
    const onMessage = (m: unknown, handle: unknown): void => {
      if (isMsg(m, "dojang:upgrade-socket") && typeof handle === "object" && handle !== null) {
        records.push(m.record);
        handles.push(handle);
      } else if (isMsg(m, "dojang:upgrade-sockets")) {
        clearTimeout(t);
        process.off("message", onMessage);
        if (records.length !== m.count) return reject(new Error(`${records.length} of the previous process's ${m.count} sockets arrived`));
        resolve({ from, sockets: new InheritedSockets(records, handles), supervised: m.supervised });
      }
    };
    process.on("message", onMessage);
    process.send!({ type: "dojang:upgrade-hello" } satisfies Msg, undefined, undefined, ignoreSendError);
  });
}

/** The new process tells its spawner it serves. */
export function reportReady(): void {
  process.send?.({ type: "dojang:upgrade-ready", pid: process.pid } satisfies Msg, undefined, undefined, ignoreSendError);
}

/**
 * The new process tells its spawner why it cannot start (before it exits: a small message on an
 * idle channel is written at once, in the call).
 */
export function reportFailure(code: number, reason: string): void {
  process.send?.({ type: "dojang:upgrade-failed", code, reason } satisfies Msg, undefined, undefined, ignoreSendError);
}

// === the serving process ===

/** What the serving process offers an upgrade. */
export interface Served {
  readonly log: Logger;
  /** its listening sockets now */
  sockets(): HandedSocket[];
  /** how the new process is started for `request` */
  spec(request: UpgradeRequest): SpawnSpec | string;
  /**
   * The new process is ready: stop accepting now (synchronously: the listeners' and the admin's
   * handles closed), then drain as a stop does; resolves with the exit code once drained.
   */
  handOver(): Promise<number>;
  /** drainTimeout, for the result */
  readonly drainTimeoutMs: number;
}

type State = "serving" | "upgrading" | "handed-over";

/**
 * The serving process's side: one upgrade at a time; after a successful one it stops accepting,
 * drains and exits, or (`supervise`) stays as the new process's supervisor.
 */
export class Upgrades {
  private state: State = "serving";
  private supervisor: Supervisor | undefined = undefined;

  constructor(
    private readonly served: Served,
    private readonly o: {
      readonly pidFile: string | undefined;
      /** this process stays after its hand-over (--stop-with-parent, pid 1) */
      readonly supervise: boolean;
      /** this process's spawner supervises it: it starts the new process (this one sends the sockets) */
      readonly parentSupervises: boolean;
    },
  ) {}

  /** SIGUSR2 (or another trigger): upgrade as the request file says, else to the same build and config. */
  request(trigger: string): void {
    const log = this.served.log;
    if (this.supervisor !== undefined) {
      this.supervisor.forward("SIGUSR2");
      return;
    }
    const req = takeRequest(this.o.pidFile);
    if (this.state !== "serving") {
      log.warn({ trigger, state: this.state }, "upgrade: refused, this process is not the one serving (an upgrade is running, or it handed over already)");
      this.writeResult({ id: req.id, ok: false, oldPid: process.pid, reason: this.state === "upgrading" ? "an upgrade is running already" : "this process has handed over already; the pid file names the serving one" });
      return;
    }
    this.state = "upgrading";
    void this.run(req, trigger).catch((err: unknown) => {
      log.error({ err: (err as Error).message }, "upgrade: failed");
      this.state = "serving";
    });
  }

  private async run(req: UpgradeRequest, trigger: string): Promise<void> {
    const log = this.served.log;
    const spec = this.served.spec(req);
    if (typeof spec === "string") {
      log.error({ trigger, reason: spec }, "upgrade: refused; this process keeps serving");
      this.writeResult({ id: req.id, ok: false, oldPid: process.pid, reason: spec });
      this.state = "serving";
      return;
    }
    const sockets = this.served.sockets();
    log.info({ trigger, args: spec.args, sockets: sockets.length, via: this.o.parentSupervises ? "supervisor" : "this process" }, "upgrade: starting the new process");
    let outcome: Outcome;
    let child: ChildProcess | undefined;
    if (this.o.parentSupervises) outcome = await askSupervisor(spec, sockets);
    else ({ outcome, child } = await startSuccessor(spec, sockets, this.o.supervise, log));
    if (!outcome.ok) {
      log.error({ trigger, reason: outcome.reason, pid: outcome.pid }, "upgrade: the new process did not become ready; this process keeps serving");
      this.writeResult({ id: req.id, ok: false, oldPid: process.pid, reason: outcome.reason, ...(outcome.pid === undefined ? {} : { pid: outcome.pid }) });
      this.state = "serving";
      return;
    }
    this.state = "handed-over";
    if (child !== undefined) {
      if (this.o.supervise) this.supervisor = new Supervisor(child, log);
      else {
        // nginx's way: the new process goes on alone (init adopts it when this one exits)
        child.disconnect();
        child.unref();
      }
    }
    const drained = this.served.handOver();
    log.info({ trigger, oldPid: process.pid, pid: outcome.pid, readyMs: outcome.readyMs, drainTimeoutMs: this.served.drainTimeoutMs, stays: this.supervisor !== undefined }, "upgrade: the new process is ready; this one stopped accepting and drains");
    this.writeResult({ id: req.id, ok: true, oldPid: process.pid, pid: outcome.pid, readyMs: outcome.readyMs, drainTimeoutMs: this.served.drainTimeoutMs });
    const t0 = performance.now();
    const code = await drained;
    log.info({ pid: process.pid, drainMs: Math.round(performance.now() - t0), code }, "upgrade: drained");
    this.exit(code);
  }

  /** Where a stop ends: exit, or (a supervisor) wait for the processes it supervises. */
  exit(code: number): void {
    if (this.supervisor !== undefined) this.supervisor.wait();
    else process.exit(code);
  }

  /** Whether this process has handed over and stays as the supervisor (its own signal handlers pass signals on). */
  get supervising(): boolean {
    return this.supervisor !== undefined;
  }

  /** Whether this process has handed its sockets over (it drains, then exits or supervises). */
  get handedOver(): boolean {
    return this.state === "handed-over";
  }

  /** Passes `signal` on to the serving process when this one supervises it (true), else false. */
  forward(signal: NodeJS.Signals): boolean {
    if (this.supervisor === undefined) return false;
    this.supervisor.forward(signal);
    return true;
  }

  private writeResult(r: UpgradeResult): void {
    writeResult(this.o.pidFile, r, (msg) => this.served.log.warn(msg));
  }
}

/** The result file for the command that asked (none for a bare signal, or without a pid file). */
function writeResult(pidFile: string | undefined, r: UpgradeResult, warn: (msg: string) => void): void {
  if (pidFile === undefined || r.id === "") return;
  try {
    writeAtomically(resultFile(pidFile), JSON.stringify(r) + "\n");
  } catch (err) {
    warn(`upgrade: cannot write the result file: ${(err as Error).message}`);
  }
}

/** A request that comes before the process serves (SIGUSR2 during start-up): refused, and the command told why. */
export function refuseEarlyRequest(pidFile: string | undefined, reason: string): void {
  writeResult(pidFile, { ...takeRequest(pidFile), ok: false, oldPid: process.pid, reason }, (msg) => process.stderr.write(`dojang: ${msg}\n`));
}

/** A supervised serving process asks its supervisor to start the new process with these sockets. */
function askSupervisor(spec: SpawnSpec, sockets: readonly HandedSocket[]): Promise<Outcome> {
  return new Promise((resolve) => {
    const onMessage = (m: unknown): void => {
      if (!isMsg(m, "dojang:upgrade-outcome")) return;
      process.off("message", onMessage);
      process.off("disconnect", onGone);
      resolve(m.outcome);
    };
    const onGone = (): void => {
      process.off("message", onMessage);
      resolve({ ok: false, reason: "the supervisor exited" });
    };
    process.on("message", onMessage);
    process.once("disconnect", onGone);
    for (const s of sockets) process.send!({ type: "dojang:upgrade-socket", record: s.record } satisfies Msg, s.handle as never, undefined, ignoreSendError);
    process.send!({ type: "dojang:upgrade-request", spec, count: sockets.length } satisfies Msg, undefined, undefined, ignoreSendError);
  });
}

// === the supervisor ===

/**
 * The first process, drained, kept for the pid its parent watches: passes signals on to the
 * serving process, starts each new one for it, and exits with its code.
 */
export class Supervisor {
  private current: ChildProcess;
  private readonly children = new Set<ChildProcess>();
  private exitCode: number | undefined = undefined;
  private waiting = false;
  private upgrading = false;

  constructor(
    child: ChildProcess,
    private readonly log: Logger,
  ) {
    this.current = child;
    this.adopt(child);
    // from now on this process's own handling of these is off (src/main.ts asks `supervising`)
    for (const sig of ["SIGTERM", "SIGINT", "SIGHUP"] as const) process.on(sig, () => this.forward(sig));
  }

  private adopt(child: ChildProcess): void {
    this.children.add(child);
    const sockets: HandedSocket[] = [];
    child.on("message", (m: unknown, handle: unknown) => {
      if (isMsg(m, "dojang:upgrade-socket") && typeof handle === "object" && handle !== null) sockets.push({ record: m.record, handle });
      else if (isMsg(m, "dojang:upgrade-request")) {
        const got = sockets.splice(0);
        void this.upgrade(child, m.spec, got, m.count);
      }
    });
    // a send to a child whose channel just closed is an 'error' event: unhandled, it would end this process
    child.on("error", (err) => this.log.warn({ pid: child.pid, err: err.message }, "supervisor: IPC error"));
    child.once("exit", (code, signal) => {
      this.children.delete(child);
      if (child === this.current) {
        this.exitCode = code ?? 128 + signalNumber(signal);
        this.log.info({ pid: child.pid, code, signal }, "supervisor: the serving process exited; stopping the rest");
        for (const c of this.children) c.kill("SIGTERM");
      }
      this.maybeExit();
    });
  }

  /** The serving process asked for an upgrade and sent its sockets: start the new one. */
  private async upgrade(from: ChildProcess, spec: SpawnSpec, sockets: HandedSocket[], count: number): Promise<void> {
    const answer = (outcome: Outcome): void => {
      if (from.connected) from.send({ type: "dojang:upgrade-outcome", outcome } satisfies Msg, undefined, undefined, ignoreSendError);
    };
    if (from !== this.current || this.upgrading || this.exitCode !== undefined) {
      for (const s of sockets) closeHandle(s.handle);
      return answer({ ok: false, reason: "the supervisor is busy with another upgrade, or stopping" });
    }
    if (sockets.length !== count) {
      for (const s of sockets) closeHandle(s.handle);
      return answer({ ok: false, reason: `${sockets.length} of ${count} sockets reached the supervisor` });
    }
    this.upgrading = true;
    const { outcome, child } = await startSuccessor(spec, sockets, true, this.log);
    this.upgrading = false;
    // the new process has its own descriptors now (or failed): these copies are not needed
    for (const s of sockets) closeHandle(s.handle);
    if (child !== undefined) {
      this.current = child;
      this.adopt(child);
    }
    answer(outcome);
  }

  /** SIGTERM and SIGINT go to every process (the draining ones too), the others to the serving one. */
  forward(signal: NodeJS.Signals): void {
    if (signal === "SIGTERM" || signal === "SIGINT") for (const c of this.children) c.kill(signal);
    else this.current.kill(signal);
  }

  /** This process has drained: exit once the processes it supervises have. */
  wait(): void {
    this.waiting = true;
    this.maybeExit();
  }

  private maybeExit(): void {
    if (this.waiting && this.exitCode !== undefined && this.children.size === 0) process.exit(this.exitCode);
  }
}

/** A signal's number (a process killed by one exits 128 + it, as a shell reports it). */
function signalNumber(signal: NodeJS.Signals | null): number {
  return signal === null ? 0 : (constants.signals[signal] ?? 0);
}

/** The build directory a running process came from: where its launcher (cli.js) is. */
export function runningBuild(argv1: string | undefined): string {
  return argv1 === undefined ? "" : dirname(argv1);
}

/** Why `dir` is not a dojang build to start ("" when it is). */
export function buildProblem(dir: string): string {
  return existsSync(join(dir, "cli.js")) ? "" : `no dojang build in ${dir} (no cli.js there)`;
}
