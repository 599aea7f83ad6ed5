// The embedded default config. config/dojang.yaml holds the same text, byte for byte (a test
// checks it), so the file a newcomer reads is the config dojang runs with when given none.

import { configFromText } from "./parse.js";
import type { Config } from "./schema.js";

/** Listener 127.0.0.1:8080 (h2c), admin 127.0.0.1:9901, cluster "backend" at 127.0.0.1:50051, route prefix "/" with timeout 30s and 4 MiB limits. */
export const DEFAULT_CONFIG_YAML: string = `# yaml-language-server: $schema=./dojang.schema.json
# dojang: the embedded default config (also used when no --config is given).
#
# A newcomer's reference: every value here is checked at start-up, and an invalid config never
# starts (the CLI exits 2 naming the key, e.g. \`listeners[0].routes[0].cluster: unknown cluster\`).
# Every other key and its default is in config/example-full.yaml; config/sidecar.yaml shows the
# same shape driven by environment variables (\`\${VAR}\` / \`\${VAR:-default}\`).
#
# Units: durations "250ms", "5s", "1.5s", "1m", "1h" (a number needs its unit: 30 is refused);
# sizes in bytes or "64KiB", "4MiB", "1GiB" (binary) / "4MB" (decimal).

# Admin listener: /metrics, /ready, /live, /config, GET /faults, GET /calls. Leave the key out for
# no admin listener. Reads are not authenticated: keep it on loopback. Requests that change traffic
# (POST/PATCH/DELETE /faults) are refused unless \`mutations: true\` (see config/example-full.yaml).
admin:
  address: 127.0.0.1:9901

listeners:
  # One plain-text HTTP/2 (h2c) listener. gRPC clients connect here.
  - name: main
    address: 127.0.0.1:8080          # "host:port"; IPv6 as "[::1]:8080"; port 0 = any free port
    routes:
      # Routes are tried in the order written; the first that matches wins (as in Envoy).
      # This one catches every call.
      - match: { prefix: "/" }         # or { path: "/pkg.Svc/Method" } or { service: "pkg.Svc" }
        cluster: backend               # must name a cluster below
        timeout: 30s                   # cap on the whole call; the client's grpc-timeout may be shorter
        maxRequestMessageBytes: 4MiB   # larger client messages end the call with RESOURCE_EXHAUSTED
        maxResponseMessageBytes: 4MiB  # same for upstream messages

clusters:
  # A cluster is a set of upstream gRPC servers (h2c), connected to over HTTP/2.
  - name: backend
    endpoints: ["127.0.0.1:50051"]
`;

/** DEFAULT_CONFIG_YAML, parsed (deep-frozen). It has no `${VAR}`s, so the environment does not affect it. */
export const DEFAULT_CONFIG: Config = configFromText(DEFAULT_CONFIG_YAML, "(embedded default)", {});
