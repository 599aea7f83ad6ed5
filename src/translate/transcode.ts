// JSON/HTTP ↔ gRPC transcoding from a descriptor set and its google.api.http rules
// (google/api/http.proto): which rule an HTTP request matches, the request message it makes
// (path variables, the body, query parameters), the JSON of a response message, the HTTP status
// and google.rpc.Status body of a gRPC status. The proto3 JSON mapping itself (well-known types,
// int64 as strings, enums by name, Any through the descriptor set's types) is @bufbuild/protobuf's;
// nothing here converts a value by hand beyond turning one path or query string into the JSON
// value the mapping reads (a string, or true/false for a bool).
//
// Pure: bytes in, bytes or text out; no I/O, no clock.
import {
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
} from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { matchTemplate, parseTemplate, TemplateError, type PathTemplate } from "./http-template.js";

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
  /** "" (the whole response message) or a top-level field of the response */
  readonly responseBody: string;
  readonly serverStreaming: boolean;
  /** how many literal segments (more literal rules are tried first) */
  readonly literals: number;
}

export interface RuleMatch {
  readonly rule: TranscodeRule;
  readonly variables: Map<string, string>;
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

const dec = new TextDecoder("utf-8", { fatal: true });

export class Transcoder {
  readonly registry: FileRegistry;
  /** every binding, by HTTP method (upper case), in the order they are tried */
  private readonly byMethod = new Map<string, TranscodeRule[]>();
  readonly rules: readonly TranscodeRule[];
  /** methods with a rule that cannot be transcoded (client or bidi streaming), by gRPC path */
  readonly skipped: readonly string[];
  private readonly statusDesc: DescMessage | undefined;

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
    this.registry = registry;
    this.statusDesc = registry.getMessage("google.rpc.Status");
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
    const { rule } = m;
    const input = rule.method.input;
    let json: JsonObject = {};
    if (rule.body !== "" && body.length > 0) {
      let parsed: JsonValue;
      try {
        parsed = JSON.parse(dec.decode(body)) as JsonValue;
      } catch (err) {
        throw new TranscodeInputError(`the request body is not JSON: ${(err as Error).message}`);
      }
      if (rule.body === "*") {
        if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) throw new TranscodeInputError(`the request body must be a JSON object (${input.typeName})`);
        json = parsed;
      } else json = { [input.fields.find((f) => f.name === rule.body)!.jsonName]: parsed };
    }
    for (const [path, value] of m.variables) setPath(json, input, path.split("."), [value], "path");
    if (rule.body !== "*" && query !== "") {
      for (const [key, values] of queryParams(query)) {
        if (m.variables.has(key) || (rule.body !== "" && (key === rule.body || key.startsWith(rule.body + ".")))) continue;
        setPath(json, input, key.split("."), values, "query", this.opts.ignoreUnknownFields);
      }
    }
    try {
      const msg = fromJson(input, json, { registry: this.registry, ignoreUnknownFields: this.opts.ignoreUnknownFields });
      return toBinary(input, msg);
    } catch (err) {
      throw new TranscodeInputError((err as Error).message);
    }
  }

  /** One response message as JSON text (or its response_body field). Throws on bytes that are not the message. */
  response(rule: TranscodeRule, bytes: Uint8Array): string {
    const out = rule.method.output;
    const msg = fromBinary(out, bytes);
    const json = toJson(out, msg, { registry: this.registry, alwaysEmitImplicit: this.opts.emitDefaults }) as JsonObject;
    if (rule.responseBody === "") return JSON.stringify(json);
    const f = out.fields.find((x) => x.name === rule.responseBody)!;
    return JSON.stringify(json[f.jsonName] ?? null);
  }

  /**
   * A gRPC status as a google.rpc.Status JSON body: code, message, and the details of
   * grpc-status-details-bin when the descriptor set has google.rpc.Status and the details' types.
   */
  status(code: number, message: string, detailsBin: Uint8Array | undefined): string {
    if (detailsBin !== undefined && this.statusDesc !== undefined) {
      try {
        const s = fromBinary(this.statusDesc, detailsBin);
        const j = toJson(this.statusDesc, s, { registry: this.registry, alwaysEmitImplicit: this.opts.emitDefaults }) as JsonObject;
        // the status in the trailers is the call's; the details come from the bin
        return JSON.stringify({ ...j, code, message });
      } catch {
        /* details of a type the descriptor set lacks: code and message only */
      }
    }
    return JSON.stringify(this.opts.emitDefaults ? { code, message, details: [] } : { code, message });
  }
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
  if (r.body !== "" && r.body !== "*" && !input.fields.some((f) => f.name === r.body)) throw new DescriptorError(`${where}: body ${JSON.stringify(r.body)} is not a field of ${input.typeName}`);
  if (r.responseBody !== "" && !method.output.fields.some((f) => f.name === r.responseBody)) {
    throw new DescriptorError(`${where}: response_body ${JSON.stringify(r.responseBody)} is not a field of ${method.output.typeName}`);
  }
  return {
    httpMethod,
    template,
    grpcPath,
    method,
    body: r.body,
    responseBody: r.responseBody,
    serverStreaming: method.methodKind === "server_streaming",
    literals: template.segments.filter((s) => s.kind === "literal").length,
  };
}

