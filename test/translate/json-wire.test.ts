// The fast path between JSON and the wire (src/translate/json-wire.ts) held to the full path it
// stands in for: proto-json.ts's reader and printer around @bufbuild/protobuf's fromJson/toBinary
// and fromBinary/toJson (whose own edges the real grpc-gateway judges in
// test/behaviour/json-transcoding-gateway.test.ts). On random JSON and random bytes, whatever the
// fast path answers is exactly what the full path answers (the same bytes, the same text), and
// whatever the full path refuses the fast path leaves to it; on every well-typed plain message
// it does answer (so the property cannot hold by deferring everything). Printing, with and
// without emitDefaults (toJson's alwaysEmitImplicit).
import { create, createFileRegistry, fromBinary, fromJson, toBinary, toJson, type DescMessage, type JsonObject, type JsonValue, type Registry } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import fc from "fast-check";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { JsonWire } from "../../src/translate/json-wire.js";
import { ProtoJsonPrinter, ProtoJsonReader } from "../../src/translate/proto-json.js";
import { Transcoder } from "../../src/translate/transcode.js";
import { descriptorSet, judgeDescriptorSet } from "../helpers/transcode.js";

const judge = new Transcoder(readFileSync(judgeDescriptorSet()), { emitDefaults: false, ignoreUnknownFields: false });
const KINDS = judge.registry.getMessage("dojang.test.judge.v1.Kinds")!;
const NESTED = judge.registry.getMessage("dojang.test.judge.v1.Nested")!;
const two = createFileRegistry(fromBinary(FileDescriptorSetSchema, readFileSync(descriptorSet(join(import.meta.dirname, "..", "fixtures", "transcode", "wire.proto"), "wire.binpb"))));
const TWO = two.getMessage("dojang.test.wire.v1.Two")!;

/** The full path, JSON → wire: the reader, fromJson, toBinary (on a copy: the reader rewrites). */
function fullEncode(reg: Registry, desc: DescMessage, json: JsonObject, ignoreUnknownFields: boolean): Uint8Array | Error {
  try {
    const checked = new ProtoJsonReader(reg, ignoreUnknownFields).message(desc, structuredClone(json), false);
    return toBinary(desc, fromJson(desc, checked, { registry: reg, ignoreUnknownFields }));
  } catch (err) {
    return err as Error;
  }
}

/** The full path, wire → JSON text: fromBinary, toJson (with emitDefaults: alwaysEmitImplicit), the printer. */
function fullDecode(reg: Registry, desc: DescMessage, bytes: Uint8Array, emitDefaults = false): string | Error {
  try {
    return JSON.stringify(new ProtoJsonPrinter(reg).message(desc, toJson(desc, fromBinary(desc, bytes), { registry: reg, alwaysEmitImplicit: emitDefaults })));
  } catch (err) {
    return err as Error;
  }
}

function fastDecode(w: JsonWire, desc: DescMessage, bytes: Uint8Array): string | undefined {
  const v = w.decode(desc, bytes);
  return v === undefined ? undefined : JSON.stringify(v);
}

const hex = (b: Uint8Array | Error | undefined) => (b instanceof Uint8Array ? Buffer.from(b).toString("hex") : b);

// === random JSON: keys of the message's fields (both names), unknown keys, values of every JSON type ===

const intText = fc.oneof(fc.integer().map(String), fc.bigInt({ min: -(2n ** 64n), max: 2n ** 64n }).map(String), fc.constantFrom("0", "-0", "01", " 1", "1e3", "1.0", "0x10", "", "NaN", "Infinity", "-Infinity", "1.5", "9007199254740993"));
const number = fc.oneof(
  fc.integer(),
  fc.integer({ min: -1, max: 3 }),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.constantFrom(0, -0, 2147483647, 2147483648, -2147483648, -2147483649, 4294967295, 4294967296, 2 ** 52, -(2 ** 52), 2 ** 53 - 1, 2 ** 53, 1e300, -1e300, 3.4028234663852886e38, 3.5e38, 1e-50, 0.1, 1e21),
);
const scalar: fc.Arbitrary<JsonValue> = fc.oneof(number, intText, fc.string(), fc.constantFrom("RED", "GREEN", "COLOR_UNSPECIFIED", "PURPLE", "\ud800", "é", "𝄞", "CLOSED_ONE"), fc.boolean(), fc.constant(null));
const { value: jsonValue } = fc.letrec<{ value: JsonValue; object: JsonObject }>((tie) => ({
  value: fc.oneof({ depthSize: "small", withCrossShrink: true }, scalar, fc.array(tie("value"), { maxLength: 4 }), tie("object")),
  object: fc.array(fc.tuple(fc.constantFrom("name", "id", "tags", "child", "a", "s", "x", "zzz"), tie("value")), { maxLength: 4 }).map((kv) => Object.fromEntries(kv) as JsonObject),
}));

