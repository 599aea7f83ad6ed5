// JSON/HTTP ↔ gRPC transcoding from a descriptor set and its google.api.http rules
// (google/api/http.proto): which rule an HTTP request matches, the request message it makes
// (path variables, the body, query parameters), the JSON of a response message, the HTTP status
// and google.rpc.Status body of a gRPC status. The proto3 JSON mapping itself (well-known types,
// int64 as strings, enums by name, Any through the descriptor set's types) is @bufbuild/protobuf's,
// read and printed as protojson does at its edges (proto-json.ts: 64-bit integers without a
// double in between, RFC 3339 Timestamps, Duration's grammar, base64, duplicate keys). Nothing
// here converts a value by hand beyond turning one path or query string into the JSON value the
// mapping reads (a string; true/false for a bool; JSON text for a Struct, Value or ListValue).
// Status details print with the google.rpc types dojang carries (google-rpc.ts).
//
// Pure: bytes in, bytes or text out; no I/O, no clock.
import {
  create,
  createFileRegistry,
  fromBinary,
  fromJson,
  getExtension,
  ScalarType,
  toBinary,
  toJson,
  type DescField,
  type DescMessage,
  type DescMethod,
  type FileRegistry,
  type JsonObject,
  type JsonValue,
  type Message,
  type Registry,
} from "@bufbuild/protobuf";
import { AnySchema, FileDescriptorSetSchema, type Any } from "@bufbuild/protobuf/wkt";
import { statusMessage, withCarriedTypes } from "./google-rpc.js";
import { matchTemplate, parseTemplate, TemplateError, type PathTemplate } from "./http-template.js";
import { MESSAGE_PREFIX_BYTES, writePrefix } from "./framing.js";
import { JsonWire, scalarZeroJson } from "./json-wire.js";
import { parseJson, ProtoJsonPrinter, ProtoJsonReader } from "./proto-json.js";

export interface TranscodeOptions {
  /** print fields at their default values (proto3 JSON "emit defaults") */
  readonly emitDefaults: boolean;
  /** unknown JSON fields and query parameters are ignored rather than refused */
  readonly ignoreUnknownFields: boolean;
}

/** One HTTP binding of one method (a rule, or one of its additional_bindings). */
export interface TranscodeRule {
  readonly httpMethod: string;
  readonly template: PathTemplate;
  /** the gRPC path, "/pkg.Service/Method" */
  readonly grpcPath: string;
  readonly method: DescMethod;
  /** "" (no body), "*" (the whole request message) or a top-level field's name */
  readonly body: string;
  /** the body's field (body names one) */
  readonly bodyField: DescField | undefined;
  /** the field paths (proto names) the path's variables and the body bind: the query does not set them */
  readonly bound: readonly (readonly string[])[];
  /** "" (the whole response message) or a top-level field of the response */
  readonly responseBody: string;
  /** the response_body's field (response_body names one) */
  readonly responseField: DescField | undefined;
  /** the response is a google.api.HttpBody answered as its own bytes and content type */
  readonly httpBody: boolean;
  readonly serverStreaming: boolean;
  /** how many literal segments (more literal rules are tried first) */
  readonly literals: number;
  /**
   * Each path variable's fields (in the order of template.variables, as matchTemplate gives their
   * values), resolved once here rather than per request; a string is the 400 every request of
   * this rule gets (a variable through a field whose JSON is not an object).
   */
  readonly variableFields: readonly (readonly DescField[] | string)[];
}

export interface RuleMatch {
  readonly rule: TranscodeRule;
  /** the path variables' values, in the order of rule.template.variables; null for a value that does not percent-decode to UTF-8 */
  readonly variables: readonly (string | null)[];
}

/** The descriptor set or one of its rules cannot be used (a config error). */
export class DescriptorError extends Error {}
/** The request cannot become the method's message: a 400 INVALID_ARGUMENT for the client. */
export class TranscodeInputError extends Error {}

/** The HTTP status of a gRPC status (google/rpc/code.proto's mapping; the table is http-status.ts's). */
export { httpStatusOfCode } from "./http-status.js";

const HTTP_KINDS = ["get", "put", "post", "delete", "patch"] as const;

