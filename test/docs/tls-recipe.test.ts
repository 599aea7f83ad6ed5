// The edge gateway guide's openssl recipe (docs/guides/edge-gateway.md, TLS and mTLS, "Certificates
// to try it with"; in the README until issue 19) works as written
// (issue 18, item 11): the shell block after <!-- tls:openssl-recipe --> runs with sh in an empty
// folder (the machine's openssl, 3.0 or later); the certificates have the names and key usages
// grpc-js and browsers need; the config after <!-- tls:config --> (its two fixed ports moved to
// free ones) starts a real dojang with them, TLS and requireClientCert; the call after
// <!-- tls:call --> presents the client certificate and its URI SAN reaches a @grpc/grpc-js
// upstream in x-forwarded-client-cert, and without the certificate the handshake is refused.
// Also the guide's statement that relative paths resolve against the working directory, not the
// config file's folder: the config lives in a subfolder here, and `--check` passes from the
// certificates' folder and fails, naming the key, from the config's own.
import type { ChildProcess } from "node:child_process";
import { X509Certificate, createHash } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { CLI, REPO_ROOT, assertDistBuilt, childEnv, spawnGroup, freePort, tempDir, waitFor } from "../helpers/process.js";
import { DOC_PAGES, blockAfterMarker, readDoc } from "../helpers/readme.js";

const readme = readDoc(DOC_PAGES.edgeGateway);
const recipe = blockAfterMarker(readme, "tls:openssl-recipe", "sh");
const configText = blockAfterMarker(readme, "tls:config", "yaml");
const callBlock = blockAfterMarker(readme, "tls:call", "sh");
/** The program of the block's `node -e '...'` line. */
const callLine = /^node -e '([^'\n]+)'$/.exec(callBlock)?.[1] ?? `not a node -e one-liner: ${callBlock}`;
const SERVER_AUTH = "1.3.6.1.5.5.7.3.1";
const CLIENT_AUTH = "1.3.6.1.5.5.7.3.2";

const tmp = tempDir();
const children = new Set<ChildProcess>();

interface Run {
  child: ChildProcess;
  out(): string;
  done: Promise<number | null>;
}

