import { defineConfig } from "vitest/config";

// Tests talk to real sockets on loopback; each file gets its own fork so a misbehaving
// peer in one file cannot hold another file's ports or timers.
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    pool: "forks",
    testTimeout: 30_000,
    hookTimeout: 30_000,
    teardownTimeout: 10_000,
    reporters: ["default"],
  },
});
