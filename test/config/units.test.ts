import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  formatDuration,
  formatHostPort,
  formatSize,
  MAX_DURATION_MS,
  parseDuration,
  parseHostPort,
  parseSize,
} from "../../src/config/units.js";

const ms = (s: string | number) => {
  const r = parseDuration(s);
  return r.ok ? r.ms : r.error;
};
const bytes = (s: string | number) => {
  const r = parseSize(s);
  return r.ok ? r.bytes : r.error;
};
const hp = (s: string) => {
  const r = parseHostPort(s);
  return r.ok ? r.hostPort : r.error;
};

describe("parseDuration()", () => {
  it.each([
    ["250ms", 250],
    ["5s", 5000],
    ["1m", 60_000],
    ["1h", 3_600_000],
    ["1.5s", 1500],
    ["1.001s", 1001], // exact decimal arithmetic, not 1000.999…
    ["0.5m", 30_000],
    ["1m30s", 90_000],
    ["1h2m3s4ms", 3_723_004],
    ["0", 0],
    ["0s", 0],
    ["0.0", 0],
    [" 5s ", 5000],
    [0, 0],
    [`${MAX_DURATION_MS}ms`, MAX_DURATION_MS],
  ])("parses %j as %d ms", (input, expected) => {
    expect(parseDuration(input)).toEqual({ ok: true, ms: expected });
  });

  it("rejects an empty or blank string", () => {
    expect(ms("")).toContain("empty duration");
    expect(ms("   ")).toContain("empty duration");
  });

  it.each([
    ["5x", 'invalid duration "5x"'],
    ["s", 'invalid duration "s"'],
    ["5 s", 'invalid duration "5 s"'],
    ["5S", 'invalid duration "5S"'],
    ["1d", 'invalid duration "1d"'],
    [".5s", 'invalid duration ".5s"'],
    ["5s5", 'invalid duration "5s5"'],
    ["1e3ms", 'invalid duration "1e3ms"'],
    ["-5s", 'duration "-5s" must not be negative'],
    ["-1", 'duration "-1" must not be negative'],
    ["30s1m", "units must go from largest to smallest"],
    ["1s1s", "units must go from largest to smallest"],
    ["0.5ms", 'duration "0.5ms" must be a whole number of milliseconds'],
    ["1.0005s", "must be a whole number of milliseconds"],
    ["1.5", '"1.5" has no unit: write 1.5s, 1.5m or 1.5h'],
    ["250", '"250" has no unit: write 250ms, 250s, 250m or 250h'],
    ["250.0", '"250.0" has no unit: write 250.0ms, 250.0s, 250.0m or 250.0h'],
    ["25d", 'invalid duration "25d"'],
    ["600h", 'duration "600h" is too long (at most 2147483647ms'],
    [-1, "duration -1 must not be negative"],
    [1.5, "1.5 has no unit: write 1.5s, 1.5m or 1.5h"],
    [250, "250 has no unit: write 250ms, 250s, 250m or 250h"],
    [MAX_DURATION_MS, "2147483647 has no unit"],
    [Number.NaN, "duration NaN is not a finite number"],
    [Number.POSITIVE_INFINITY, "is not a finite number"],
    [`${MAX_DURATION_MS + 1}ms`, "is too long"],
  ])("rejects %j", (input, fragment) => {
    const r = parseDuration(input);
    expect(r.ok).toBe(false);
    expect(ms(input)).toContain(fragment);
  });

  it("never throws, whatever the string", () => {
    fc.assert(fc.property(fc.string(), (s) => typeof parseDuration(s).ok === "boolean"));
  });

  it("round-trips formatDuration(ms) for every whole ms in range", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: MAX_DURATION_MS }), (n) => {
        expect(parseDuration(formatDuration(n))).toEqual({ ok: true, ms: n });
      }),
    );
  });

  it("round-trips whole multiples of each unit", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(1, 1000, 60_000, 3_600_000),
        fc.integer({ min: 0, max: 500 }),
        (unit, k) => {
          expect(parseDuration(formatDuration(unit * k))).toEqual({ ok: true, ms: unit * k });
        },
      ),
    );
  });

  it("formats with the largest exact unit", () => {
    expect([0, 1, 1500, 30_000, 90_000, 60_000, 7_200_000].map(formatDuration)).toEqual([
      "0ms",
      "1ms",
      "1500ms",
      "30s",
      "90s",
      "1m",
      "2h",
    ]);
  });
});