interface HttpRuleShape {
  pattern: { case: string | undefined; value?: unknown };
  body: string;
  responseBody: string;
  additionalBindings: HttpRuleShape[];
}

// (ignoreBOM: a byte order mark stays, and is not JSON, as protojson reads it)
const dec = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

export class Transcoder {
  /** the descriptor set's types, after the well-known and google.rpc types dojang carries */
  readonly registry: Registry;
  /** every binding, by HTTP method (upper case), in the order they are tried */
  private readonly byMethod = new Map<string, TranscodeRule[]>();
  readonly rules: readonly TranscodeRule[];
  /** methods with a rule that cannot be transcoded (client or bidi streaming), by gRPC path */
  readonly skipped: readonly string[];
  private readonly reader: ProtoJsonReader;
  private readonly printer: ProtoJsonPrinter;
  /** the plain part of the mapping, straight to the wire and back (json-wire.ts); the reader, fromJson and the rest take what it leaves */
  private readonly wire: JsonWire;
  /** fromJson's and toJson's options, made once (not an object per call) */
  private readonly readOpts: { readonly registry: Registry; readonly ignoreUnknownFields: boolean };
  private readonly writeOpts: { readonly registry: Registry; readonly alwaysEmitImplicit: boolean };

  constructor(
    descriptorSet: Uint8Array,
    readonly opts: TranscodeOptions,
  ) {
    let registry: FileRegistry;
    try {
      registry = createFileRegistry(fromBinary(FileDescriptorSetSchema, descriptorSet));
    } catch (err) {
      throw new DescriptorError(`not a FileDescriptorSet with all its imports (protoc --include_imports --descriptor_set_out): ${(err as Error).message}`);
    }
    this.registry = withCarriedTypes(registry);
    this.reader = new ProtoJsonReader(this.registry, opts.ignoreUnknownFields);
    this.printer = new ProtoJsonPrinter(this.registry);
    this.wire = new JsonWire(opts.ignoreUnknownFields, opts.emitDefaults);
    this.readOpts = { registry: this.registry, ignoreUnknownFields: opts.ignoreUnknownFields };
    this.writeOpts = { registry: this.registry, alwaysEmitImplicit: opts.emitDefaults };
    const httpExt = registry.getExtension("google.api.http");
    const rules: TranscodeRule[] = [];
    const skipped: string[] = [];
    if (httpExt === undefined) throw new DescriptorError("has no google.api.http extension (compile with google/api/annotations.proto and --include_imports)");
    for (const file of registry.files) {
      for (const service of file.services) {
        for (const method of service.methods) {
          const opts = method.proto.options;
          if (opts === undefined) continue;
          const top = getExtension(opts, httpExt) as unknown as HttpRuleShape | undefined;
          if (top === undefined || top.pattern === undefined || top.pattern.case === undefined) continue;
          const grpcPath = `/${service.typeName}/${method.name}`;
          if (method.methodKind === "client_streaming" || method.methodKind === "bidi_streaming") {
            skipped.push(grpcPath);
            continue;
          }
          for (const r of [top, ...top.additionalBindings]) rules.push(compileRule(method, grpcPath, r));
        }
      }
    }
    this.rules = rules;
    this.skipped = skipped;
    const sorted = [...rules].sort((a, b) => Number(b.template.verb !== "") - Number(a.template.verb !== "") || b.literals - a.literals);
    for (const r of sorted) {
      let list = this.byMethod.get(r.httpMethod);
      if (list === undefined) this.byMethod.set(r.httpMethod, (list = []));
      list.push(r);
    }
  }

  /** The rule an HTTP request matches (`path` without its query, still percent-encoded), or null. */
  match(httpMethod: string, path: string): RuleMatch | null {
    const list = this.byMethod.get(httpMethod);
    if (list === undefined) return null;
    for (const rule of list) {
      const variables = matchTemplate(rule.template, path);
      if (variables !== null) return { rule, variables };
    }
    return null;
  }

  /**
   * The request message, serialized: the body (as the rule says), then the path's variables,
   * then the query's parameters for fields neither of those set. Throws TranscodeInputError.
   */
  request(m: RuleMatch, query: string, body: Uint8Array): Uint8Array {
    return this.build(m, query, body, 0);
  }

