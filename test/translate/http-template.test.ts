// google.api.http path templates (src/translate/http-template.ts): the grammar of http.proto,
// vectors for each construct, and properties: a path built from a template and values matches it
// and gives the values back; a changed literal never matches.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { matchTemplate, parseTemplate, TemplateError } from "../../src/translate/http-template.js";

const m = (t: string, p: string): Record<string, string | null> | null => {
  const tt = parseTemplate(t);
  const r = matchTemplate(tt, p);
  return r === null ? null : Object.fromEntries(tt.variables.map((v, i) => [v.path, r[i]!]));
};

describe("parseTemplate", () => {
  it("reads literals, *, **, variables with and without segments, nested field paths and the verb", () => {
    const t = parseTemplate("/v1/{name=shelves/*}/books/{book.id}:publish");
    expect(t.segments.map((s) => (s.kind === "literal" ? s.text : s.kind))).toEqual(["v1", "shelves", "one", "books", "one"]);
    expect(t.variables).toEqual([
      { field: ["name"], path: "name", start: 1, end: 3 },
      { field: ["book", "id"], path: "book.id", start: 4, end: 5 },
    ]);
    expect(t.verb).toBe("publish");
    expect(parseTemplate("/v1/{path=**}").rest).toBe(true);
    expect(parseTemplate("/").segments).toEqual([]);
  });

  it.each([
    ["v1/x", "must start"],
    ["/v1/**/x", '"**" must be the last'],
    ["/v1/{a", '"{" without "}"'],
    ["/v1/{a}/{a}", "bound twice"],
    ["/v1/{a-b}", "bad field path"],
    ["/v1//x", "bad segment"],
    ["/v1/x/", 'ends with "/"'],
    ["/v1/{a=}", "empty segments"],
    ["/v1/x:", "bad verb"],
    ["/v1/{a={b}}", "nested"],
  ])("refuses %s (%s)", (src, why) => {
    expect(() => parseTemplate(src)).toThrow(TemplateError);
    expect(() => parseTemplate(src)).toThrow(why);
  });
});

describe("matchTemplate", () => {
  it("binds one-segment variables decoded in full, multi-segment ones with %2F kept", () => {
    expect(m("/v1/{name=shelves/*}/items/{id}", "/v1/shelves/s%201/items/a%2Fb")).toEqual({ name: "shelves/s 1", id: "a/b" });
    expect(m("/v1/files/{path=**}", "/v1/files/a/b%2Fc/%C3%A9")).toEqual({ path: "a/b%2Fc/é" });
    expect(m("/v1/files/{path=**}", "/v1/files")).toEqual({ path: "" });
    expect(m("/v1/*/x", "/v1/anything/x")).toEqual({});
  });

  it("the verb is matched and stripped; without one a colon is part of the segment", () => {
    expect(m("/v1/items/{id}:archive", "/v1/items/7:archive")).toEqual({ id: "7" });
    expect(m("/v1/items/{id}:archive", "/v1/items/7")).toBeNull();
    expect(m("/v1/items/{id}", "/v1/items/7:archive")).toEqual({ id: "7:archive" });
  });

  it("refuses other lengths, other literals and empty segments", () => {
    expect(m("/v1/{id}", "/v1/a/b")).toBeNull();
    expect(m("/v1/{id}", "/v2/a")).toBeNull();
    expect(m("/v1/{id}", "/v1/")).toBeNull();
    expect(m("/v1/{id}", "v1/a")).toBeNull();
  });

  it("matches a value whose escapes are malformed or not UTF-8, as null (a bad request for this rule, not a miss)", () => {
    expect(m("/v1/{id}", "/v1/%zz")).toEqual({ id: null });
    expect(m("/v1/{id}", "/v1/%FF")).toEqual({ id: null });
    expect(m("/v1/{id}", "/v1/%C3")).toEqual({ id: null });
    expect(m("/v1/files/{path=**}", "/v1/files/a/%FF/b")).toEqual({ path: null });
    expect(m("/v1/files/{path=**}", "/v1/files/a%2Fb/%zz")).toEqual({ path: null });
    expect(m("/v1/files/{path=**}", "/v1/files/a%2Fb/%C3%A9")).toEqual({ path: "a%2Fb/é" });
  });

  const seg = fc.stringMatching(/^[A-Za-z0-9._~-]{1,8}$/);
  const value = fc.string({ minLength: 1, maxLength: 8 }).filter((s) => !s.includes("/"));

  it("property: a path made from a template's literals and any values matches and gives the values back", () => {
    fc.assert(
      fc.property(fc.array(seg, { minLength: 1, maxLength: 4 }), fc.array(value, { minLength: 1, maxLength: 3 }), (lits, vals) => {
        const src = "/" + [...lits, ...vals.map((_, i) => `{f${i}}`)].join("/");
        const path = "/" + [...lits, ...vals.map(encodeURIComponent)].join("/");
        expect(m(src, path)).toEqual(Object.fromEntries(vals.map((v, i) => [`f${i}`, v])));
      }),
    );
  });

  it("property: a ** variable takes any number of segments back as sent (minus decoding outside %2F)", () => {
    fc.assert(
      fc.property(fc.array(seg, { minLength: 0, maxLength: 5 }), (parts) => {
        expect(m("/r/{p=**}", "/r" + parts.map((p) => "/" + p).join(""))).toEqual({ p: parts.join("/") });
      }),
    );
  });

  it("property: a changed literal never matches", () => {
    fc.assert(
      fc.property(fc.array(seg, { minLength: 1, maxLength: 4 }), fc.nat(), seg, (lits, at, other) => {
        const i = at % lits.length;
        fc.pre(other !== lits[i]);
        const changed = lits.map((l, j) => (j === i ? other : l));
        expect(m("/" + lits.join("/"), "/" + changed.join("/"))).toBeNull();
      }),
    );
  });
});
