import { describe, expect, it } from "vitest";
import { compileRoutes } from "../../src/proxy/router.js";
import type { RouteConfig } from "../../src/config/index.js";

const r = (match: RouteConfig["match"], cluster: string): RouteConfig => ({
  match,
  cluster,
  timeoutMs: null,
  maxRequestMessageBytes: 4194304,
  maxResponseMessageBytes: 4194304,
  faults: [],
  streamIdleTimeoutMs: null,
  retry: null,
  rateLimit: null,
  headers: null,
  rewriteAuthority: null,
  rewritePrefix: null,
  jwt: null,
  rbac: null,
  extAuthz: null,
});

describe("compileRoutes(): routes matched in order on exact path, path prefix, or gRPC service name; optional authority", () => {
  const router = compileRoutes(
    [
      r({ path: "/pkg.Svc/Special" }, "special"),
      r({ service: "pkg.Svc", authority: "api.example.com" }, "api"),
      r({ service: "pkg.Svc" }, "svc"),
      r({ prefix: "/other." }, "other"),
    ],
    (name) => name,
  );

  it("matches an exact path before a later service route", () => {
    expect(router.match("/pkg.Svc/Special", undefined)?.cluster).toBe("special");
  });
  it("matches a service name on any of its methods, and only on whole service names", () => {
    expect(router.match("/pkg.Svc/Other", undefined)?.cluster).toBe("svc");
    expect(router.match("/pkg.SvcX/Other", undefined)).toBeUndefined();
  });
  it("limits a route to its authority, ignoring the port and case", () => {
    expect(router.match("/pkg.Svc/M", "API.example.com:443")?.cluster).toBe("api");
    expect(router.match("/pkg.Svc/M", "other.example.com")?.cluster).toBe("svc");
  });
  it("matches prefixes and returns undefined when nothing matches", () => {
    expect(router.match("/other.Thing/M", undefined)?.cluster).toBe("other");
    expect(router.match("/nothing.Here/M", undefined)).toBeUndefined();
  });
  it("tries routes in config order: the first match wins even when a later one is more specific", () => {
    const first = compileRoutes([r({ prefix: "/" }, "all"), r({ path: "/a.B/C" }, "exact")], (n) => n);
    expect(first.match("/a.B/C", undefined)?.cluster).toBe("all");
  });
  it("labels routes for logs", () => {
    expect(router.routes.map((x) => x.label)).toEqual(["path:/pkg.Svc/Special", "service:pkg.Svc@api.example.com", "service:pkg.Svc", "prefix:/other."]);
  });
});