  /** request()'s message as one gRPC frame (uncompressed): the prefix, then the message, in one array. Throws TranscodeInputError. */
  requestFrame(m: RuleMatch, query: string, body: Uint8Array): Uint8Array {
    const out = this.build(m, query, body, MESSAGE_PREFIX_BYTES);
    writePrefix(out, 0, 0, out.length - MESSAGE_PREFIX_BYTES);
    return out;
  }

  /** The request message after `headroom` bytes left for the caller. */
  private build(m: RuleMatch, query: string, body: Uint8Array, headroom: number): Uint8Array {
    const { rule } = m;
    const input = rule.method.input;
    let json: JsonObject = {};
    let long = false;
    try {
      if (rule.body !== "" && body.length > 0) {
        let text: string;
        try {
          text = dec.decode(body);
        } catch {
          throw new TranscodeInputError("the request body is not UTF-8");
        }
        const parsed = parseJson(text);
        long = parsed.long;
        const v = parsed.value;
        if (rule.bodyField === undefined) {
          if (v === null || typeof v !== "object" || Array.isArray(v)) throw new TranscodeInputError(`the request body must be a JSON object (${input.typeName})`);
          json = v;
        } else {
          // a message's JSON is an object, as protojson reads a body (a Value's may be null)
          const f = rule.bodyField;
          if (v === null && f.fieldKind === "message" && f.message.typeName !== "google.protobuf.Value") throw new TranscodeInputError(`the request body must be a ${f.message.typeName}, not null`);
          json = { [f.jsonName]: v };
        }
      }
      for (let i = 0; i < m.variables.length; i++) {
        const value = m.variables[i]!;
        if (value === null) throw new TranscodeInputError(`path parameter ${rule.template.variables[i]!.path}: not percent-encoded UTF-8`);
        const fields = rule.variableFields[i]!;
        if (typeof fields === "string") throw new TranscodeInputError(fields);
        setField(json, fields, [value], undefined);
      }
      if (rule.body !== "*" && query !== "") long = this.query(json, m, query) || long;
      if (!long) {
        const fast = this.wire.encode(input, json, headroom);
        if (fast !== undefined) return fast;
      }
      const checked = this.reader.message(input, json, long);
      const msg = fromJson(input, checked, this.readOpts);
      if (this.reader.foreignTypeUrl) keepTypeUrls(this.registry, input, msg, checked);
      const bytes = toBinary(input, msg);
      if (headroom === 0) return bytes;
      const out = new Uint8Array(headroom + bytes.length);
      out.set(bytes, headroom);
      return out;
    } catch (err) {
      if (err instanceof TranscodeInputError) throw err;
      // ProtoJsonError, and fromJson's and toBinary's own (a value of the wrong type or out of range)
      throw new TranscodeInputError((err as Error).message);
    }
  }

  /**
   * Sets the query's parameters on `json` (fields the path or the body bound are skipped, as
   * grpc-gateway does); true when a Struct, Value or ListValue value held a long number.
   */
  private query(json: JsonObject, m: RuleMatch, query: string): boolean {
    const input = m.rule.method.input;
    const bound = m.rule.bound;
    let long = false;
    const seen = new Set<string>();
    for (const [key, values] of queryParams(query)) {
      // grpc-gateway's map syntax: field[key]=value
      let name = key;
      let mapKey: string | undefined;
      if (key.endsWith("]")) {
        const open = key.lastIndexOf("[", key.length - 2);
        if (open > 0) {
          name = key.slice(0, open);
          mapKey = key.slice(open + 1, -1);
        }
      }
      const fields = resolvePath(input, name.includes(".") ? name.split(".") : [name], "query", this.opts.ignoreUnknownFields);
      if (fields === null) continue;
      if (bound.length > 0 && bound.some((b) => overlaps(b, fields))) continue;
      // one field, one value: the same field named twice (by its proto and its JSON name) is refused
      const id = (fields.length === 1 ? fields[0]!.name : protoPath(fields)) + (mapKey === undefined ? "" : `[${mapKey}]`);
      if (seen.has(id)) throw new TranscodeInputError(`query parameter ${id} given twice`);
      seen.add(id);
      long = setField(json, fields, values, mapKey) || long;
    }
    return long;
  }

