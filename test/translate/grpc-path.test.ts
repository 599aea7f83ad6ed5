// The gRPC method path (src/translate/grpc-path.ts): the grammar, the one canonical name, the URL
// normalisation a bridge applies, what a record shows. Vectors from the gRPC spec's path rule and
// RFC 3986's own examples; properties: a canonical path round-trips, no input throws, every
// accepted path is in the grammar (a regex written here, not dojang's), and a dressed form never
// yields an accepted method other than the one it names as a URL: a form that keeps the URL's
// meaning gives the same method, one that changes it is refused.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { isMethodPath, methodPathFromUrl, normalizeTarget, redactTarget, splitMethodPath } from "../../src/translate/grpc-path.js";

/** The grammar, written out independently: "/" service "/" method, protobuf identifiers. */
const GRAMMAR = /^\/[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\/[A-Za-z_][A-Za-z0-9_]*$/;

const identStart = fc.constantFrom(..."abcXYZ_");
const identRest = fc.string({ unit: fc.constantFrom(..."abcxyzABCXYZ0189_"), maxLength: 8 });
const ident = fc.tuple(identStart, identRest).map(([a, b]) => a + b);
/** A method path in the grammar: "/a.b.C/M". */
const methodPath = fc.tuple(fc.array(ident, { minLength: 1, maxLength: 4 }), ident).map(([svc, m]) => `/${svc.join(".")}/${m}`);

describe("isMethodPath: the gRPC grammar", () => {
  it("takes /Service/Method with a dotted service, case as it is", () => {
    for (const p of ["/pkg.Svc/Unary", "/a/b", "/_x/_y", "/grpc.health.v1.Health/Check", "/A1.b_2/C3", "/pkg.Svc/unary"]) expect(isMethodPath(p), p).toBe(true);
  });

  it("refuses every other shape (gRPC spec: '/' Service-Name '/' method name; grpc-go answers 12)", () => {
    const bad = [
      "", "/", "//", "/a", "/a/", "//b", "a/b", "/a/b/", "/a/b/c", "/a//b", "/a.b./c", "/.a/b", "/a..b/c", "/a/b.c", "/a/.b",
      "/1a/b", "/a/1b", "/a-b/c", "/a/b?x=1", "/a/b#f", "/a/b;p", "/a/b%61", "/a%2Fb/c", "/a\\b/c", "/a/b ", " /a/b", "/a/b\u0000",
      "/a/b\t", "/a/b\u007f", "/a/b\u00e9", "/a/\u00fcb", "/a/b\uff21", "/a/./b", "/a/../b", "*", "http://h/a/b", "/a/b\r\n",
    ];
    for (const p of bad) expect(isMethodPath(p), JSON.stringify(p)).toBe(false);
  });

  it("property: it agrees with the grammar written out as a regex, on any string", () => {
    fc.assert(fc.property(fc.oneof(fc.string(), fc.string({ unit: fc.constantFrom(..."/.aZ_9%?#;\\ \u0000\u00e9") }), methodPath), (s) => isMethodPath(s) === GRAMMAR.test(s)));
  });

  it("splitMethodPath splits at the one '/' after the service, and only a method path", () => {
    expect(splitMethodPath("/pkg.Svc/Unary")).toEqual(["pkg.Svc", "Unary"]);
    expect(splitMethodPath("/a/b/c")).toBeUndefined();
    expect(splitMethodPath(undefined)).toBeUndefined();
    fc.assert(fc.property(methodPath, (p) => `/${splitMethodPath(p)!.join("/")}` === p));
  });
});

describe("normalizeTarget: a URL as Envoy's normalize_path and merge_slashes read it", () => {
  it("keeps runs of slashes without `merge` (JSON transcoding: a path variable keeps its empty segment, as grpc-gateway's)", () => {
    expect(normalizeTarget("/v1/files/a//b", false)).toEqual({ ok: true, path: "/v1/files/a//b", query: "" });
    expect(normalizeTarget("/v1//query?x=1", false)).toEqual({ ok: true, path: "/v1//query", query: "x=1" });
    expect(normalizeTarget("/v1/./files/%61//b/../c", false)).toEqual({ ok: true, path: "/v1/files/a//c", query: "" });
    expect(normalizeTarget("/v1//query")).toEqual({ ok: true, path: "/v1/query", query: "" });
  });
  it("splits the query, decodes unreserved escapes, removes dot segments, merges slashes", () => {
    const cases: [string, string, string][] = [
      ["/pkg.Svc/Unary?x=1", "/pkg.Svc/Unary", "x=1"],
      ["/pkg.Svc/Unary?", "/pkg.Svc/Unary", ""],
      ["/pkg.Svc/Un%61ry", "/pkg.Svc/Unary", ""],
      ["/pkg%2eSvc/%55nary", "/pkg.Svc/Unary", ""],
      ["/a/%7e%2D%5F", "/a/~-_", ""],
      ["/a%2fb%5cc%3f", "/a%2Fb%5Cc%3F", ""], // escaped slashes kept (Envoy's KEEP_UNCHANGED), hex upper-cased
      ["/pkg.Svc/x/../Unary", "/pkg.Svc/Unary", ""],
      ["/pkg.Svc/./Unary", "/pkg.Svc/Unary", ""],
      ["/pkg.Svc/Open/%2e%2e/Unary", "/pkg.Svc/Unary", ""],
      ["/pkg.Svc/Open/.%2E/Unary", "/pkg.Svc/Unary", ""],
      ["/a/b/c/./../../g", "/a/g", ""], // RFC 3986 §5.2.4's own example
      ["/../a", "/a", ""],
      ["/a/..", "/", ""],
      ["/a/b/..", "/a/", ""],
      ["/a/.", "/a/", ""],
      ["//pkg.Svc//Unary", "/pkg.Svc/Unary", ""],
      ["/a//../b", "/a/b", ""],
      ["/a/..;x/b", "/a/..;x/b", ""], // not a dot segment: kept (and no method path)
      ["/v1/files/a%2Fb?x=%41", "/v1/files/a%2Fb", "x=%41"], // the query is returned as it came
    ];
    for (const [target, path, query] of cases) expect(normalizeTarget(target), target).toEqual({ ok: true, path, query });
  });

  it("refuses a fragment, a bad escape, and a target that is not a path", () => {
    for (const t of ["/a/b#x", "/a/b?x#y", "/a/b%", "/a/b%4", "/a/b%zz", "/a/%G1", "http://h/a/b", "a/b", "*", ""]) expect(normalizeTarget(t).ok, t).toBe(false);
  });

  it("property: a method path comes back as it is (the same string), with no query", () => {
    fc.assert(
      fc.property(methodPath, (p) => {
        const n = normalizeTarget(p);
        return n.ok && n.path === p && n.query === "" && methodPathFromUrl(p) === p;
      }),
    );
  });

  it("property: no input throws; whatever it accepts is a path with no dot segment, no doubled slash and no escaped unreserved character", () => {
    const noisy = fc.string({ unit: fc.constantFrom(..."/./.%2e%2E%61%2F%5C?#;\\aB_0 \u0000\u00e9"), maxLength: 40 });
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.string({ unit: "binary" }), noisy.map((s) => `/${s}`)), (t) => {
        const n = normalizeTarget(t);
        if (!n.ok) return true;
        const segs = n.path.split("/").slice(1);
        return n.path.startsWith("/") && !n.path.includes("//") && !segs.includes(".") && !segs.includes("..") && !/%(2[DdEe]|5[Ff]|7[Ee]|[46][1-9A-Fa-f]|[57][0-9Aa]|3[0-9])/.test(n.path);
      }),
    );
  });
});

