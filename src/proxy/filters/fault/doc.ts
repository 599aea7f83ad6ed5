// Reference text for docs/reference/faults.md: fault kinds compared with Envoy's fault filter and Toxiproxy,
// how calls are selected, how faults stack, and the x-dojang-fault syntax. A test checks that
// every kind in FAULT_KINDS has a row. Sources: Envoy docs "Fault Injection" (HTTP filter,
// v1.3x) and fault.proto v3; Toxiproxy README "Toxics" (latency, down, bandwidth, slow_close,
// timeout, reset_peer, slicer, limit_data). The wording is dojang's own.

export const FAULT_KINDS_DOC = `## Fault injection

Each rule has one \`action.kind\`. Envoy's fault filter works on HTTP requests, and Toxiproxy
works on TCP bytes. dojang works on gRPC calls and HTTP/2 streams.

| kind | what the client sees | Envoy fault filter | Toxiproxy |
| --- | --- | --- | --- |
| \`abort\` | a gRPC status (\`code\` 0-16 or a name, \`message\`, optional \`details\` for grpc-status-details-bin) sent as Trailers-Only, or after \`afterMessages: N\` real response messages | \`abort.grpc_status\`: Trailers-Only only, fixed message, no details | none (works below HTTP) |
| \`http\` | a raw HTTP response (\`status\`, \`body\`, \`contentType\`, default text/html) that bypasses the gRPC translation | \`abort.http_status\`, but for gRPC requests Envoy sends a gRPC local reply instead | none |
| \`reset\` | RST_STREAM with any HTTP/2 error \`code\`, \`at\` before_headers, after_headers, after_messages (\`messages: N\`), or mid_message (after N whole messages, partway into the next one) | none | \`reset_peer\`, which resets the whole TCP connection |
| \`goaway\` | GOAWAY on the client's connection: \`graceful\` (last-stream-id = newest stream) or \`abrupt\` (below the in-flight streams), with \`code\` | none | none |
| \`close_connection\` | the connection closes after \`afterBytes\` response bytes | none | \`limit_data\` |
| \`shape\` | a malformed response, one of: no_trailers, trailers_without_status, wrong_content_type, missing_content_type, compressed_flag, truncated_message, rst_after_trailers | none | none |
| \`delay\` | waits \`at\` request, response_headers, message (each, or only the N-th) or trailers; a fixed \`delay\`, or \`jitter\` (uniform or normal) | \`delay.fixed_delay\`, before the request only | \`latency\` with \`jitter\`, on every chunk |
| \`bandwidth\` | \`bytesPerSecond\` for one stream (response by default) | \`response_rate_limit\` (KiB/s, response only) | \`bandwidth\` (KB/s, whole connection) |
| \`blackhole\` | the call is accepted and never answered | none (a very long delay comes close) | \`timeout\` with timeout 0 |
| \`stall\` | dojang stops reading one \`direction\`, so HTTP/2 flow control stalls the sender | none | \`timeout\` comes close, but it drops the data |
| \`deadline\` | the grpc-timeout sent upstream is dropped, or shrunk or grown (by \`factor\`, or \`by\` a duration) | none | none |
| \`unreachable\` | 14 UNAVAILABLE, with no connection attempted | none | the proxy disabled (\`enabled: false\`) |
| \`upstream_reset\` | the upstream's stream is reset (\`code\`) after \`afterRequestMessages\` request messages | none | \`reset_peer\` on the upstream side, for the whole connection |

## Selecting calls

| | dojang | Envoy | Toxiproxy |
| --- | --- | --- | --- |
| which calls | \`match\`: listener, route (label or index), service, method, metadata (equals, present, whole-value regex) | \`headers\`, \`upstream_cluster\`, \`downstream_nodes\` | every connection through the proxy |
| how often | \`fire.percentage\`, drawn from a seeded PRNG so runs replay; \`calls: "1-2"\` or \`every: 3\`; \`maxTimes\`; a time window (\`after\`, \`for\`) | percentage, drawn at random | \`toxicity\` (a probability) |
| how many at once | \`maxActiveFaults\` | \`max_active_faults\` | none |
| at run time | admin API \`/faults\` (GET, POST, PATCH, DELETE, POST /faults/reset) and request headers | runtime keys and request headers | REST API |

Counting. \`matched\` counts calls that passed \`match\`, and a call's sequence number is its
rule's \`matched\` count at that point. \`fired\` counts calls that received the action. The
gates run in this order: time window, maxTimes, sequence, percentage. The percentage gate takes
exactly one PRNG draw, and a jittered delay takes one more. \`maxActiveFaults\` is checked after
the gates, so the draw sequence depends only on the sequence of matched calls. Seeds: each rule
uses its own \`seed\` if it has one. Otherwise its seed comes from the set's seed (default 0) and
the rule id. \`POST /faults/reset\` (the library's \`faults.reset()\`) goes back to the config:
API-added rules are removed, config rules come back as loaded (undoing PATCH and DELETE), every
count and PRNG stream and time window restarts, so a seeded run replays; calls already in flight
keep the faults they drew ([harness.md](harness.md#what-a-reset-resets)).

## Stacking

One call can be matched by several rules. They are evaluated in set order: config rules in the
order they were loaded, then API rules in the order they were posted. Actions from request
headers come before every rule.

Each action fills a slot, and in each slot the first action wins. The rules whose actions lose
are not counted as \`fired\`.

- Terminal kinds (abort, http, reset, goaway, close_connection, shape, blackhole, unreachable,
  upstream_reset) all share one slot. A call therefore gets at most one of them.
- Modifiers compose with the terminal action and with each other. They are delay (one slot per
  point, per message number and per direction), bandwidth and stall (one slot per direction
  each), and deadline (one slot).

## Request headers (listener option \`faultHeaders: true\`)

| header | value | becomes |
| --- | --- | --- |
| \`x-envoy-fault-abort-request\` | HTTP status 200-599 | \`abort\` with the gRPC code mapped from that status (Envoy's gRPC local reply), message "fault filter abort" |
| \`x-envoy-fault-abort-grpc-request\` | gRPC code, 0 to 2^32-1 | \`abort\`. It is ignored when the header above is also set (Envoy's rule) |
| \`x-envoy-fault-abort-request-percentage\` | 0-100 | the percentage for either abort header |
| \`x-envoy-fault-delay-request\` | milliseconds (Envoy defines the header so: a bare number here is ms) | \`delay\` at request |
| \`x-envoy-fault-delay-request-percentage\` | 0-100 | its percentage |
| \`x-envoy-fault-throughput-response\` | KiB/s, above 0 | \`bandwidth\` on the response, value × 1024 bytes per second |
| \`x-envoy-fault-throughput-response-percentage\` | 0-100 | its percentage |
| \`x-dojang-fault\` | see below | any kind |

A missing percentage header means 100. An invalid value drops that one fault and logs the
reason. Envoy would fall back to its configured percentage in that case.

\`x-dojang-fault\` holds one or more faults separated by \`,\`. Each has the form
\`kind[=arg][@point[:N]][;key=value]...\`. The keys are the config keys for that kind, and these
short forms also work: \`pct\` (percentage), \`msg\` (message), \`type\` (contentType), \`dir\`
(direction). Values can be percent-encoded. A duration carries its unit, as in the config
(\`delay=250\` is ignored: \`"250" has no unit: write 250ms, 250s, 250m or 250h\`). Examples:

| value | meaning |
| --- | --- |
| \`abort=UNAVAILABLE;msg=down\` | Trailers-Only 14 "down" |
| \`abort=14@after_messages:2\` | two messages, then status 14 |
| \`http=503;body=%3Ch1%3Edown%3C%2Fh1%3E\` | raw 503 HTML |
| \`reset=CANCEL@after_headers\`, \`reset=8@mid_message:1\` | RST_STREAM |
| \`goaway=abrupt;code=ENHANCE_YOUR_CALM\` | GOAWAY |
| \`close=1024\` | close the connection after 1 KiB |
| \`shape=no_trailers\`, \`shape=wrong_content_type;type=text/html\` | malformed response |
| \`delay=200ms@message:2\`, \`delay=100ms..300ms\` (uniform), \`delay=200ms~50ms@trailers\` (normal) | delays |
| \`bandwidth=64KiB@response\`, \`stall=response\`, \`blackhole\` | flow |
| \`deadline=drop\`, \`deadline=shrink;factor=0.5\`, \`deadline=grow;by=2s\` | grpc-timeout sent upstream |
| \`unreachable\`, \`upstream_reset=CANCEL@after_messages:1\` | upstream leg |
| \`abort=13;pct=25\` | abort on 25 % of calls |
`;