  /** One response message as JSON text (or its response_body field). Throws on bytes that are not the message. */
  response(rule: TranscodeRule, bytes: Uint8Array): string {
    const out = rule.method.output;
    const json = this.wire.decode(out, bytes) ?? (this.printer.message(out, toJson(out, fromBinary(out, bytes), this.writeOpts)) as JsonObject);
    if (rule.responseField === undefined) return JSON.stringify(json);
    const v = json[rule.responseField.jsonName];
    return JSON.stringify(v === undefined ? this.defaultJson(rule.responseField) : v);
  }

  /** A google.api.HttpBody response message: its content type and its bytes. Throws on bytes that are not one. */
  httpBody(rule: TranscodeRule, bytes: Uint8Array): { contentType: string; data: Uint8Array } {
    const msg = fromBinary(rule.method.output, bytes) as unknown as { contentType: string; data: Uint8Array };
    return { contentType: msg.contentType, data: msg.data };
  }

  /** The JSON of a response_body field the response leaves unset: its type's default, as grpc-gateway prints it. */
  private defaultJson(f: DescField): JsonValue {
    switch (f.fieldKind) {
      case "list":
        return [];
      case "map":
        return {};
      case "message":
        try {
          return this.printer.message(f.message, toJson(f.message, create(f.message), this.writeOpts));
        } catch {
          // a type with no empty JSON form (google.protobuf.Value)
          return null;
        }
      case "enum":
        return f.enum.values.find((v) => v.number === 0)?.name ?? 0;
      case "scalar":
        return scalarZeroJson(f.scalar);
    }
  }

  /**
   * A gRPC status as a google.rpc.Status JSON body: code, message, and the details of
   * grpc-status-details-bin, printed with the descriptor set's types and the well-known and
   * google.rpc types dojang carries. A detail of a type none of them holds has no JSON form
   * (protojson cannot print it either) and is left out; the others are kept.
   */
  status(code: number, message: string, detailsBin: Uint8Array | undefined): string {
    const details: JsonValue[] = [];
    if (detailsBin !== undefined) {
      let anys: readonly unknown[] = [];
      try {
        anys = (fromBinary(statusMessage(), detailsBin) as unknown as { details: readonly unknown[] }).details;
      } catch {
        /* not a google.rpc.Status: code and message only */
      }
      for (const a of anys) {
        try {
          details.push(this.printer.message(AnySchema, toJson(AnySchema, a as never, this.writeOpts)));
        } catch {
          /* a type no registry here holds */
        }
      }
    }
    // the status in the trailers is the call's; the details come from the bin
    return JSON.stringify(details.length > 0 || this.opts.emitDefaults ? { code, message, details } : { code, message });
  }
}

/**
 * Puts back each Any's type URL as the JSON wrote it (fromJson packs every Any as
 * type.googleapis.com/<name>; protojson, grpc-gateway's, keeps "example.com/pkg.T" as it came).
 * Walks the message beside the JSON it was read from (`json`, as the reader left it: map keys
 * canonical), into nested messages, lists, maps and the messages packed in an Any. Only run for a
 * body the reader saw such a URL in. True when it changed something.
 */
function keepTypeUrls(registry: Registry, desc: DescMessage, msg: Message, json: JsonValue | undefined): boolean {
  if (json === null || typeof json !== "object" || Array.isArray(json)) return false;
  if (desc.typeName === "google.protobuf.Any") {
    const any = msg as Any;
    const url = json["@type"];
    if (typeof url !== "string") return false;
    const inner = registry.getMessage(url.slice(url.lastIndexOf("/") + 1));
    let changed = false;
    if (inner !== undefined && !inner.typeName.startsWith("google.protobuf.")) {
      // an Any in the packed message: unpacked, walked, packed again only when it changed
      const m = fromBinary(inner, any.value);
      if (keepTypeUrls(registry, inner, m, json)) {
        any.value = toBinary(inner, m);
        changed = true;
      }
    }
    if (any.typeUrl !== url) {
      any.typeUrl = url;
      changed = true;
    }
    return changed;
  }
  // (a message's fields are its properties by local name, a oneof's member under the oneof's
  // {case, value}, a list an array, a map a record keyed by the key's text: @bufbuild/protobuf's shape)
  const obj = msg as unknown as Record<string, unknown>;
  let changed = false;
  for (const f of desc.fields) {
    const kind = f.fieldKind === "list" ? f.listKind : f.fieldKind === "map" ? f.mapKind : f.fieldKind;
    if (kind !== "message") continue;
    const v = json[f.jsonName] ?? json[f.name];
    if (v === undefined || v === null) continue;
    let value: unknown;
    if (f.oneof !== undefined) {
      const o = obj[f.oneof.localName] as { case: string | undefined; value?: unknown } | undefined;
      value = o?.case === f.localName ? o.value : undefined;
    } else value = obj[f.localName];
    if (value === undefined || value === null) continue;
    if (f.fieldKind === "message") changed = keepTypeUrls(registry, f.message, value as Message, v) || changed;
    else if (f.fieldKind === "list") {
      if (!Array.isArray(v)) continue;
      const list = value as Message[];
      for (let i = 0; i < list.length; i++) changed = keepTypeUrls(registry, f.message!, list[i]!, v[i]) || changed;
    } else if (f.fieldKind === "map") {
      if (typeof v !== "object" || Array.isArray(v)) continue;
      const map = value as Record<string, Message>;
      for (const k in map) changed = keepTypeUrls(registry, f.message!, map[k]!, v[k]) || changed;
    }
  }
  return changed;
}

