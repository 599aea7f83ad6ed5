// src/parent.ts's decision, as a pure function: who started dojang, from the parent pid it first
// saw, its own pid and its process group; and the launcher's hand-over to the served process.
// The processes themselves are in test/process/stop-with-parent.test.ts.
import { describe, expect, it } from "vitest";
import { STARTED_BY_ENV, parentAtStart, startedBy } from "../../src/parent.js";

describe("parentAtStart()", () => {
  it("is the parent pid it saw, unless that is init", () => {
    expect(parentAtStart(4242, 5000, () => 7)).toBe(4242);
  });

  it("under init, in a group that is neither its own nor init's: adopted, so the parent was gone already (0)", () => {
    expect(parentAtStart(1, 5000, () => 4200)).toBe(0);
  });

  it("under init in its own group (systemd, tini) or in init's (npm as a container's pid 1): init started it", () => {
    expect(parentAtStart(1, 5000, () => 5000)).toBe(1);
    expect(parentAtStart(1, 5000, () => 1)).toBe(1);
  });

  it("dojang as pid 1, or no process group to read (not Linux): the parent pid as seen", () => {
    expect(parentAtStart(0, 1, () => 4200)).toBe(0);
    expect(parentAtStart(1, 5000, () => undefined)).toBe(1);
  });
});

describe("startedBy()", () => {
  it("takes the launcher's record (process.execve keeps the pid, so the parent), 0 included", () => {
    expect(startedBy({ [STARTED_BY_ENV]: "4242" })).toBe(4242);
    expect(startedBy({ [STARTED_BY_ENV]: "0" })).toBe(0);
  });

  it("without one (or a malformed one) looks for itself", () => {
    expect(startedBy({})).toBe(process.ppid);
    expect(startedBy({ [STARTED_BY_ENV]: "x1" })).toBe(process.ppid);
  });
});
