// The path templates of google.api.http rules (google/api/http.proto): parsing and matching.
//
//   Template = "/" Segments [ Verb ] ;
//   Segments = Segment { "/" Segment } ;
//   Segment  = "*" | "**" | LITERAL | Variable ;
//   Variable = "{" FieldPath [ "=" Segments ] "}" ;
//   FieldPath = IDENT { "." IDENT } ;
//   Verb     = ":" LITERAL ;
//
// `*` matches one segment, `**` zero or more (only last, before the verb), `{f}` is `{f=*}`.
// A variable that spans one segment is percent-decoded in full; one that spans several keeps
// "%2F" (and "%2f") encoded, so a value's own slashes stay apart from the path's (http.proto's
// "reserved expansion"). A value whose escapes are malformed or decode to bytes that are not
// UTF-8 still matches, as null: the request is a bad one (400), not one for another rule.
// Pure: no I/O.

export type Segment = { readonly kind: "literal"; readonly text: string } | { readonly kind: "one" } | { readonly kind: "rest" };

export interface Variable {
  /** the field path, split at "." (proto field names) */
  readonly field: readonly string[];
  /** the field path as written ("a.b"), the name matchTemplate gives its value */
  readonly path: string;
  /** the first segment it covers */
  readonly start: number;
  /** one past its last segment (for a `**` variable: the end of the path) */
  readonly end: number;
}

export interface PathTemplate {
  readonly source: string;
  readonly segments: readonly Segment[];
  readonly variables: readonly Variable[];
  /** the custom verb after ":" ("" = none) */
  readonly verb: string;
  /** the template ends in `**` */
  readonly rest: boolean;
}

export class TemplateError extends Error {}

const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** what a LITERAL may hold: unreserved and sub-delims, ":" and "@", and percent escapes (RFC 3986 pchar) */
const LITERAL = /^(?:[A-Za-z0-9\-._~!$&'()*+,;=@]|%[0-9A-Fa-f]{2})+$/;

/** Parses `source`; throws TemplateError naming what is wrong. */
export function parseTemplate(source: string): PathTemplate {
  const fail = (why: string): never => {
    throw new TemplateError(`path template ${JSON.stringify(source)}: ${why}`);
  };
  if (!source.startsWith("/")) fail('must start with "/"');
  let body = source.slice(1);
  // the verb: a ":" after the last "/" and outside any variable
  let verb = "";
  const lastSlash = body.lastIndexOf("/");
  const lastClose = body.lastIndexOf("}");
  const colon = body.indexOf(":", Math.max(lastSlash, lastClose) + 1);
  if (colon >= 0) {
    verb = body.slice(colon + 1);
    body = body.slice(0, colon);
    if (!LITERAL.test(verb) || verb.includes(":")) fail(`bad verb ${JSON.stringify(verb)}`);
  }
  const segments: Segment[] = [];
  const variables: Variable[] = [];
  const names = new Set<string>();
  // "/" alone: the root, no segments
  let i = body === "" ? 1 : 0;
  const segment = (text: string): void => {
    if (text === "*") segments.push({ kind: "one" });
    else if (text === "**") segments.push({ kind: "rest" });
    else if (text === "" || !LITERAL.test(text) || text.includes("{") || text.includes("}")) fail(`bad segment ${JSON.stringify(text)}`);
    else segments.push({ kind: "literal", text });
  };
  while (i <= body.length) {
    if (body[i] === "{") {
      const close = body.indexOf("}", i);
      if (close < 0) fail('"{" without "}"');
      const inner = body.slice(i + 1, close);
      if (inner.includes("{")) fail("nested variables");
      const eq = inner.indexOf("=");
      const path = eq < 0 ? inner : inner.slice(0, eq);
      const field = path.split(".");
      if (!field.every((p) => IDENT.test(p))) fail(`bad field path ${JSON.stringify(path)}`);
      if (names.has(path)) fail(`field ${path} bound twice`);
      names.add(path);
      const start = segments.length;
      if (eq < 0) segments.push({ kind: "one" });
      else {
        const sub = inner.slice(eq + 1);
        if (sub === "") fail(`empty segments for ${path}`);
        for (const s of sub.split("/")) segment(s);
      }
      variables.push({ field, path, start, end: segments.length });
      i = close + 1;
    } else {
      let j = i;
      while (j < body.length && body[j] !== "/") j++;
      segment(body.slice(i, j));
      i = j;
    }
    if (i >= body.length) break;
    if (body[i] !== "/") fail(`expected "/" at ${i + 1}`);
    i++;
    if (i === body.length) fail("ends with \"/\"");
  }
  const restAt = segments.findIndex((s) => s.kind === "rest");
  if (restAt >= 0 && restAt !== segments.length - 1) fail('"**" must be the last segment');
  return { source, segments, variables, verb, rest: restAt >= 0 };
}

/**
 * Matches a request path (without its query; still percent-encoded) against a template: the
 * variables' values, in the order of `t.variables` (null for a value that does not decode), or
 * null when it does not match.
 */
export function matchTemplate(t: PathTemplate, path: string): (string | null)[] | null {
  if (path.charCodeAt(0) !== 47 /* / */) return null;
  let end = path.length;
  if (t.verb !== "") {
    // ":" + verb at the end (the verb is a literal: no "/" in it, so it never reaches the leading one)
    end -= t.verb.length + 1;
    if (end < 1 || path.charCodeAt(end) !== 58 /* : */ || !path.endsWith(t.verb)) return null;
  }
  const p = path.slice(1, end);
  const parts = p === "" ? [] : p.split("/");
  const segs = t.segments;
  if (t.rest ? parts.length < segs.length - 1 : parts.length !== segs.length) return null;
  for (let i = 0; i < segs.length; i++) {
    const s = segs[i]!;
    if (s.kind === "rest") break;
    const part = parts[i]!;
    if (part === "") return null;
    if (s.kind === "literal" && part !== s.text) return null;
  }
  const vars = t.variables;
  const out = new Array<string | null>(vars.length);
  for (let k = 0; k < vars.length; k++) {
    const v = vars[k]!;
    // a `**` variable runs to the end of the path, and keeps its encoded slashes
    const toEnd = t.rest && v.end === segs.length;
    const e = toEnd ? parts.length : v.end;
    out[k] = !toEnd && e - v.start === 1 ? decodeAll(parts[v.start]!) : decodeKeepSlash(parts.slice(v.start, e).join("/"));
  }
  return out;
}

function decodeAll(s: string): string | null {
  if (!s.includes("%")) return s;
  try {
    return decodeURIComponent(s);
  } catch {
    return null;
  }
}

/** Decoded but for the encoded slashes, which stay as they are; null when what is between them does not decode. */
function decodeKeepSlash(s: string): string | null {
  if (!s.includes("%")) return s;
  const pieces = s.split(/(%2[Ff])/);
  for (let i = 0; i < pieces.length; i += 2) {
    const d = decodeAll(pieces[i]!);
    if (d === null) return null;
    pieces[i] = d;
  }
  return pieces.join("");
}