function compileRule(method: DescMethod, grpcPath: string, r: HttpRuleShape): TranscodeRule {
  const where = `${grpcPath} (google.api.http)`;
  let httpMethod: string;
  let path: string;
  const p = r.pattern;
  if ((HTTP_KINDS as readonly string[]).includes(p.case!)) {
    httpMethod = p.case!.toUpperCase();
    path = p.value as string;
  } else if (p.case === "custom") {
    const c = p.value as { kind: string; path: string };
    httpMethod = c.kind.toUpperCase();
    path = c.path;
  } else throw new DescriptorError(`${where}: unknown pattern ${String(p.case)}`);
  let template: PathTemplate;
  try {
    template = parseTemplate(path);
  } catch (err) {
    if (err instanceof TemplateError) throw new DescriptorError(`${where}: ${err.message}`);
    throw err;
  }
  const input = method.input;
  for (const v of template.variables) {
    const leaf = resolve(input, v.field);
    if (leaf === null) throw new DescriptorError(`${where}: path variable ${v.field.join(".")} is not a field of ${input.typeName}`);
    if (leaf.fieldKind === "list" || leaf.fieldKind === "map") throw new DescriptorError(`${where}: path variable ${v.field.join(".")} is a repeated field`);
  }
  const bodyField = r.body === "" || r.body === "*" ? undefined : input.fields.find((f) => f.name === r.body);
  if (r.body !== "" && r.body !== "*" && bodyField === undefined) throw new DescriptorError(`${where}: body ${JSON.stringify(r.body)} is not a field of ${input.typeName}`);
  const responseField = r.responseBody === "" ? undefined : method.output.fields.find((f) => f.name === r.responseBody);
  if (r.responseBody !== "" && responseField === undefined) {
    throw new DescriptorError(`${where}: response_body ${JSON.stringify(r.responseBody)} is not a field of ${method.output.typeName}`);
  }
  const bound = template.variables.map((v) => v.field.map((name, i) => resolve(input, v.field.slice(0, i + 1))?.name ?? name));
  const variableFields = template.variables.map((v): readonly DescField[] | string => {
    try {
      return resolvePath(input, v.field, "path")!;
    } catch (err) {
      if (!(err instanceof TranscodeInputError)) throw err;
      return err.message;
    }
  });
  if (bodyField !== undefined) bound.push([bodyField.name]);
  return {
    httpMethod,
    template,
    grpcPath,
    method,
    body: r.body,
    bodyField,
    bound,
    responseBody: r.responseBody,
    responseField,
    httpBody: responseField === undefined && method.output.typeName === "google.api.HttpBody",
    serverStreaming: method.methodKind === "server_streaming",
    literals: template.segments.filter((s) => s.kind === "literal").length,
    variableFields,
  };
}

/** Each message's fields by proto name and by JSON name (a path or query parameter may use either). */
const byName = new WeakMap<DescMessage, Map<string, DescField>>();