/** The field a dotted path names (proto names, or JSON names in a query), or null. */
function resolve(msg: DescMessage, path: readonly string[]): DescField | null {
  let m: DescMessage | undefined = msg;
  let f: DescField | undefined;
  for (let i = 0; i < path.length; i++) {
    if (m === undefined) return null;
    const name = path[i]!;
    f = m.fields.find((x) => x.name === name || x.jsonName === name);
    if (f === undefined) return null;
    if (i < path.length - 1) {
      if (f.fieldKind !== "message") return null;
      m = f.message;
    }
  }
  return f ?? null;
}

/** Query parameters, repeated keys gathered in order. */
function queryParams(query: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  let params: URLSearchParams;
  try {
    params = new URLSearchParams(query);
  } catch {
    throw new TranscodeInputError("the query string cannot be parsed");
  }
  for (const [k, v] of params) {
    const list = out.get(k);
    if (list === undefined) out.set(k, [v]);
    else list.push(v);
  }
  return out;
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

/** Sets the field at `path` in the JSON object (overwriting what the body said), from path or query strings. */
function setPath(json: JsonObject, msg: DescMessage, path: readonly string[], values: readonly string[], from: "path" | "query", ignoreUnknown = false): void {
  let obj = json;
  let m = msg;
  for (let i = 0; i < path.length; i++) {
    const name = path[i]!;
    const f = m.fields.find((x) => x.name === name || x.jsonName === name);
    if (f === undefined) {
      if (ignoreUnknown) return;
      throw new TranscodeInputError(`${from} parameter ${path.join(".")}: ${m.typeName} has no field ${JSON.stringify(name)}`);
    }
    // the key the body used for this field, if any (a proto3 JSON parser takes either name)
    const key = f.name in obj ? f.name : f.jsonName;
    if (i < path.length - 1) {
      if (f.fieldKind !== "message" || STRING_WKT.has(f.message.typeName)) throw new TranscodeInputError(`${from} parameter ${path.join(".")}: ${f.name} is not a message`);
      const next = obj[key];
      if (next === undefined || next === null || typeof next !== "object" || Array.isArray(next)) obj[key] = {};
      obj = obj[key] as JsonObject;
      m = f.message;
      continue;
    }
    if (f.fieldKind === "list") {
      if (from === "path") throw new TranscodeInputError(`path parameter ${path.join(".")} is repeated`);
      obj[key] = values.map((v) => leafValue(f, v, path));
    } else {
      if (f.fieldKind === "map") throw new TranscodeInputError(`${from} parameter ${path.join(".")} is a map`);
      obj[key] = leafValue(f, values[values.length - 1]!, path);
    }
  }
}

/** One path or query string as the JSON value the proto3 mapping reads for the field. */
function leafValue(f: DescField, v: string, path: readonly string[]): JsonValue {
  const kind = f.fieldKind === "list" ? f.listKind : f.fieldKind;
  if (kind === "scalar") {
    const t = f.scalar!;
    if (t === ScalarType.BOOL) return boolOf(v, path);
    return v;
  }
  if (kind === "enum") return /^-?\d+$/.test(v) ? Number(v) : v;
  if (kind === "message") {
    const t = f.message!.typeName;
    if (t === "google.protobuf.BoolValue") return boolOf(v, path);
    if (STRING_WKT.has(t)) return v;
  }
  throw new TranscodeInputError(`parameter ${path.join(".")}: a ${kind} field cannot be set from a path or query string`);
}

function boolOf(v: string, path: readonly string[]): boolean {
  if (v === "true") return true;
  if (v === "false") return false;
  throw new TranscodeInputError(`parameter ${path.join(".")}: ${JSON.stringify(v)} is not true or false`);
}
