// The failed-calls journal (issue "dojang 0.6: what an operator sees", item 3): on by default
// (`failedCalls: 1000`), it keeps the access records of the last calls that did not end 0 OK,
// whatever `journal` says, for GET /calls?failed[&since=60s]; a reload resizes it. The access
// record names the verified JWT's subject and the rbac rule that decided. Keys: failedCalls.
import { writeFileSync } from "node:fs";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfigValue } from "../../src/config/index.js";
import { startDojang } from "../../src/index.js";
import { CertDir } from "../helpers/certs.js";
import { echoAll, h2Call, jwks, signingKey, token, type SigningKey } from "../helpers/auth.js";
import { useFixtures } from "../helpers/fixtures.js";
import { startBackend, type Backend } from "../helpers/backends.js";
import { unary, type RawUpstream } from "../helpers/peers.js";

const fx = useFixtures();

interface Rec {
  path: string;
  grpc_code: number;
  decided_by: string;
  start_ms: number;
  duration_ms: number;
  jwt_subject?: string;
  rbac_rule?: string;
  request_id: string;
}

async function get(admin: string | undefined, q: string): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`http://${admin}/calls${q}`);
  return { status: res.status, body: await res.json() };
}

async function failed(admin: string | undefined, q = "", want?: number): Promise<Rec[]> {
  const end = performance.now() + 5000;
  for (;;) {
    const r = await get(admin, `?failed${q}`);
    expect(r.status).toBe(200);
    const recs = r.body as Rec[];
    if (want === undefined || recs.length >= want || performance.now() > end) return recs;
    await new Promise((res) => setTimeout(res, 20));
  }
}

function config(upstream: string, top: Record<string, unknown>): Record<string, unknown> {
  return {
    admin: { address: "127.0.0.1:0" },
    listeners: [{ name: "main", address: "127.0.0.1:0", routes: [{ match: { prefix: "/" }, cluster: "backend" }] }],
    clusters: [{ name: "backend", endpoints: [upstream] }],
    ...top,
  };
}

async function failTimes(b: Backend, c: ReturnType<typeof fx.client>, n: number, code: grpc.status): Promise<void> {
  b.failWith = code;
  for (let i = 0; i < n; i++) expect((await unary(c, Buffer.from(`f${i}`))).err?.code).toBe(code);
  b.failWith = undefined;
}

describe("failedCalls: the last failed calls, for GET /calls?failed", () => {
  it("is on by default with the journal off: keeps the failed calls only, oldest first", async () => {
    const b = fx.track(await startBackend("b"), (x) => x.close());
    const px = await fx.proxyFor(b.address, { top: { journal: 0 } });
    expect(px.instance.config.failedCalls).toBe(1000);
    const c = fx.client(px.address);
    expect((await unary(c, Buffer.from("ok"))).err).toBeNull();
    await failTimes(b, c, 2, grpc.status.UNAVAILABLE);
    expect((await unary(c, Buffer.from("ok"))).err).toBeNull();
    const recs = await failed(px.adminAddress, "", 2);
    expect(recs.map((r) => [r.path, r.grpc_code, r.decided_by])).toEqual([
      ["/test.Echo/Unary", 14, "upstream"],
      ["/test.Echo/Unary", 14, "upstream"],
    ]);
    expect(recs[0]!.start_ms).toBeLessThanOrEqual(recs[1]!.start_ms);
    // the journal itself keeps nothing
    expect((await get(px.adminAddress, "")).body).toEqual([]);
  });

  it("failedCalls: 2 keeps the last two; a reload to 1 keeps the newest; a reload to 0 keeps none from then on", async () => {
    const b = fx.track(await startBackend("b"), (x) => x.close());
    const px = fx.track(await startDojang({ logLevel: "silent", config: config(b.address, { failedCalls: 2 }) }), (p) => p.close(0));
    const c = fx.client(px.address);
    await failTimes(b, c, 1, grpc.status.NOT_FOUND);
    await failTimes(b, c, 1, grpc.status.ABORTED);
    await failTimes(b, c, 1, grpc.status.INTERNAL);
    await new Promise((r) => setTimeout(r, 200));
    expect((await failed(px.adminAddress)).map((r) => r.grpc_code)).toEqual([10, 13]);

    const next = (n: number) => {
      const r = parseConfigValue(config(b.address, { failedCalls: n, admin: { address: px.adminAddress } }));
      if (!r.ok) throw new Error(JSON.stringify(r.issues));
      return r.config;
    };
    const r1 = await px.instance.reload(next(1));
    expect(r1.applied).toContain("failedCalls");
    expect((await failed(px.adminAddress)).map((r) => r.grpc_code)).toEqual([13]);
    await px.instance.reload(next(0));
    await failTimes(b, c, 1, grpc.status.DATA_LOSS);
    await new Promise((r) => setTimeout(r, 200));
    expect(await failed(px.adminAddress)).toEqual([]);
  });

  it("since=DURATION keeps the calls that ended within it; last=N the last N", async () => {
    const b = fx.track(await startBackend("b"), (x) => x.close());
    const px = await fx.proxyFor(b.address);
    const c = fx.client(px.address);
    await failTimes(b, c, 2, grpc.status.NOT_FOUND);
    await new Promise((r) => setTimeout(r, 600));
    await failTimes(b, c, 1, grpc.status.UNAVAILABLE);
    await failed(px.adminAddress, "", 3);
    expect((await failed(px.adminAddress, "&since=400ms")).map((r) => r.grpc_code)).toEqual([14]);
    expect((await failed(px.adminAddress, "&since=60s")).map((r) => r.grpc_code)).toEqual([5, 5, 14]);
    expect((await failed(px.adminAddress, "&last=2")).map((r) => r.grpc_code)).toEqual([5, 14]);
    // a duration without its unit is refused, as in the config
    for (const bad of ["?failed&since=60", "?failed&since=soon", "?failed=no", "?failed&last=-1"]) expect((await get(px.adminAddress, bad)).status, bad).toBe(400);
  });
});