function fieldNamed(m: DescMessage, name: string): DescField | undefined {
  let names = byName.get(m);
  if (names === undefined) {
    names = new Map();
    for (const f of m.fields) names.set(f.jsonName, f);
    // (a proto name wins over another field's JSON name)
    for (const f of m.fields) names.set(f.name, f);
    byName.set(m, names);
  }
  return names.get(name);
}

/** The field a dotted path names (proto names, or JSON names in a query), or null. */
function resolve(msg: DescMessage, path: readonly string[]): DescField | null {
  let m: DescMessage | undefined = msg;
  let f: DescField | undefined;
  for (let i = 0; i < path.length; i++) {
    if (m === undefined) return null;
    const name = path[i]!;
    f = fieldNamed(m, name);
    if (f === undefined) return null;
    if (i < path.length - 1) {
      if (f.fieldKind !== "message") return null;
      m = f.message;
    }
  }
  return f ?? null;
}

/**
 * The fields a path or query parameter's dotted name goes through (proto or JSON names), or
 * null for a name the message does not have when unknown ones are ignored. Throws
 * TranscodeInputError for an unknown one otherwise, and for a path through a field that is not a
 * message (or is one whose JSON is a string).
 */
function resolvePath(msg: DescMessage, names: readonly string[], from: "path" | "query", ignoreUnknown = false): DescField[] | null {
  const out: DescField[] = [];
  let m = msg;
  for (let i = 0; i < names.length; i++) {
    const name = names[i]!;
    const f = fieldNamed(m, name);
    if (f === undefined) {
      if (ignoreUnknown) return null;
      throw new TranscodeInputError(`${from} parameter ${names.join(".")}: ${m.typeName} has no field ${JSON.stringify(name)}`);
    }
    out.push(f);
    if (i < names.length - 1) {
      if (f.fieldKind !== "message" || STRING_WKT.has(f.message.typeName) || VALUE_WKT.has(f.message.typeName)) throw new TranscodeInputError(`${from} parameter ${names.join(".")}: ${f.name} is not a message`);
      m = f.message;
    }
  }
  return out;
}

/** Is one of the two field paths a prefix of the other (the query parameter sets a bound field, or a message around one)? */
function overlaps(bound: readonly string[], fields: readonly DescField[]): boolean {
  const n = Math.min(bound.length, fields.length);
  for (let i = 0; i < n; i++) if (bound[i] !== fields[i]!.name) return false;
  return true;
}

function protoPath(fields: readonly DescField[]): string {
  return fields.map((f) => f.name).join(".");
}

/**
 * Query parameters, repeated keys gathered in order ("+" is a space). Throws TranscodeInputError
 * for a ";" (a separator to some parsers, not to others) and for an escape that is malformed or
 * does not decode to UTF-8: a value is taken as it was sent or not at all.
 */
function queryParams(query: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  if (query.includes(";")) throw new TranscodeInputError('the query has a ";" (parameters are separated by "&")');
  for (const part of query.split("&")) {
    if (part === "") continue;
    const eq = part.indexOf("=");
    const k = unescapeQuery(eq < 0 ? part : part.slice(0, eq));
    const v = eq < 0 ? "" : unescapeQuery(part.slice(eq + 1));
    const list = out.get(k);
    if (list === undefined) out.set(k, [v]);
    else list.push(v);
  }
  return out;
}

function unescapeQuery(s: string): string {
  const t = s.includes("+") ? s.replace(/\+/g, " ") : s;
  if (!t.includes("%")) return t;
  try {
    return decodeURIComponent(t);
  } catch {
    throw new TranscodeInputError(`the query parameter ${JSON.stringify(s)} is not percent-encoded UTF-8`);
  }
}

/** The message types whose JSON form is a string (or, for BoolValue, a bool): a path or query value can set them. */
const STRING_WKT = new Set([
  "google.protobuf.Timestamp",
  "google.protobuf.Duration",
  "google.protobuf.FieldMask",
  "google.protobuf.StringValue",
  "google.protobuf.BytesValue",
  "google.protobuf.Int32Value",
  "google.protobuf.Int64Value",
  "google.protobuf.UInt32Value",
  "google.protobuf.UInt64Value",
  "google.protobuf.FloatValue",
  "google.protobuf.DoubleValue",
]);
/** The message types a path or query value sets as JSON text (as grpc-gateway reads them). */
const VALUE_WKT = new Set(["google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"]);

