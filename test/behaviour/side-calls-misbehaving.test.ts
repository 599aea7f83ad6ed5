// Issue "dojang 0.5.1: what outside judges found", item 8: every side call ends within its
// timeout, whatever the service does. The three side calls (the global rate limit's
// ShouldRateLimit, extAuthz's Check, the JWKS fetch) each meet services that misbehave on purpose
// (helpers/misbehaving.ts: raw node:http2, node:https and node:net peers that reset with each
// RST_STREAM code, hang, half-close, answer garbage, the wrong content type or a cut-short frame,
// close the connection mid-call or send GOAWAY), one service per misbehaviour, one route per
// service. For each: the call through dojang ends within the side call's timeout plus the margin
// below, the side call is counted once under the result the table names, and the route's
// failure mode decides the call (admitted or refused; for JWKS, 16).
import http2 from "node:http2";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDojang, type DojangHandle } from "../../src/index.js";
import { echoAll, h2Call, memoryLogger, signingKey, token } from "../helpers/auth.js";
import { CertDir, type Ca, type CertFiles } from "../helpers/certs.js";
import { H2_BEHAVIOURS, HTTPS_BEHAVIOURS, NET_BEHAVIOURS, TLS_NET_BEHAVIOURS, startMisbehavingGrpc, startMisbehavingJwks, type Misbehaving } from "../helpers/misbehaving.js";
import { frame, sample, scrape, type RawUpstream } from "../helpers/peers.js";
import { sleep } from "../helpers/process.js";

const TIMEOUT_MS = 1000;
/**
 * What a call may take beyond its side call's timeout: dojang's own work, the upstream's round
 * trip when the call is admitted, and the event loop delays of a machine whose 2 cores run
 * several test processes at once (load average above 20 while this was written). A side call
 * that never settles, the defect, holds the call for the client's whole deadline (5 s here).
 */
const MARGIN_MS = 700;
// (the timeout is longer than a production one so that, on such a machine, the request does reach
// each misbehaving service before the timer ends it: the table's results are the services' doing)
const CLIENT_DEADLINE_MS = 5000;

let upstream: RawUpstream;
beforeAll(async () => {
  upstream = await echoAll();
});
afterAll(async () => {
  await upstream.close();
});

const GRPC_BEHAVIOURS = [...Object.keys(H2_BEHAVIOURS), ...Object.keys(NET_BEHAVIOURS)];

/** One call through `px` on behaviour `i`'s route: what it ended as, and how long it took. */
async function callRoute(px: DojangHandle, i: number, headers: Record<string, string> = {}): Promise<{ ended: string; ms: number }> {
  const t0 = performance.now();
  const r = await h2Call(px.address, `/b${i}.S/Call`, { "grpc-timeout": `${CLIENT_DEADLINE_MS}m`, ...headers });
  const ms = performance.now() - t0;
  return { ended: `${r.status} ${px.calls.at(-1)?.decided_by}`, ms };
}

/**
 * A dojang with one route per misbehaving service (`/b<i>.S/`), and one without a side call that
 * a first call takes to open the upstream connection: what the table measures is the side call,
 * not the first connection to the upstream on a busy machine.
 */
async function proxyWith(routes: Record<string, unknown>[]): Promise<DojangHandle> {
  const px = await startDojang({
    logger: memoryLogger().logger,
    config: {
      admin: { address: "127.0.0.1:0" },
      journal: 1000,
      listeners: [{ name: "main", address: "127.0.0.1:0", routes: [...routes.map((r, i) => ({ match: { service: `b${i}.S` }, cluster: "backend", ...r })), { match: { service: "warm.S" }, cluster: "backend" }] }],
      clusters: [{ name: "backend", endpoints: [upstream.address] }],
    },
  });
  expect((await h2Call(px.address, "/warm.S/Call")).status).toBe("0");
  return px;
}

/** The counter's samples for one service: result → count (zeros left out). */
function counted(text: string, metric: string, service: string, results: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of results) {
    const n = sample(text, metric, { service, result: r });
    if (n > 0) out[r] = n;
  }
  return out;
}