describe("parseSize()", () => {
  it.each([
    [4194304, 4194304],
    [0, 0],
    ["4194304", 4194304],
    ["4MiB", 4 * 1024 * 1024],
    ["64KiB", 65536],
    ["1GiB", 1024 ** 3],
    ["4MB", 4_000_000],
    ["64KB", 64_000],
    ["1GB", 1_000_000_000],
    ["100B", 100],
    ["1.5MiB", 1_572_864],
    ["4 MiB", 4 * 1024 * 1024],
    ["4mib", 4 * 1024 * 1024],
    ["64kB", 64_000],
  ])("parses %j as %d bytes", (input, expected) => {
    expect(parseSize(input)).toEqual({ ok: true, bytes: expected });
  });

  it.each([
    [-1, "size -1 must not be negative"],
    ["-1", 'size "-1" must not be negative'],
    ["-4MiB", 'size "-4MiB" must not be negative'],
    [1.5, "size 1.5 must be a whole number of bytes"],
    ["1.5B", 'size "1.5B" must be a whole number of bytes'],
    ["0.1KiB", "must be a whole number of bytes"],
    ["4XB", 'unknown size unit "XB" in "4XB"'],
    ["4M", 'unknown size unit "M"'],
    ["MiB", 'invalid size "MiB"'],
    ["", "empty size"],
    ["1e6", 'invalid size "1e6"'],
    [Number.NaN, "is not a finite number"],
    ["9999999999GiB", "is too large"],
  ])("rejects %j", (input, fragment) => {
    expect(parseSize(input).ok).toBe(false);
    expect(bytes(input)).toContain(fragment);
  });

  it("never throws, whatever the string", () => {
    fc.assert(fc.property(fc.string(), (s) => typeof parseSize(s).ok === "boolean"));
  });

  it("round-trips formatSize(bytes)", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 40 }), (n) => {
        expect(parseSize(formatSize(n))).toEqual({ ok: true, bytes: n });
      }),
    );
    expect([0, 1000, 65536, 4194304, 1024 ** 3].map(formatSize)).toEqual(["0B", "1000B", "64KiB", "4MiB", "1GiB"]);
  });
});

describe("parseHostPort()", () => {
  it.each([
    ["127.0.0.1:8080", { host: "127.0.0.1", port: 8080 }],
    ["0.0.0.0:0", { host: "0.0.0.0", port: 0 }],
    ["localhost:50051", { host: "localhost", port: 50051 }],
    ["LocalHost:1", { host: "localhost", port: 1 }],
    ["my_service.default.svc.cluster.local:65535", { host: "my_service.default.svc.cluster.local", port: 65535 }],
    ["example.com.:443", { host: "example.com.", port: 443 }],
    ["[::1]:8080", { host: "::1", port: 8080 }],
    ["[::]:9901", { host: "::", port: 9901 }],
    ["[2001:DB8::1]:443", { host: "2001:db8::1", port: 443 }],
    ["[::ffff:127.0.0.1]:80", { host: "::ffff:127.0.0.1", port: 80 }],
  ])("parses %j", (input, expected) => {
    expect(parseHostPort(input)).toEqual({ ok: true, hostPort: expected });
  });

  it.each([
    ["127.0.0.1", "missing port"],
    ["127.0.0.1:", 'port "" must be a number from 0 to 65535'],
    ["127.0.0.1:65536", "port 65536 is out of range (0 to 65535)"],
    ["127.0.0.1:99999", "port 99999 is out of range"],
    ["127.0.0.1:-1", 'port "-1" must be a number'],
    ["127.0.0.1:80a", 'port "80a" must be a number'],
    ["127.0.0.1:123456", 'port "123456" must be a number'],
    [":8080", "missing host"],
    ["::1:8080", "put an IPv6 address in brackets"],
    ["[::1]", 'missing ":port" after "]"'],
    ["[::1:8080", 'missing "]"'],
    ["[not-v6]:80", '"not-v6" is not an IPv6 address'],
    ["[127.0.0.1]:80", "is not an IPv6 address"],
    ["256.0.0.1:80", '"256.0.0.1" is not a valid IPv4 address'],
    ["1.2.3:80", "is not a valid IPv4 address"],
    ["bad host:80", "is not a valid host name"],
    ["-bad.example:80", "is not a valid host name"],
    ["a..b:80", "is not a valid host name"],
    ["http://x:80", "put an IPv6 address in brackets"],
    ["", "missing port"],
  ])("rejects %j", (input, fragment) => {
    expect(parseHostPort(input).ok).toBe(false);
    expect(hp(input)).toContain(fragment);
  });

  it("never throws, whatever the string", () => {
    fc.assert(fc.property(fc.string(), (s) => typeof parseHostPort(s).ok === "boolean"));
  });

  it("round-trips formatHostPort for IPv4 and IPv6 hosts", () => {
    for (const s of ["127.0.0.1:8080", "[::1]:8080", "localhost:0"]) {
      const r = parseHostPort(s);
      expect(r.ok && formatHostPort(r.hostPort)).toBe(s);
    }
  });
});
