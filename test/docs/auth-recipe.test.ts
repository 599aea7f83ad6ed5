// The auth guide's recipe for a JWKS and a signed token (issue "a fleet operator's first hour",
// item 7), run as written: the shell block after <!-- auth:recipe --> runs with sh in an empty
// folder that finds the clone's node_modules (the guide says to run it inside the clone), with
// the machine's openssl; jwks.json's key must be openssl's own public key (`openssl pkey
// -pubout`, compared as DER); the config after <!-- auth:config --> (ports moved) starts a real
// dojang in that folder; the call after <!-- auth:call --> goes through with the token, and is
// refused 16 without one and with a token signed by another key, before the upstream.
import type { ChildProcess } from "node:child_process";
import { createPublicKey } from "node:crypto";
import { readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { CLI, REPO_ROOT, assertDistBuilt, childEnv, freePort, killSpawned, spawnGroup, tempDir, waitFor } from "../helpers/process.js";
import { blockAfterMarker, readDoc } from "../helpers/readme.js";

const guide = readDoc("docs/guides/auth.md");
const recipe = blockAfterMarker(guide, "auth:recipe", "sh");
const configText = blockAfterMarker(guide, "auth:config", "yaml");
const callBlock = blockAfterMarker(guide, "auth:call", "sh");
/** The call's program: the block is `TOKEN=$(cat token.txt) node -e '...'`. */
const callProgram = /^TOKEN=\$\(cat token\.txt\) node -e '([^'\n]+)'$/.exec(callBlock.trim())?.[1] ?? `not the expected one-liner: ${callBlock}`;

const tmp = tempDir();
let upstream: grpc.Server | undefined;
/** What reached the upstream: each call's x-jwt-claims (decoded) and whether it had authorization. */
const reached: { claims: Record<string, unknown> | null; authorization: boolean }[] = [];

beforeAll(async () => {
  assertDistBuilt();
  // the recipe's `node` lines import jose: a folder "inside the clone" finds its node_modules
  symlinkSync(join(REPO_ROOT, "node_modules"), join(tmp.dir, "node_modules"), "dir");
});
afterEach(async () => {
  await killSpawned();
});
afterAll(() => {
  upstream?.forceShutdown();
  tmp.remove();
});

interface Run {
  child: ChildProcess;
  out(): string;
  done: Promise<number | null>;
}

function start(cmd: string, args: readonly string[], env: NodeJS.ProcessEnv = childEnv()): Run {
  const child = spawnGroup(cmd, [...args], { cwd: tmp.dir, env, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout!.setEncoding("utf8").on("data", (d: string) => (out += d));
  child.stderr!.setEncoding("utf8").on("data", (d: string) => (out += d));
  return { child, out: () => out, done: new Promise((r) => child.once("close", (code) => r(code))) };
}

async function runToEnd(cmd: string, args: readonly string[], env?: NodeJS.ProcessEnv): Promise<{ code: number | null; out: string }> {
  const r = start(cmd, args, env);
  return { code: await r.done, out: r.out() };
}

function startUpstream(): Promise<number> {
  const id = (b: Buffer) => b;
  upstream = new grpc.Server();
  upstream.addService(
    { Echo: { path: "/demo.Echo/Echo", requestStream: false, responseStream: false, requestSerialize: id, requestDeserialize: id, responseSerialize: id, responseDeserialize: id } },
    {
      Echo: (c: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
        const claims = c.metadata.get("x-jwt-claims")[0];
        reached.push({ claims: typeof claims === "string" ? (JSON.parse(Buffer.from(claims, "base64url").toString("utf8")) as Record<string, unknown>) : null, authorization: c.metadata.get("authorization").length > 0 });
        cb(null, c.request);
      },
    },
  );
  return new Promise((resolve, reject) => upstream!.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (e, port) => (e ? reject(e) : resolve(port))));
}

describe("docs/guides/auth.md, a key and a token to try it with", () => {
  it("makes an ES256 key pair, a JWKS of its public half (openssl's own key) and a token dojang takes; without it, or signed by another key, 16 before the upstream", { timeout: 120_000 }, async () => {
    writeFileSync(join(tmp.dir, "recipe.sh"), recipe + "\n");
    const made = await runToEnd("sh", ["-eu", "recipe.sh"]);
    expect(made.code, made.out).toBe(0);

    // jwks.json carries openssl's public key, not some other key
    const jwks = JSON.parse(readFileSync(join(tmp.dir, "jwks.json"), "utf8")) as { keys: Record<string, unknown>[] };
    expect(jwks.keys).toHaveLength(1);
    expect(jwks.keys[0]).toMatchObject({ kty: "EC", crv: "P-256", kid: "k1", alg: "ES256", use: "sig" });
    expect(jwks.keys[0]).not.toHaveProperty("d");
    const fromJwks = createPublicKey({ key: jwks.keys[0] as import("node:crypto").JsonWebKey, format: "jwk" }).export({ type: "spki", format: "der" });
    const fromOpenssl = createPublicKey(readFileSync(join(tmp.dir, "issuer.pub"))).export({ type: "spki", format: "der" });
    expect(fromJwks.equals(fromOpenssl)).toBe(true);
    const token = readFileSync(join(tmp.dir, "token.txt"), "utf8").trim();
    expect(token.split(".")).toHaveLength(3);

    const [listen, up] = [await freePort(), await startUpstream()];
    const move = (t: string) => t.replaceAll("127.0.0.1:8080", `127.0.0.1:${listen}`).replaceAll("127.0.0.1:50051", `127.0.0.1:${up}`);
    writeFileSync(join(tmp.dir, "auth.yaml"), move(configText));
    const dojang = start(process.execPath, [CLI, "--config", "auth.yaml"]);
    await waitFor("dojang", () => (dojang.out().includes('"msg":"dojang started"') ? true : dojang.child.exitCode !== null ? Promise.reject(new Error(dojang.out())) : undefined), 30_000);

    const call = (t: string) => runToEnd(process.execPath, ["-e", move(callProgram)], childEnv({ TOKEN: t }));
    const ok = await call(token);
    expect(ok.out.trim()).toBe("OK: hello with a token");
    expect(reached).toHaveLength(1);
    expect(reached[0]).toMatchObject({ authorization: false, claims: { iss: "https://login.example.com", aud: "shop", sub: "alice", role: "admin" } });

    expect((await call("")).out.trim()).toBe("UNAUTHENTICATED (16): jwt: missing bearer token");

    // the same recipe in a second folder: another key, the same kid
    const other = join(tmp.dir, "other");
    await runToEnd("sh", ["-eu", "-c", `mkdir other && cd other && ln -s ../node_modules node_modules && sh -eu ../recipe.sh`]);
    const forged = readFileSync(join(other, "token.txt"), "utf8").trim();
    expect(forged).not.toBe(token);
    expect((await call(forged)).out.trim()).toBe("UNAUTHENTICATED (16): jwt: signature does not verify");
    expect(reached).toHaveLength(1);
  });
});