/**
 * What grpc-js makes of each misbehaviour, as the side call counts it. Where two results are
 * listed the race is grpc-js's own (which of its reconnect and the timer ends first): either is a
 * failure counted once and the call ends in time.
 */
const GRPC_RESULT: Readonly<Record<string, string>> = {
  "reset NO_ERROR": "error",
  "reset PROTOCOL_ERROR": "error",
  "reset INTERNAL_ERROR": "error",
  "reset FLOW_CONTROL_ERROR": "error",
  "reset SETTINGS_TIMEOUT": "error",
  "reset STREAM_CLOSED": "error",
  "reset FRAME_SIZE_ERROR": "error",
  "reset REFUSED_STREAM": "unavailable",
  "reset CANCEL": "error",
  "reset COMPRESSION_ERROR": "error",
  "reset CONNECT_ERROR": "error",
  "reset ENHANCE_YOUR_CALM": "error",
  "reset INADEQUATE_SECURITY": "error",
  "reset HTTP_1_1_REQUIRED": "error",
  "hangs (no answer)": "timeout",
  "answers headers, then hangs": "timeout",
  "half-closes (headers with END_STREAM, no status)": "error",
  "answers an undecodable message": "error",
  "answers the wrong content-type": "error",
  "answers HTTP 503": "unavailable",
  "cuts a message short (prefix says 100 bytes, 10 sent, then END_STREAM)": "error",
  "closes the connection mid-call": "unavailable",
  // grpc-js either fails the refused stream at once or first tries a new connection, which gets the same
  "sends GOAWAY (last stream 0) and keeps the connection": "error|unavailable",
  "sends GOAWAY PROTOCOL_ERROR after the stream, then hangs": "error",
  "answers garbage bytes instead of HTTP/2": "unavailable",
  "half-closes the TCP connection (FIN) after the request": "unavailable",
  "resets the TCP connection": "unavailable",
  // dojang connects to the service when the route is built; a connection that never speaks fails
  // at the cluster's connectTimeout (5 s), and a side call made after that finds its endpoint failed
  // and ends at once (before it, the call waits out its own timeout). The loop reaches this one
  // after the HTTP/2 misbehaviours, several of which wait out the 1 s timeout: near those 5 s, and
  // on a loaded machine past them (the full suite beside benchmarks: unavailable in both modes).
  "accepts and never speaks": "timeout|unavailable",
  "writes garbage bytes into the connection mid-call": "error",
  "sends an HTTP/2 frame cut short": "error",
};