function keysOf(desc: DescMessage): string[] {
  return [...new Set(desc.fields.flatMap((f) => [f.jsonName, f.name])), "zzz", "@type", "[dojang.test.wire.v1.ext]", "__proto__"];
}

function jsonFor(desc: DescMessage): fc.Arbitrary<JsonObject> {
  // (through JSON text, with 1e309 written where the value was 1e300: JSON.parse's Infinity)
  return fc.array(fc.tuple(fc.constantFrom(...keysOf(desc)), jsonValue), { maxLength: 8 }).map((kv) => JSON.parse(JSON.stringify(Object.fromEntries(kv)).replaceAll("1e+300", "1e309")) as JsonObject);
}

// === well-typed plain messages (the fast path's own ground) ===

// within ±2^52 (what the fast path writes from JSON; beyond, the full path keeps every digit), and the whole range
const safe64 = fc.bigInt({ min: -(2n ** 52n) + 1n, max: 2n ** 52n - 1n });
const safeU64 = fc.bigInt({ min: 0n, max: 2n ** 52n - 1n });
const whole64 = fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n });
const wholeU64 = fc.bigInt({ min: 0n, max: 2n ** 64n - 1n });
const text = fc.oneof(fc.string(), fc.string({ unit: "binary" }));
const kindsOf = (int64: fc.Arbitrary<bigint>, uint64: fc.Arbitrary<bigint>, special: boolean) => {
const float32 = fc.float({ noDefaultInfinity: !special, noNaN: !special });
const double = fc.double({ noDefaultInfinity: !special, noNaN: !special });
const nested: fc.Arbitrary<Record<string, unknown>> = fc.letrec<{ n: Record<string, unknown> }>((tie) => ({
  n: fc.record({ name: text, id: int64, tags: fc.array(text, { maxLength: 3 }), child: fc.option(tie("n"), { depthSize: "small", nil: undefined }) }, { requiredKeys: ["name", "id", "tags"] }),
})).n;
const plainKinds = fc.record(
  {
    fDouble: double,
    fFloat: float32,
    fInt32: fc.integer(),
    fInt64: int64,
    fUint32: fc.nat({ max: 4294967295 }),
    fUint64: uint64,
    fSint32: fc.integer(),
    fSint64: int64,
    fFixed32: fc.nat({ max: 4294967295 }),
    fFixed64: uint64,
    fSfixed32: fc.integer(),
    fSfixed64: int64,
    fBool: fc.boolean(),
    fString: text,
    fEnum: fc.constantFrom(0, 1, 2, 7, -3),
    fNested: nested,
    fCustom: text,
    oInt32: fc.integer(),
    oString: text,
    oEnum: fc.constantFrom(0, 1, 2),
    oDouble: double,
    rInt64: fc.array(int64, { maxLength: 3 }),
    rString: fc.array(text, { maxLength: 3 }),
    rEnum: fc.array(fc.constantFrom(0, 1, 2, 9), { maxLength: 3 }),
    rNested: fc.array(nested, { maxLength: 2 }),
    rDouble: fc.array(double, { maxLength: 3 }),
    rBool: fc.array(fc.boolean(), { maxLength: 3 }),
    rUint64: fc.array(uint64, { maxLength: 3 }),
    rFloat: fc.array(float32, { maxLength: 3 }),
    choice: fc.option(
      fc.oneof(
        text.map((value) => ({ case: "cString", value })),
        int64.map((value) => ({ case: "cInt64", value })),
        nested.map((value) => ({ case: "cNested", value })),
        fc.constantFrom(0, 1, 2).map((value) => ({ case: "cEnum", value })),
      ),
      { nil: undefined },
    ),
  },
  { requiredKeys: [] },
);
return plainKinds;
};

