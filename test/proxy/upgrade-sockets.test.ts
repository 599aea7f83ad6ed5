// `dojang upgrade`'s pure parts: which listener of the new config takes which handed-over socket
// (src/proxy/upgrade-sockets.ts matchSocket), and what the serving process makes of a request
// file, of its node flags and of its environment for the new process (src/upgrade.ts).
import { mkdtempSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { InheritedSockets, matchSocket, type SocketRecord } from "../../src/proxy/upgrade-sockets.js";
import { requestFile, successorEnv, takeRequest, userNodeFlags } from "../../src/upgrade.js";

const rec = (role: SocketRecord["role"], name: string, configured: string, bound: string): SocketRecord => ({ role, name, configured, bound });
const hp = (host: string, port: number) => ({ host, port });

describe("matchSocket: the socket a listener of the new config takes", () => {
  const records = [
    rec("listener", "plain", "0.0.0.0:8080", "0.0.0.0:8080"),
    rec("listener", "secure", "127.0.0.1:0", "127.0.0.1:41000"),
    rec("listener", "other", "127.0.0.1:0", "127.0.0.1:41001"),
    rec("http1", "plain", "0.0.0.0:8081", "0.0.0.0:8081"),
    rec("admin", "", "127.0.0.1:9901", "127.0.0.1:9901"),
  ];
  const none = new Set<number>();

  it("the same configured address, whatever the listener's name now (a renamed listener keeps its socket)", () => {
    expect(matchSocket(records, none, "listener", "plain", hp("0.0.0.0", 8080))).toBe(0);
    expect(matchSocket(records, none, "listener", "renamed", hp("0.0.0.0", 8080))).toBe(0);
  });

  it("port 0: the socket of the listener with the same name (the port the kernel gave it is kept), none for a new name", () => {
    expect(matchSocket(records, none, "listener", "secure", hp("127.0.0.1", 0))).toBe(1);
    expect(matchSocket(records, none, "listener", "other", hp("127.0.0.1", 0))).toBe(2);
    expect(matchSocket(records, none, "listener", "new", hp("127.0.0.1", 0))).toBe(-1);
  });

  it("an address written as another's bound address takes that socket (port 0 then, the kernel's port now)", () => {
    expect(matchSocket(records, none, "listener", "pinned", hp("127.0.0.1", 41000))).toBe(1);
  });

  it("roles do not mix: a listener never takes an http1Address or the admin socket, and the reverse", () => {
    expect(matchSocket(records, none, "listener", "x", hp("0.0.0.0", 8081))).toBe(-1);
    expect(matchSocket(records, none, "listener", "x", hp("127.0.0.1", 9901))).toBe(-1);
    expect(matchSocket(records, none, "http1", "plain", hp("0.0.0.0", 8081))).toBe(3);
    expect(matchSocket(records, none, "admin", "", hp("127.0.0.1", 9901))).toBe(4);
    expect(matchSocket(records, none, "admin", "", hp("127.0.0.1", 8080))).toBe(-1);
  });

  it("a new address binds afresh (-1); a socket is taken once", () => {
    expect(matchSocket(records, none, "listener", "plain", hp("0.0.0.0", 9090))).toBe(-1);
    expect(matchSocket(records, new Set([0]), "listener", "again", hp("0.0.0.0", 8080))).toBe(-1);
  });

  it("InheritedSockets hands each handle out once and returns the ones no listener took", () => {
    const handles = records.map((_, i) => ({ i }));
    const inh = new InheritedSockets(records, handles);
    expect(inh.take("listener", "plain", hp("0.0.0.0", 8080))).toBe(handles[0]);
    expect(inh.take("listener", "plain", hp("0.0.0.0", 8080))).toBeUndefined();
    expect(inh.take("admin", "", hp("127.0.0.1", 9901))).toBe(handles[4]);
    expect(inh.untaken()).toEqual([handles[1], handles[2], handles[3]]);
  });

  it("a cluster worker's descriptors are taken by role and name", () => {
    const inh = InheritedSockets.fromDescriptors({ "listener:plain": 21, "http1:plain": 22 });
    expect(inh.take("listener", "plain", hp("0.0.0.0", 1))).toEqual({ fd: 21 });
    expect(inh.take("http1", "plain", hp("0.0.0.0", 2))).toEqual({ fd: 22 });
    expect(inh.take("listener", "other", hp("0.0.0.0", 1))).toBeUndefined();
  });
});

describe("the upgrade request beside the pid file", () => {
  it("is taken (the file removed) when fresh; a stale, foreign or missing one is a bare SIGUSR2's", () => {
    const d = mkdtempSync(join(tmpdir(), "dojang-upgrade-"));
    try {
      const pid = join(d, "dojang.pid");
      expect(takeRequest(pid)).toEqual({ id: "" });
      writeFileSync(requestFile(pid), JSON.stringify({ id: "a", at: 1_000_000, config: "/etc/d.yaml", build: "/opt/dist", timeoutMs: 5000 }));
      expect(takeRequest(pid, 1_010_000)).toEqual({ id: "a", config: "/etc/d.yaml", build: "/opt/dist", timeoutMs: 5000 });
      expect(existsSync(requestFile(pid))).toBe(false);
      writeFileSync(requestFile(pid), JSON.stringify({ id: "b", at: 1_000_000 }));
      expect(takeRequest(pid, 1_000_000 + 61_000)).toEqual({ id: "" });
      writeFileSync(requestFile(pid), "not json");
      expect(takeRequest(pid)).toEqual({ id: "" });
      expect(takeRequest(undefined)).toEqual({ id: "" });
    } finally {
      rmSync(d, { recursive: true, force: true });
    }
  });
});

describe("the new process's command line and environment", () => {
  it("leaves out the node flags the launcher added (the new build's launcher adds its own), keeps the user's", () => {
    const env = { DOJANG_MEMORY_PLAN: JSON.stringify({ nodeFlags: ["--max-semi-space-size=2", "--max-old-space-size=300"] }) };
    expect(userNodeFlags(["--no-memory-reducer", "--max-semi-space-size=2", "--max-old-space-size=300", "--enable-source-maps"], env)).toEqual(["--enable-source-maps"]);
    expect(userNodeFlags(["--inspect=0"], {})).toEqual(["--inspect=0"]);
  });

  it("drops what a launcher or a parent handed this process, and names the process it takes over from", () => {
    const env = successorEnv({ PATH: "/bin", DOJANG_MEMORY_PLAN: "{}", DOJANG_CONFIG_HANDOVER: "x", DOJANG_STARTED_BY: "7", NODE_CHANNEL_FD: "0", DOJANG_ADMIN_TOKEN: "t" }, 4242);
    expect(env).toEqual({ PATH: "/bin", DOJANG_ADMIN_TOKEN: "t", DOJANG_UPGRADE: "4242" });
  });
});