describe("side calls against misbehaving services: each ends within its timeout, counted, and the failure mode applies", () => {
  it("the table names every misbehaviour", () => {
    expect(Object.keys(GRPC_RESULT).sort()).toEqual([...GRPC_BEHAVIOURS].sort());
    expect(GRPC_BEHAVIOURS.length).toBe(30);
  });

  describe.each([
    ["rateLimit.global (ShouldRateLimit)", "rls"],
    ["extAuthz (Check)", "ext"],
  ] as const)("%s", (_title, kind) => {
    let services: Misbehaving[] = [];
    let lenient: DojangHandle;
    let strict: DojangHandle;
    beforeAll(async () => {
      services = await Promise.all(GRPC_BEHAVIOURS.map((n) => startMisbehavingGrpc(n)));
      const route = (s: Misbehaving, strictMode: boolean): Record<string, unknown> =>
        kind === "rls"
          ? { rateLimit: { global: { service: s.address, domain: "d", timeout: `${TIMEOUT_MS}ms`, failureModeDeny: strictMode, descriptors: [[{ key: "k", value: "v" }]] } } }
          : { extAuthz: { address: s.address, timeout: `${TIMEOUT_MS}ms`, failOpen: !strictMode } };
      [lenient, strict] = await Promise.all([proxyWith(services.map((s) => route(s, false))), proxyWith(services.map((s) => route(s, true)))]);
    }, 60_000);
    afterAll(async () => {
      await Promise.all([lenient?.close(0), strict?.close(0)]);
      await Promise.all(services.map((s) => s.close()));
    });

    it("each misbehaviour: ended in time, counted once, decided by the failure mode", { timeout: 180_000 }, async () => {
      const metric = kind === "rls" ? "dojang_rate_limit_service_calls_total" : "dojang_ext_authz_calls_total";
      const results = kind === "rls" ? ["ok", "over_limit", "timeout", "unavailable", "error", "cancelled"] : ["allowed", "denied", "timeout", "unavailable", "error", "cancelled"];
      const late: string[] = [];
      const ends: Record<string, string> = {};
      const counts: Record<string, string> = {};
      for (let i = 0; i < services.length; i++) {
        const s = services[i]!;
        const [a, b] = await Promise.all([callRoute(lenient, i), callRoute(strict, i)]);
        for (const [mode, r] of [["lenient", a], ["strict", b]] as const) if (r.ms > TIMEOUT_MS + MARGIN_MS) late.push(`${s.name} (${mode}): ${Math.round(r.ms)} ms`);
        ends[s.name] = `${a.ended} / ${b.ended}`;
        const [ta, tb] = await Promise.all([scrape(lenient.adminAddress), scrape(strict.adminAddress)]);
        const ca = counted(ta, metric, s.address, results);
        const cb = counted(tb, metric, s.address, results);
        // counted once in each, under one of the results the table allows
        const allowed = GRPC_RESULT[s.name]!.split("|");
        counts[s.name] = [ca, cb].every((c) => Object.values(c).reduce((x, y) => x + y, 0) === 1 && allowed.includes(Object.keys(c)[0]!)) ? "once, as expected" : `${JSON.stringify(ca)} / ${JSON.stringify(cb)}`;
        expect(s.hits(), `${s.name}: the service was reached`).toBeGreaterThan(0);
      }
      expect(late).toEqual([]);
      // the failure mode: admitted (fail-open) / refused, decided by the side call's stage
      const want = kind === "rls" ? "0 upstream / 14 rate_limit_service_failed" : "0 upstream / 7 ext_authz";
      expect(ends).toEqual(Object.fromEntries(GRPC_BEHAVIOURS.map((n) => [n, want])));
      expect(counts).toEqual(Object.fromEntries(GRPC_BEHAVIOURS.map((n) => [n, "once, as expected"])));
    });

    it("a client that goes away while its question waits: the question ends with it, counted once as cancelled", { timeout: 30_000 }, async () => {
      const metric = kind === "rls" ? "dojang_rate_limit_service_calls_total" : "dojang_ext_authz_calls_total";
      const i = GRPC_BEHAVIOURS.indexOf("hangs (no answer)");
      const svc = services[i]!;
      const before = sample(await scrape(lenient.adminAddress), metric, { service: svc.address, result: "cancelled" });
      const s = http2.connect(`http://${lenient.address}`);
      s.on("error", () => {});
      try {
        const req = s.request({ ":method": "POST", ":path": `/b${i}.S/Call`, "content-type": "application/grpc", te: "trailers" });
        req.on("error", () => {});
        req.end(frame(Buffer.alloc(0)));
        await sleep(200);
        req.close(http2.constants.NGHTTP2_CANCEL);
        const t0 = performance.now();
        let n = before;
        while (n === before && performance.now() - t0 < 5000) {
          await sleep(20);
          n = sample(await scrape(lenient.adminAddress), metric, { service: svc.address, result: "cancelled" });
        }
        // counted once, and at the cancel, not when the timer would have ended the question
        expect(n - before).toBe(1);
        expect(performance.now() - t0).toBeLessThan(TIMEOUT_MS);
        expect(lenient.calls.at(-1)?.decided_by).toBe("client_cancel");
      } finally {
        s.close();
      }
    });
  });

  describe("jwt.jwks.url (the JWKS fetch)", () => {
    const NAMES = [...Object.keys(HTTPS_BEHAVIOURS), ...Object.keys(TLS_NET_BEHAVIOURS)];
    /** The fetch's result per misbehaviour. */
    const JWKS_RESULT: Readonly<Record<string, string>> = {
      "hangs (no answer)": "timeout",
      "answers headers, then hangs": "timeout",
      "trickles one byte every 50 ms (never idle for the timeout)": "timeout",
      "half-closes (FIN) after the request": "unavailable",
      "answers the wrong content-type (an HTML page)": "error",
      "answers JSON that is not a JWKS": "error",
      "answers HTTP 503": "error",
      "cuts the body short (content-length 1000, 10 sent, connection closed)": "unavailable",
      "cuts the body short (content-length 1000, 10 sent, then hangs)": "timeout",
      "closes the connection mid-response (chunked body, no last chunk)": "unavailable",
      "answers more than 1 MiB": "error",
      "answers garbage bytes instead of TLS": "error",
      "resets the TCP connection": "unavailable",
      "accepts and never speaks (TLS handshake hangs)": "timeout",
    };
    let certs: CertDir;
    let ca: Ca;
    let leaf: CertFiles;
    let services: (Misbehaving & { url: string })[] = [];
    let px: DojangHandle;
    beforeAll(async () => {
      certs = new CertDir();
      ca = certs.ca("jwks-ca");
      leaf = certs.leaf(ca, "jwks", { cn: "jwks.test", ip: ["127.0.0.1"] });
      services = await Promise.all(NAMES.map((n) => startMisbehavingJwks(n, leaf)));
      px = await proxyWith(services.map((s) => ({ jwt: { issuer: "https://issuer.test", jwks: { url: s.url, caFile: ca.certFile, timeout: `${TIMEOUT_MS}ms` } } })));
    }, 60_000);
    afterAll(async () => {
      await px?.close(0);
      await Promise.all(services.map((s) => s.close()));
      certs?.remove();
    });

    it("the table names every misbehaviour", () => {
      expect(Object.keys(JWKS_RESULT).sort()).toEqual([...NAMES].sort());
    });

    it("each misbehaviour: the call waiting for the keys ends 16 in time, its fetch counted once", { timeout: 120_000 }, async () => {
      const key = await signingKey("ES256", "k1");
      const bearer = `Bearer ${await token(key, { iss: "https://issuer.test" })}`;
      // past the one-second pause after the fetch the config's load started: each call fetches anew and waits for it
      await sleep(1100);
      const late: string[] = [];
      const ends: Record<string, string> = {};
      const counts: Record<string, string> = {};
      for (let i = 0; i < services.length; i++) {
        const s = services[i]!;
        const results = ["ok", "timeout", "unavailable", "error"];
        const before = counted(await scrape(px.adminAddress), "dojang_jwks_fetches_total", s.url, results);
        const r = await callRoute(px, i, { authorization: bearer });
        if (r.ms > TIMEOUT_MS + MARGIN_MS) late.push(`${s.name}: ${Math.round(r.ms)} ms`);
        ends[s.name] = `${r.ended} ${px.calls.at(-1)?.grpc_message}`;
        const after = counted(await scrape(px.adminAddress), "dojang_jwks_fetches_total", s.url, results);
        // the call's own fetch (the one the config's load started may have met a busier machine)
        counts[s.name] = JSON.stringify(Object.fromEntries(results.map((x) => [x, (after[x] ?? 0) - (before[x] ?? 0)]).filter(([, n]) => n !== 0)));
        expect(s.hits(), `${s.name}: the server was reached`).toBeGreaterThan(0);
      }
      expect(late).toEqual([]);
      expect(ends).toEqual(Object.fromEntries(NAMES.map((n) => [n, "16 jwt jwt: verification keys unavailable"])));
      expect(counts).toEqual(Object.fromEntries(NAMES.map((n) => [n, JSON.stringify({ [JWKS_RESULT[n]!]: 1 })])));
    });
  });
});
