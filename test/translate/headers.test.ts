import { describe, expect, it } from "vitest";
import { HOP_BY_HOP_HEADERS, connectionOptions, isNotForwarded, TE_TRAILERS } from "../../src/translate/headers.js";

describe("isNotForwarded()", () => {
  it("lists exactly the six connection-specific names node refuses to send", () => {
    expect([...HOP_BY_HOP_HEADERS].sort()).toEqual(
      ["connection", "http2-settings", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"],
    );
  });

  it.each([...HOP_BY_HOP_HEADERS])("drops the hop-by-hop header %s", (name) => {
    expect(isNotForwarded(name, "x")).toBe(true);
  });

  it("forwards te only when it is exactly trailers", () => {
    expect(TE_TRAILERS).toBe("trailers");
    expect(isNotForwarded("te", "trailers")).toBe(false);
    expect(isNotForwarded("te", "gzip")).toBe(true);
    expect(isNotForwarded("te", "trailers, deflate")).toBe(true);
    expect(isNotForwarded("te", "")).toBe(true);
  });

  it("drops host because :authority carries it", () => {
    expect(isNotForwarded("host", "example.com")).toBe(true);
  });

  it.each([":path", ":authority", ":method", ":scheme", ":status", ":protocol"])("drops the pseudo-header %s", (name) => {
    expect(isNotForwarded(name, "x")).toBe(true);
  });

  it.each(["content-type", "grpc-timeout", "user-agent", "x-custom-bin", "authorization", "grpc-encoding", "grpc-status", "grpc-message"])(
    "forwards %s",
    (name) => { expect(isNotForwarded(name, "v")).toBe(false); },
  );
});

describe("connectionOptions() (RFC 9110 §7.6.1: the fields a Connection header names)", () => {
  it("lists each token, lower-cased, without whitespace or empty list elements", () => {
    expect(connectionOptions("keep-alive, X-Hop ,,Upgrade")).toEqual(["keep-alive", "x-hop", "upgrade"]);
    expect(connectionOptions("close")).toEqual(["close"]);
    expect(connectionOptions("")).toEqual([]);
  });

  it("names no field with what is not a token", () => {
    expect(connectionOptions('x-a, "quoted", b c, d@e')).toEqual(["x-a"]);
  });
});