describe("json-wire against the full path", () => {
  const wire = new JsonWire(false);
  const lenient = new JsonWire(true);
  const defaults = new JsonWire(false, true);

  it("property: every well-typed plain Kinds, both ways, is answered and is the full path's answer", () => {
    fc.assert(
      fc.property(kindsOf(safe64, safeU64, false), (init) => {
        const msg = create(KINDS, init as never);
        const bytes = toBinary(KINDS, msg);
        const text = fullDecode(judge.registry, KINDS, bytes);
        expect(fastDecode(wire, KINDS, bytes)).toBe(text);
        expect(fastDecode(defaults, KINDS, bytes)).toBe(fullDecode(judge.registry, KINDS, bytes, true));
        // the JSON a client would send (the full path's own print of it), back to the wire
        const json = JSON.parse(text as string) as JsonObject;
        const want = fullEncode(judge.registry, KINDS, json, false);
        expect(want).toBeInstanceOf(Uint8Array);
        expect(hex(wire.encode(KINDS, json, 0))).toBe(hex(want));
      }),
      { numRuns: 400 },
    );
  });

  it("property: plain Kinds with 64-bit integers of the whole range: read the same, written the same or left to the full path", () => {
    // (the test above shows it writes what it may; here most messages hold a value it leaves)
    fc.assert(
      fc.property(kindsOf(whole64, wholeU64, true), (init) => {
        const bytes = toBinary(KINDS, create(KINDS, init as never));
        const text = fullDecode(judge.registry, KINDS, bytes);
        expect(fastDecode(wire, KINDS, bytes)).toBe(text);
        const json = JSON.parse(text as string) as JsonObject;
        const fast = wire.encode(KINDS, json, 0);
        if (fast !== undefined) expect(hex(fast)).toBe(hex(fullEncode(judge.registry, KINDS, json, false)));
      }),
      { numRuns: 300 },
    );
  });

  it("property: random JSON for Kinds and Nested: the same bytes as the full path, or left to it (and always left where it refuses)", () => {
    for (const [w, ignore] of [
      [wire, false],
      [lenient, true],
    ] as const) {
      let answered = 0;
      const types = { Kinds: [judge.registry, KINDS], Nested: [judge.registry, NESTED], Two: [two, TWO] } as const;
      const cases = fc.constantFrom("Kinds", "Nested", "Two").chain((t) => jsonFor(types[t][1]).map((json) => [t, json] as const));
      fc.assert(
        fc.property(cases, ([t, json]) => {
          const [reg, desc] = types[t];
          const full = fullEncode(reg, desc, json, ignore);
          const fast = w.encode(desc, json, 0);
          if (fast === undefined) return;
          answered++;
          expect(hex(fast)).toBe(hex(full));
        }),
        { numRuns: 2000 },
      );
      expect(answered).toBeGreaterThan(50);
    }
  });

  it("property: random bytes (fields of every number and wire type, truncated, unknown): the full path's JSON text, or left to it", () => {
    const numbers = [...KINDS.fields.map((f) => f.number), 0, 19, 100, 536870911];
    const field = fc.tuple(fc.constantFrom(...numbers), fc.integer({ min: 0, max: 7 }), fc.uint8Array({ maxLength: 12 }), fc.nat({ max: 300 }));
    let answered = 0;
    fc.assert(
      fc.property(fc.array(field, { maxLength: 6 }), fc.boolean(), (fields, cut) => {
        const parts: number[] = [];
        for (const [no, wire, payload, n] of fields) {
          pushVarint(parts, no * 8 + wire);
          if (wire === 0) pushVarint(parts, n * 997);
          else if (wire === 2) {
            pushVarint(parts, payload.length);
            parts.push(...payload);
          } else parts.push(...payload.subarray(0, wire === 1 ? 8 : wire === 5 ? 4 : payload.length));
        }
        let bytes = Uint8Array.from(parts);
        if (cut && bytes.length > 0) bytes = bytes.subarray(0, bytes.length - 1);
        const full = fullDecode(judge.registry, KINDS, bytes);
        const fast = fastDecode(wire, KINDS, bytes);
        const withDefaults = fastDecode(defaults, KINDS, bytes);
        if (withDefaults !== undefined) expect(withDefaults).toBe(fullDecode(judge.registry, KINDS, bytes, true));
        if (fast === undefined) return;
        answered++;
        expect(fast).toBe(full);
      }),
      { numRuns: 3000 },
    );
    expect(answered).toBeGreaterThan(50);
  });

  it("proto2: explicit presence, closed enums, unpacked and packed lists, groups, required fields and extensions", () => {
    const w = new JsonWire(false);
    const same = (json: JsonObject, desc = TWO, reg: Registry = two) => {
      const full = fullEncode(reg, desc, json, false);
      const fast = w.encode(desc, json, 0);
      return { full: hex(full), fast: hex(fast) };
    };
    // taken: zeros are written (explicit presence), lists each way, a nested message
    for (const json of [{ a: 0, s: "", b: false, d: 0 }, { unpacked: [1, -2, 300] }, { packed: [1, -2, 2 ** 40] }, { child: { a: 5, child: { s: "x" } } }] as JsonObject[]) {
      const r = same(json);
      expect(r.fast).toBe(r.full);
      expect(typeof r.fast).toBe("string");
    }
    expect(hex(w.encode(TWO, { unpacked: [1, 2] }, 0))).toBe("18011802"); // one tag per element
    expect(hex(w.encode(TWO, { packed: [1, -1] }, 0))).toBe("22020201"); // one length-delimited run, zigzag
    // left to the full path: a closed enum, a group, a required field, an extension's message
    expect(w.encode(TWO, { closed: "CLOSED_ONE" }, 0)).toBeUndefined();
    expect(w.encode(TWO, { g: { x: 1 } }, 0)).toBeUndefined();
    expect(w.encode(two.getMessage("dojang.test.wire.v1.Required")!, { r: 1 }, 0)).toBeUndefined();
    expect(w.encode(two.getMessage("dojang.test.wire.v1.Extended")!, { a: 1 }, 0)).toBeUndefined();
    // and read back the same way
    const bytes = toBinary(TWO, create(TWO, { a: 0, unpacked: [1, 2], packed: [3n, -4n], child: { s: "é" } } as never));
    expect(fastDecode(w, TWO, bytes)).toBe(fullDecode(two, TWO, bytes));
    expect(fastDecode(w, TWO, bytes)).toBe('{"a":0,"unpacked":[1,2],"packed":["3","-4"],"child":{"s":"é"}}');
    // emitDefaults: proto2's fields have presence (nothing to print when unset) but its lists print []
    expect(fastDecode(new JsonWire(false, true), TWO, new Uint8Array())).toBe(fullDecode(two, TWO, new Uint8Array(), true));
    expect(fastDecode(new JsonWire(false, true), TWO, new Uint8Array())).toBe('{"unpacked":[],"packed":[]}');
    expect(fastDecode(new JsonWire(false, true), NESTED, new Uint8Array())).toBe('{"name":"","id":"0","tags":[]}');
  });

  it("known answers: bytes written from the encoding spec, headroom left in front, and what is left to the full path", () => {
    // written by hand from the encoding spec: field 1 "n", 2 varint 1999, 3 "a" then 3 "b"
    const ITEM = NESTED;
    expect(hex(wire.encode(ITEM, { name: "n", id: "1999", tags: ["a", "b"] }, 0))).toBe("0a016e10cf0f1a01611a0162");
    const framed = wire.encode(ITEM, { name: "n" }, 5)!;
    expect(hex(framed)).toBe("00000000000a016e");
    expect(wire.encode(ITEM, { id: "99999999999999999" }, 0)).toBeUndefined(); // beyond 2^53: the full path's exact digits
    expect(wire.encode(KINDS, { fString: "a", f_string: "b" }, 0)).toBeUndefined(); // one field by both its names
    expect(wire.encode(KINDS, { cString: "a", cInt64: 1 }, 0)).toBeUndefined(); // a oneof twice
    expect(wire.encode(KINDS, { fBytes: "AA==" }, 0)).toBeUndefined();
    for (const text of ['{"fDouble":1e309}', '{"fDouble":-1e309}', '{"fFloat":1e39}', '{"fInt64":1e309}']) expect(wire.encode(KINDS, JSON.parse(text) as JsonObject, 0)).toBeUndefined(); // JSON.parse's Infinity
    expect(fullEncode(judge.registry, KINDS, JSON.parse('{"fDouble":1e309}') as JsonObject, false)).toBeInstanceOf(Error);
    expect(wire.encode(KINDS, { mString: {} }, 0)).toBeUndefined();
    expect(wire.encode(KINDS, { tTs: "2020-01-01T00:00:00Z" }, 0)).toBeUndefined();
    expect(wire.encode(ITEM, { name: "a", zzz: 1 }, 0)).toBeUndefined();
    expect(hex(lenientOf().encode(ITEM, { name: "a", zzz: 1 }, 0))).toBe("0a0161");
  });
});

function lenientOf(): JsonWire {
  return new JsonWire(true);
}

function pushVarint(out: number[], n: number): void {
  while (n > 127) {
    out.push((n % 128) | 128);
    n = Math.floor(n / 128);
  }
  out.push(n);
}