describe("the access record names who the caller was and which rule decided (jwt_subject, rbac_rule)", () => {
  let certs: CertDir;
  let upstream: RawUpstream;
  let key: SigningKey;
  let jwksFile: string;
  const ISS = "https://issuer.test";
  beforeAll(async () => {
    certs = new CertDir();
    upstream = await echoAll();
    key = await signingKey("ES256", "k1");
    jwksFile = certs.path("jwks.json");
    writeFileSync(jwksFile, JSON.stringify(jwks(key)));
  }, 60_000);
  afterAll(async () => {
    await upstream.close();
    certs.remove();
  });

  it("a denied call carries the subject and the deny rule; an allowed one the allow rule; the default says (default)", async () => {
    const px = fx.track(
      await startDojang({
        logLevel: "silent",
        config: {
          admin: { address: "127.0.0.1:0" },
          journal: 100,
          listeners: [
            {
              name: "main",
              address: "127.0.0.1:0",
              routes: [
                {
                  match: { prefix: "/" },
                  cluster: "backend",
                  jwt: { issuer: ISS, jwks: { file: jwksFile } },
                  rbac: {
                    rules: [
                      { name: "no-deletes", action: "deny", methods: ["shop.Cart/Delete"] },
                      { name: "admins", action: "allow", claims: { "realm.roles": ["admin"] } },
                    ],
                    default: "deny",
                  },
                },
              ],
            },
          ],
          clusters: [{ name: "backend", endpoints: [upstream.address] }],
        },
      }),
      (p) => p.close(0),
    );
    const as = async (sub: string, roles: string[], path: string) => (await h2Call(px.address, path, { authorization: `Bearer ${await token(key, { iss: ISS, sub, realm: { roles } })}` })).status;
    expect(await as("alice", ["admin"], "/shop.Cart/Delete")).toBe("7");
    expect(await as("bob", ["admin"], "/shop.Cart/Get")).toBe("0");
    expect(await as("carol", ["dev"], "/shop.Cart/Get")).toBe("7");
    // no token: the jwt stage refuses; no subject, the rules never ran
    expect((await h2Call(px.address, "/shop.Cart/Get")).status).toBe("16");
    await new Promise((r) => setTimeout(r, 200));
    const all = (await get(px.adminAddress, "")).body as Rec[];
    expect(all.map((r) => [r.path, r.grpc_code, r.decided_by, r.jwt_subject, r.rbac_rule])).toEqual([
      ["/shop.Cart/Delete", 7, "rbac", "alice", "no-deletes"],
      ["/shop.Cart/Get", 0, "upstream", "bob", "admins"],
      ["/shop.Cart/Get", 7, "rbac", "carol", "(default)"],
      ["/shop.Cart/Get", 16, "jwt", undefined, undefined],
    ]);
    // the failed ones are in the failed-calls ring with the same fields
    expect((await failed(px.adminAddress)).map((r) => [r.jwt_subject, r.rbac_rule])).toEqual([
      ["alice", "no-deletes"],
      ["carol", "(default)"],
      [undefined, undefined],
    ]);
  });
});