/**
 * Sets the field at the end of `fields` in the JSON object (overwriting what the body said) from
 * path or query strings; `mapKey` for a map entry (field[key]=value). True when a value parsed as
 * JSON text held a long number.
 */
function setField(json: JsonObject, fields: readonly DescField[], values: readonly string[], mapKey: string | undefined): boolean {
  let obj = json;
  const last = fields.length - 1;
  for (let i = 0; i < last; i++) {
    const f = fields[i]!;
    // the key the body used for this field, if any (a proto3 JSON parser takes either name)
    const key = f.name in obj ? f.name : f.jsonName;
    const next = obj[key];
    if (next === undefined || next === null || typeof next !== "object" || Array.isArray(next)) obj[key] = {};
    obj = obj[key] as JsonObject;
  }
  const f = fields[last]!;
  const key = f.name in obj ? f.name : f.jsonName;
  if (mapKey !== undefined) {
    if (f.fieldKind !== "map") throw new TranscodeInputError(`parameter ${protoPath(fields)}[${mapKey}]: ${f.name} is not a map`);
    if (values.length > 1) throw new TranscodeInputError(`parameter ${protoPath(fields)}[${mapKey}] given twice`);
    const entries = obj[key];
    if (entries === undefined || entries === null || typeof entries !== "object" || Array.isArray(entries)) obj[key] = {};
    const [v, long] = leafValue(f, values[0]!, fields);
    (obj[key] as JsonObject)[mapKey] = v;
    return long;
  }
  if (f.fieldKind === "map") throw new TranscodeInputError(`parameter ${protoPath(fields)} is a map (set an entry with ${protoPath(fields)}[key]=value)`);
  if (f.fieldKind === "list") {
    let long = false;
    const list: JsonValue[] = [];
    for (const v of values) {
      const [j, l] = leafValue(f, v, fields);
      long ||= l;
      list.push(j);
    }
    obj[key] = list;
    return long;
  }
  if (values.length > 1) throw new TranscodeInputError(`parameter ${protoPath(fields)} given ${values.length} times (it is not repeated)`);
  const [v, long] = leafValue(f, values[0]!, fields);
  obj[key] = v;
  return long;
}

/**
 * One path or query string as the JSON value the proto3 mapping reads for the field (a list's
 * element, a map's value), and whether it holds a long number. `fields`: the parameter, for errors.
 */
function leafValue(f: DescField, v: string, fields: readonly DescField[]): [JsonValue, boolean] {
  const kind = f.fieldKind === "list" ? f.listKind : f.fieldKind === "map" ? f.mapKind : f.fieldKind;
  if (kind === "scalar") return [f.scalar === ScalarType.BOOL ? boolOf(v, fields) : v, false];
  if (kind === "enum") {
    if (/^-?[0-9]+$/.test(v)) return [Number(v), false];
    // a name the enum does not have is refused here, whatever ignoreUnknownFields says: the parameter names a known field
    if (f.enum!.values.every((x) => x.name !== v)) throw new TranscodeInputError(`parameter ${protoPath(fields)}: ${JSON.stringify(v)} is not a ${f.enum!.typeName}`);
    return [v, false];
  }
  const t = f.message!.typeName;
  if (t === "google.protobuf.BoolValue") return [boolOf(v, fields), false];
  if (STRING_WKT.has(t)) return [v, false];
  if (VALUE_WKT.has(t)) {
    try {
      const p = parseJson(v);
      return [p.value, p.long];
    } catch (err) {
      throw new TranscodeInputError(`parameter ${protoPath(fields)}: ${(err as Error).message}`);
    }
  }
  if (t === "google.protobuf.Empty") {
    if (v === "" || v === "{}") return [{}, false];
    throw new TranscodeInputError(`parameter ${protoPath(fields)}: an Empty is "" or "{}"`);
  }
  throw new TranscodeInputError(`parameter ${protoPath(fields)}: a ${t} cannot be set from a path or query string`);
}

function boolOf(v: string, fields: readonly DescField[]): boolean {
  if (v === "true") return true;
  if (v === "false") return false;
  throw new TranscodeInputError(`parameter ${protoPath(fields)}: ${JSON.stringify(v)} is not true or false`);
}
