// The path-judge engine (test/engines/path-judge): a connect-go v1.19 and a grpc-go upstream for
// pkg.Svc/Unary and pkg.Svc/Open that count what reaches them, the judges of how dojang reads a
// call's :path (test/behaviour/attack-paths.test.ts) and of what an unknown path gets
// (test/behaviour/connect.test.ts).
import type { ChildProcess } from "node:child_process";
import { engineBinary } from "./engines.js";
import { spawnGroup } from "./process.js";

/** One request as it reached an upstream. */
export interface Seen {
  readonly server: "connect" | "grpc";
  readonly proto: string;
  readonly method: string;
  /** the request URI as it came (connect-go: r.RequestURI; grpc-go: the method name) */
  readonly uri: string;
  /** the path the server acted on (connect-go: net/http's decoded r.URL.Path) */
  readonly path: string;
  /** the request's x-attack-id */
  readonly id: string;
}
export interface Counts {
  readonly requests: Seen[];
  /** "<server> <procedure>" → how many times that method's handler ran */
  readonly handled: Record<string, number>;
}
export interface Judge {
  /** "host:port" of connect-go (h2c and HTTP/1.1) */
  readonly connect: string;
  /** "host:port" of grpc-go */
  readonly grpc: string;
  counts(): Promise<Counts>;
  reset(): Promise<void>;
  readonly child: ChildProcess;
}

/** Starts the engine (its process group is killed when the test ends; it also exits when its stdin closes). */
export async function startJudge(): Promise<Judge> {
  const child = spawnGroup(engineBinary("path-judge"), [], { stdio: ["pipe", "pipe", "pipe"] });
  let out = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString("utf8")));
  child.stderr!.on("data", (d: Buffer) => (out += d.toString("utf8")));
  const line = await new Promise<RegExpExecArray>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`path-judge did not start: ${out}`)), 20_000);
    const look = (): void => {
      const m = /connect=(\S+) grpc=(\S+) admin=(\S+)/.exec(out);
      if (m !== null) {
        clearTimeout(t);
        resolve(m);
      }
    };
    child.stdout!.on("data", look);
    child.on("exit", (code) => reject(new Error(`path-judge exited ${code}: ${out}`)));
  });
  const admin = line[3]!;
  return {
    connect: line[1]!,
    grpc: line[2]!,
    child,
    counts: async () => (await (await fetch(`http://${admin}/counts`)).json()) as Counts,
    reset: async () => void (await fetch(`http://${admin}/reset`, { method: "POST" })),
  };
}