describe("methodPathFromUrl: the method a Connect URL names, or none", () => {
  /** Dressings that keep a URL's meaning: the same method, as connect-go (net/http) reads it. */
  const encodeSome = (p: string, pick: readonly boolean[], lower: boolean): string =>
    [...p]
      .map((c, i) => (c !== "/" && pick[i % pick.length] ? `%${c.charCodeAt(0).toString(16).padStart(2, "0")[lower ? "toLowerCase" : "toUpperCase"]()}` : c))
      .join("");
  const keeping = fc.oneof(
    fc.tuple(fc.array(fc.boolean(), { minLength: 1, maxLength: 7 }), fc.boolean()).map(([pick, lower]) => (p: string) => encodeSome(p, pick, lower)),
    fc.constant((p: string) => `${p}?x=1`),
    fc.constant((p: string) => p.replace("/", "/./")),
    fc.constant((p: string) => p.replace(/\/([^/]*)$/, "/zz/../$1")),
    fc.constant((p: string) => p.replace(/\/([^/]*)$/, "/zz/%2e%2E/$1")),
    fc.constant((p: string) => `/x/..${p}`),
    fc.constant((p: string) => p.replace(/\//g, "//")),
  );
  /** Dressings that change a URL's meaning: another path as net/http reads it, or none; never the method. */
  const changing = fc.oneof(
    fc.constantFrom(";x=1", ";", "/", "%2F", "%5C", "\\", "%00", "\u0000", "%20", " ", "%09", "%3F", "%23", "#f", "%C0%AF", "%E0%80%AF", "\u00e9", "%C3%A4", "\uff21", ".", "-").map((d) => (p: string) => p + d),
    fc.constantFrom("%2F", "%5C", "\\", ";x", "%00", "%C0%AF").map((d) => (p: string) => p.replace(/\/([^/]*)$/, `${d}$1`)),
    fc.constant((p: string) => p.replace(/\/([^/]*)$/, "/zz/..;x/$1")),
    fc.constant((p: string) => `http://h${p}`),
  );

  it("property: a dressing that keeps the URL's meaning gives the same method", () => {
    fc.assert(fc.property(methodPath, keeping, (p, dress) => methodPathFromUrl(dress(p)) === p));
  });

  it("property: a dressing that changes it is refused, never read as the method (and never as another)", () => {
    fc.assert(fc.property(methodPath, changing, (p, dress) => methodPathFromUrl(dress(p)) === null));
  });

  it("property: strictly (gRPC, gRPC-Web) no dressing is a method path at all", () => {
    fc.assert(fc.property(methodPath, fc.oneof(keeping, changing), (p, dress) => dress(p) === p || !isMethodPath(dress(p))));
  });

  it("property: on any input it returns null or a method path in the grammar", () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.string({ unit: "binary" }), methodPath.map((p) => `${p}?q`)), (t) => {
        const m = methodPathFromUrl(t);
        return m === null || GRAMMAR.test(m);
      }),
    );
  });
});

describe("redactTarget: what a record may show of a target that is not a method path", () => {
  it("replaces the query or fragment, cuts what is very long", () => {
    expect(redactTarget("/pkg.Svc/Unary?access_token=s3cret")).toBe("/pkg.Svc/Unary?<redacted>");
    expect(redactTarget("/pkg.Svc/Unary#s3cret")).toBe("/pkg.Svc/Unary#<redacted>");
    expect(redactTarget("/a/b#x?y")).toBe("/a/b#<redacted>");
    expect(redactTarget("/pkg.Svc/Un%61ry")).toBe("/pkg.Svc/Un%61ry");
    expect(redactTarget(`/${"a".repeat(300)}?t=1`)).toBe(`/${"a".repeat(255)}…?<redacted>`);
  });

  it("property: nothing after a '?' or '#' is ever shown", () => {
    fc.assert(
      fc.property(fc.string({ unit: fc.constantFrom(..."/ab.%") }), fc.constantFrom("?", "#"), fc.string({ minLength: 1 }), (p, sep, secret) => {
        const shown = redactTarget(`${p}${sep}\u2603${secret}`);
        return !shown.includes("\u2603") && shown.length <= 256 + 1 + 11;
      }),
    );
  });
});