/** `cmd args` in `cwd` (stdout and stderr collected together); killed after the test if still running. */
function start(cmd: string, args: readonly string[], cwd: string, env: NodeJS.ProcessEnv = childEnv()): Run {
  const child = spawnGroup(cmd, [...args], { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
  children.add(child);
  let out = "";
  child.stdout!.setEncoding("utf8").on("data", (d: string) => (out += d));
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (out += d));
  const done = new Promise<number | null>((r) => child.once("close", (code) => r(code)));
  return { child, out: () => out, done };
}

async function runToEnd(cmd: string, args: readonly string[], cwd: string, env?: NodeJS.ProcessEnv, ms = 20_000): Promise<{ code: number | null; out: string }> {
  const r = start(cmd, args, cwd, env);
  const t = setTimeout(() => r.child.kill("SIGKILL"), ms);
  const code = await r.done;
  clearTimeout(t);
  return { code, out: r.out() };
}

let upstream: grpc.Server | undefined;
beforeAll(() => assertDistBuilt());
afterEach(async () => {
  const left = [...children].filter((c) => c.exitCode === null && c.signalCode === null);
  for (const c of left) c.kill("SIGKILL");
  await Promise.all(left.map((c) => new Promise((r) => (c.exitCode !== null || c.signalCode !== null ? r(undefined) : c.once("close", r)))));
  children.clear();
});
afterAll(() => {
  upstream?.forceShutdown();
  tmp.remove();
});

describe("the edge gateway guide's openssl recipe, config and mTLS call", () => {
  it("makes a CA, a server certificate for localhost/127.0.0.1 (serverAuth) and a client one with a URI SAN (clientAuth)", async () => {
    writeFileSync(join(tmp.dir, "recipe.sh"), recipe + "\n");
    const r = await runToEnd("sh", ["-eu", "recipe.sh"], tmp.dir);
    expect(r.code, r.out).toBe(0);
    const cert = (name: string) => new X509Certificate(readFileSync(join(tmp.dir, name)));
    const [ca, server, client] = [cert("ca.pem"), cert("server.pem"), cert("client.pem")];
    expect(ca.ca).toBe(true);
    expect(server.ca).toBe(false);
    expect(server.subjectAltName).toBe("DNS:localhost, IP Address:127.0.0.1");
    expect(server.keyUsage).toEqual([SERVER_AUTH]);
    expect(server.checkIssued(ca) && server.verify(ca.publicKey)).toBe(true);
    expect(client.subjectAltName).toBe("URI:spiffe://example.org/ns/default/sa/web");
    expect(client.keyUsage).toEqual([CLIENT_AUTH]);
    expect(client.checkIssued(ca) && client.verify(ca.publicKey)).toBe(true);
  });

  it("dojang serves TLS with them and names the client upstream by its URI SAN; without the client certificate the call is refused", async () => {
    // the upstream: the quick start's echo, recording what dojang sent
    const seen: (string | undefined)[] = [];
    upstream = new grpc.Server();
    const id = (b: Buffer) => b;
    upstream.addService(
      { Echo: { path: "/demo.Echo/Echo", requestStream: false, responseStream: false, requestSerialize: id, requestDeserialize: id, responseSerialize: id, responseDeserialize: id } },
      {
        Echo: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
          seen.push(call.metadata.get("x-forwarded-client-cert")[0]?.toString());
          cb(null, call.request);
        },
      },
    );
    const upPort = await new Promise<number>((res, rej) => upstream!.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, p) => (e ? rej(e) : res(p))));
    const listen = await freePort();
    const move = (text: string) => text.replaceAll("127.0.0.1:8443", `127.0.0.1:${listen}`).replaceAll("localhost:8443", `localhost:${listen}`).replaceAll("127.0.0.1:50051", `127.0.0.1:${upPort}`);
    expect(move(configText)).not.toBe(configText);
    expect(move(callLine)).toContain(`localhost:${listen}`);

    // the config in a subfolder, its paths relative to the working directory
    mkdirSync(join(tmp.dir, "conf"), { recursive: true });
    writeFileSync(join(tmp.dir, "conf", "edge-try.yaml"), move(configText));
    const fromCerts = await runToEnd(process.execPath, [CLI, "--check", "--config", "conf/edge-try.yaml"], tmp.dir);
    expect(fromCerts.code, fromCerts.out).toBe(0);
    const fromConfigDir = await runToEnd(process.execPath, [CLI, "--check", "--config", "edge-try.yaml"], join(tmp.dir, "conf"));
    expect(fromConfigDir.code).toBe(2);
    expect(fromConfigDir.out).toContain('listeners[0].tls.certFile: cannot read "server.pem": ENOENT');

    const d = start(process.execPath, [CLI, "--config", "conf/edge-try.yaml"], tmp.dir);
    await waitFor("dojang started", () => {
      if (d.child.exitCode !== null) throw new Error(`dojang exited: ${d.out()}`);
      return d.out().includes("dojang started") ? true : undefined;
    }, 15_000);

    // the guide's one-liner, run where the certificates are (@grpc/grpc-js from this clone)
    const env = childEnv({ NODE_PATH: join(REPO_ROOT, "node_modules") });
    const ok = await runToEnd(process.execPath, ["-e", move(callLine)], tmp.dir, env);
    expect(ok.out.trim()).toBe("OK: hello over mTLS");
    expect(ok.code).toBe(0);
    const der = new X509Certificate(readFileSync(join(tmp.dir, "client.pem"))).raw;
    expect(seen).toEqual([`Hash=${createHash("sha256").update(der).digest("hex")};Subject="CN=web";URI=spiffe://example.org/ns/default/sa/web`]);

    const withoutCert = move(callLine).replace('createSsl(fs.readFileSync("ca.pem"),fs.readFileSync("client.key"),fs.readFileSync("client.pem"))', 'createSsl(fs.readFileSync("ca.pem"))');
    expect(withoutCert).not.toContain("client.pem");
    const refused = await runToEnd(process.execPath, ["-e", withoutCert], tmp.dir, env);
    expect(refused.out.trim()).toMatch(/^UNAVAILABLE \(14\): /);
    expect(seen).toHaveLength(1);
  });
});
