// The registry behind test/architecture/key-coverage.test.ts (issue 0.4.1 item 9): for every config
// key, the behaviour tests that assert its effect, each as "<file> > <test title>" (the title as it
// is written in the file, a template's or an it.each's placeholders included). Setting a key in a
// test is not enough: an entry is a reviewed claim that the named test fails when the key does
// nothing. When the registry was written most entries were checked by running the test with the
// key deleted from the parsed config (its default then applies) or with the code that reads it
// disabled, the rest by reading the test against the key's default; a test that set a key to its
// default, or waited however long the key made it wait, was changed or replaced. The coverage
// test checks each claim's form: the test exists once, is not skipped, asserts, and its file
// sets the key.
//
// A new key comes with its behaviour test and its line here. A test renamed or removed fails the
// coverage test until its line follows.
export const EFFECTS: Readonly<Record<string, readonly string[]>> = {
  "<faultRule>.action.afterBytes": ["test/behaviour/faults-connection.test.ts > closes the client's connection after exactly afterBytes response bytes, without trailers"],
  "<faultRule>.action.afterMessages": ["test/behaviour/faults-abort-reset.test.ts > with afterMessages N on a server stream delivers exactly N messages and then the code"],
  "<faultRule>.action.afterRequestMessages": ["test/behaviour/faults-connection.test.ts > resets the upstream stream with the chosen code once N request messages were forwarded"],
  "<faultRule>.action.at": ["test/behaviour/faults-timing.test.ts > at response_headers holds the response headers, after the upstream already answered"],
  "<faultRule>.action.body": ["test/behaviour/faults-abort-reset.test.ts > sends the raw status and HTML body verbatim to a raw client, without touching the upstream"],
  "<faultRule>.action.by": ["test/behaviour/faults-timing.test.ts > grow by 2s sends more upstream, but the client's own deadline still ends the call at its time"],
  "<faultRule>.action.bytesPerSecond": ["test/behaviour/faults-timing.test.ts > throttles a 256 KiB response to 128 KiB/s: it takes about two seconds and arrives intact"],
  "<faultRule>.action.code": ["test/behaviour/faults-abort-reset.test.ts > sends Trailers-Only with the chosen code, message and status details, and never calls the upstream"],
  "<faultRule>.action.contentType": ["test/behaviour/faults-shape.test.ts > wrong_content_type sends the given content-type, which grpc-js does not check: the call succeeds"],
  "<faultRule>.action.delay": ["test/behaviour/faults-timing.test.ts > at request holds the call for the delay before the upstream sees it"],
  "<faultRule>.action.details": ["test/behaviour/faults-abort-reset.test.ts > sends Trailers-Only with the chosen code, message and status details, and never calls the upstream"],
  "<faultRule>.action.direction": ["test/behaviour/faults-timing.test.ts > at message N with direction request holds the N-th request message on its way upstream"],
  "<faultRule>.action.factor": ["test/behaviour/faults-timing.test.ts > shrink with factor 0.5 sends about half the client's budget upstream"],
  "<faultRule>.action.jitter.normal.mean": ["test/behaviour/fault-keys.test.ts > with mean 800ms and stddev 400ms (seeded) the waits spread on both sides of the mean"],
  "<faultRule>.action.jitter.normal.stddev": ["test/behaviour/fault-keys.test.ts > with mean 800ms and stddev 400ms (seeded) the waits spread on both sides of the mean"],
  "<faultRule>.action.jitter.uniform": ["test/behaviour/faults-timing.test.ts > with uniform jitter waits a time within the bounds on every call"],
  "<faultRule>.action.kind": [
    "test/behaviour/faults-abort-reset.test.ts > sends Trailers-Only with the chosen code, message and status details, and never calls the upstream",
    "test/behaviour/faults-controls.test.ts > x-dojang-fault injects any kind when faultHeaders is on",
  ],
  "<faultRule>.action.message": [
    "test/behaviour/faults-abort-reset.test.ts > sends Trailers-Only with the chosen code, message and status details, and never calls the upstream",
    "test/behaviour/faults-timing.test.ts > at message N holds only the N-th response message",
  ],
  "<faultRule>.action.messages": ["test/behaviour/faults-abort-reset.test.ts > after_messages N on a server stream delivers exactly N whole messages and then RST_STREAM with the code"],
  "<faultRule>.action.mode": ["test/behaviour/faults-connection.test.ts > abrupt fails the calls in flight on that connection with 14 UNAVAILABLE, and a new connection works"],
  "<faultRule>.action.shape": ["test/behaviour/faults-shape.test.ts > no_trailers ends the stream after the message with no trailers, and grpc-js reports 13 INTERNAL"],
  "<faultRule>.action.status": ["test/behaviour/faults-abort-reset.test.ts > sends the raw status and HTML body verbatim to a raw client, without touching the upstream"],
  "<faultRule>.enabled": ["test/behaviour/faults-controls.test.ts > adds, reads, counts, patches, deletes and resets rules over HTTP"],
  "<faultRule>.fire.after": ["test/behaviour/faults-determinism.test.ts > fire only between after and after + for, counted from when the rule was added"],
  "<faultRule>.fire.calls": ["test/behaviour/faults-determinism.test.ts > \"1-2\" fails the first two matched calls and lets the rest pass, the same way on every run"],
  "<faultRule>.fire.every": ["test/behaviour/faults-determinism.test.ts > every: 3 fails every third matched call"],
  "<faultRule>.fire.for": ["test/behaviour/faults-determinism.test.ts > fire only between after and after + for, counted from when the rule was added"],
  "<faultRule>.fire.maxTimes": ["test/behaviour/faults-determinism.test.ts > maxTimes stops a rule after it fired that many times"],
  "<faultRule>.fire.percentage": ["test/behaviour/faults-determinism.test.ts > give identical journals when the same rule set runs twice on two fresh instances"],
  "<faultRule>.match.direction": ["test/behaviour/fault-keys.test.ts > a stall with match.direction response lets the request through (the upstream answers) and holds the answer until the deadline"],
  "<faultRule>.match.listener": ["test/behaviour/fault-match-keys.test.ts > match.listener: a rule for listener b aborts b's calls; a's, to the same route and cluster, reach the upstream"],
  "<faultRule>.match.metadata[].equals": [
    "test/behaviour/faults-abort-reset.test.ts > leaves unmatched calls on the same connection alone: another method and a call without the matching metadata succeed",
  ],
  "<faultRule>.match.metadata[].name": [
    "test/behaviour/faults-abort-reset.test.ts > leaves unmatched calls on the same connection alone: another method and a call without the matching metadata succeed",
  ],
  "<faultRule>.match.metadata[].present": ["test/behaviour/faults-timing.test.ts > holds only the matched call: another call on the same connection is answered at once"],
  "<faultRule>.match.metadata[].regex": [
    "test/behaviour/fault-keys.test.ts > x-region eu-west-1 and eu-north-2 get the abort; us-east-1, a value with the match inside it, and no header reach the upstream",
  ],
  "<faultRule>.match.method": ["test/behaviour/faults-abort-reset.test.ts > leaves unmatched calls on the same connection alone: another method and a call without the matching metadata succeed"],
  "<faultRule>.match.route": ["test/behaviour/fault-match-keys.test.ts > match.route: a rule for route prefix:/ (by its label, and by its index 1) leaves the service route's calls alone"],
  "<faultRule>.match.service": ["test/behaviour/fault-match-keys.test.ts > match.service: a rule for other.Svc aborts its calls, not test.Echo's on the same route"],
  "<faultRule>.seed": ["test/behaviour/faults-determinism.test.ts > follow the seed: another set seed draws another sequence, and a rule's own seed overrides the set's"],
  "accessLog": ["test/observe/access-log.test.ts > writes no access lines when accessLog is false"],
  "accessLogRedact": ["test/observe/access-log.test.ts > accessLogRedact: the fields the operator names are <redacted> in the access log and GET /calls; the others are shown"],
  "admin.address": ["test/observe/admin-security.test.ts > answers 401 with WWW-Authenticate: Bearer without the token or with a wrong one, and accepts the right one"],
  "admin.mutations": [
    "test/behaviour/listener-reload.test.ts > POST /reload and POST /drain are mutations: 403 while admin.mutations is off, 405 for GET",
    "test/observe/admin-security.test.ts > answers 403 naming admin.mutations to every non-GET on /faults, and leaves the reads open",
  ],
  "admin.readyClusters": ["test/behaviour/listener-reload.test.ts > answers 503 \"cluster X has no healthy endpoint\" while it has none, 200 once it has"],
  "admin.token": ["test/observe/admin-security.test.ts > answers 401 with WWW-Authenticate: Bearer without the token or with a wrong one, and accepts the right one"],
  "clusters": ["test/behaviour/fault-match-keys.test.ts > match.listener: a rule for listener b aborts b's calls; a's, to the same route and cluster, reach the upstream"],
  "clusters[].circuitBreaker.maxCalls": ["test/behaviour/retry-limits.test.ts > maxCalls: a call over the limit is answered 14 at once, decided_by overflow, naming the limit"],
  "clusters[].circuitBreaker.maxConnections": [
    "test/behaviour/cluster-breakers.test.ts > maxConnections: an endpoint that would need a session beyond the cluster's limit overflows; the other keeps serving",
  ],
  "clusters[].circuitBreaker.maxPendingCalls": ["test/behaviour/cluster-breakers.test.ts > maxPendingCalls: attempts waiting for a session past the limit end at once, 14, naming the limit"],
  "clusters[].circuitBreaker.maxRetries": ["test/behaviour/retry-limits.test.ts > maxRetries: a retry over the limit of concurrent retries ends the call 14 decided_by overflow"],
  "clusters[].connectTimeout": ["test/behaviour/early-aborts.test.ts > answers 14 UNAVAILABLE within a bounded time when the upstream accepts TCP but never speaks HTTP/2 (connectTimeout 200ms)"],
  "clusters[].connectionWindowSize": ["test/behaviour/cluster-keys.test.ts > advertises initialWindowSize in SETTINGS and grows the connection window to connectionWindowSize"],
  "clusters[].dns": ["test/behaviour/cluster-dns.test.ts > resolves the name into endpoints and follows records added and removed"],
  "clusters[].endpoints[].address": ["test/behaviour/cluster-balancing.test.ts > round_robin without weights: each endpoint every third call"],
  "clusters[].endpoints[].weight": ["test/behaviour/cluster-balancing.test.ts > round_robin with weights 1, 2, 3: exactly 10, 20, 30 of 60 sequential calls"],
  "clusters[].healthCheck.healthyThreshold": [
    "test/behaviour/cluster-health-keys.test.ts > unhealthyThreshold 5: the endpoint keeps its calls until it has answered NOT_SERVING 5 times; healthyThreshold 4: it gets calls again only after 4 SERVING answers",
  ],
  "clusters[].healthCheck.interval": ["test/behaviour/cluster-health.test.ts > an upstream whose health flips to NOT_SERVING gets no calls after the threshold, and calls again once healthy"],
  "clusters[].healthCheck.service": [
    "test/behaviour/cluster-keys.test.ts > service: test.Echo asks about test.Echo: the endpoint serving it gets every call, the one serving only the whole server none",
  ],
  "clusters[].healthCheck.timeout": [
    "test/behaviour/cluster-health-keys.test.ts > timeout 2s: the upstream sees its unanswered Check cancelled after 2 s (not the default 1 s, not never), and after 2 such the endpoint gets no calls",
  ],
  "clusters[].healthCheck.unhealthyThreshold": [
    "test/behaviour/cluster-health-keys.test.ts > unhealthyThreshold 5: the endpoint keeps its calls until it has answered NOT_SERVING 5 times; healthyThreshold 4: it gets calls again only after 4 SERVING answers",
  ],
  "clusters[].initialWindowSize": ["test/behaviour/cluster-keys.test.ts > advertises initialWindowSize in SETTINGS and grows the connection window to connectionWindowSize"],
  "clusters[].keepalive.interval": ["test/behaviour/cluster-breakers.test.ts > a peer that ACKs: PINGs keep coming every interval and the session stays"],
  "clusters[].keepalive.timeout": [
    "test/behaviour/cluster-breakers.test.ts > a peer that never ACKs PING: the session is dropped after interval + timeout, and the call on it sees the connection lost",
  ],
  "clusters[].lb": ["test/behaviour/cluster-balancing.test.ts > least_request avoids a slow upstream: it gets far fewer than a third of the calls"],
  "clusters[].maxConcurrentStreamsPerSession": [
    "test/behaviour/cluster-stream-limit.test.ts > 10 calls, limit 5, one session, 5 pending: the upstream never has more than 5, the other 5 wait in dojang and go in order",
  ],
  "clusters[].maxSessionsPerEndpoint": ["test/behaviour/cluster-stream-limit.test.ts > maxSessionsPerEndpoint 2: a second session opens, each carries at most 5, and the 11th and 12th wait"],
  "clusters[].outlierDetection.baseEjection": [
    "test/behaviour/cluster-health.test.ts > an upstream answering UNAVAILABLE is ejected after 3 in a row, returns after baseEjection, and is ejected for twice as long the second time",
  ],
  "clusters[].outlierDetection.consecutiveFailures": [
    "test/behaviour/cluster-health.test.ts > an upstream answering UNAVAILABLE is ejected after 3 in a row, returns after baseEjection, and is ejected for twice as long the second time",
  ],
  "clusters[].outlierDetection.maxEjection": [
    "test/behaviour/cluster-keys.test.ts > with baseEjection 30s and maxEjection 300ms an ejected endpoint is back in rotation (and ejected again) within seconds, twice",
  ],
  "clusters[].outlierDetection.maxEjectionPercent": [
    "test/behaviour/cluster-health.test.ts > maxEjectionPercent 67: with two of three failing, both are ejected and the healthy one takes every call (the default 50 would keep one in)",
  ],
  "clusters[].refreshInterval": ["test/behaviour/cluster-dns.test.ts > 300ms: the resolver is asked again every 300 ms (never sooner); 5s (the control, the default) not at all within 2.5 s"],
  "clusters[].retryBudget.minRetriesPerSecond": ["test/behaviour/retry-limits.test.ts > caps a storm: 60 failing calls make at most max(floor, percent × calls) retries"],
  "clusters[].retryBudget.percent": ["test/behaviour/retry-limits.test.ts > caps a storm: 60 failing calls make at most max(floor, percent × calls) retries"],
  "clusters[].tls.caFile": ["test/behaviour/tls-upstream.test.ts > connects over TLS (h2) and verifies the upstream against caFile, by serverName"],
  "clusters[].tls.certFile": ["test/behaviour/tls-upstream.test.ts > presents certFile/keyFile to an upstream that requires a client certificate (mTLS upstream)"],
  "clusters[].tls.keyFile": ["test/behaviour/tls-upstream.test.ts > presents certFile/keyFile to an upstream that requires a client certificate (mTLS upstream)"],
  "clusters[].tls.serverName": ["test/behaviour/tls-upstream.test.ts > verifies the name: serverName is the name checked, and without it the endpoint's address is (not in the certificate)"],
  "drainTimeout": ["test/process/shutdown.test.ts > cuts a call that outlives drainTimeout with UNAVAILABLE from dojang, and exits 0 soon after"],
  "failedCalls": ["test/behaviour/failed-calls.test.ts > failedCalls: 2 keeps the last two; a reload to 1 keeps the newest; a reload to 0 keeps none from then on"],
  "faultInjection.maxActiveFaults": ["test/behaviour/faults-controls.test.ts > maxActiveFaults caps the calls faulted at once, and /faults counts the overflow"],
  "faultInjection.seed": ["test/behaviour/faults-determinism.test.ts > follow the seed: another set seed draws another sequence, and a rule's own seed overrides the set's"],
  "journal": ["test/behaviour/journal.test.ts > journal: 3 keeps 3 of 5 calls"],
  "listeners": ["test/behaviour/fault-match-keys.test.ts > match.listener: a rule for listener b aborts b's calls; a's, to the same route and cluster, reach the upstream"],
  "listeners[].address": ["test/behaviour/auth-rbac.test.ts > by client address (CIDR), IPv4 and IPv6 loopback"],
  "listeners[].attemptsHeader": ["test/behaviour/retry-status.test.ts > retries UNAVAILABLE sent as headers then trailers (no message) to success, with grpc-previous-rpc-attempts on attempts 2 and 3"],
  "listeners[].connect": ["test/behaviour/connect.test.ts > unary, binary (application/proto): the access record says connect"],
  "listeners[].connectionWindowSize": [
    "test/behaviour/listener-keys.test.ts > a client connection gets SETTINGS_INITIAL_WINDOW_SIZE = initialWindowSize and a connection window of connectionWindowSize",
  ],
  "listeners[].cors.allowOrigins": ["test/behaviour/grpc-web-framing.test.ts > answers a CORS preflight for an allowed origin (exact and wildcard) and none for a refused one"],
  "listeners[].faultHeaders": ["test/behaviour/faults-controls.test.ts > x-dojang-fault injects any kind when faultHeaders is on"],
  "listeners[].faultTrailer": ["test/behaviour/faults-controls.test.ts > faultTrailer names the rule in x-dojang-fault: in Trailers-Only headers and in forwarded trailers"],
  "listeners[].grpcWeb": [
    "test/behaviour/grpc-web-framing.test.ts > forwards a unary call: HTTP 200, the gRPC-Web content type, metadata in the head, the message, then the trailer frame with grpc-status 0",
  ],
  "listeners[].healthService": [
    "test/behaviour/health-service.test.ts > answers Check \"\" with SERVING while every cluster of the listener has a healthy endpoint, NOT_SERVING when one has none, and SERVING again",
  ],
  "listeners[].http1Address": [
    "test/behaviour/tls-http1.test.ts > TLS without client certificates: http1Address is HTTPS/1.1 (plain text refused); an h2c listener's http1Address stays plain HTTP/1.1",
  ],
  "listeners[].idleTimeout": ["test/behaviour/listener-connections.test.ts > closes an idle connection, but not one with a call open for longer than the timeout"],
  "listeners[].initialWindowSize": ["test/behaviour/listener-keys.test.ts > a client connection gets SETTINGS_INITIAL_WINDOW_SIZE = initialWindowSize and a connection window of connectionWindowSize"],
  "listeners[].jsonTranscoding.descriptorSet": [
    "test/behaviour/json-transcoding.test.ts > GET with path variables (a multi-segment one) and query parameters, over HTTP/1.1 and HTTP/2; metadata goes upstream",
  ],
  "listeners[].jsonTranscoding.emitDefaults": ["test/behaviour/json-transcoding.test.ts > emitDefaults: fields at their defaults are printed"],
  "listeners[].jsonTranscoding.ignoreUnknownFields": ["test/behaviour/json-transcoding.test.ts > ignoreUnknownFields: unknown JSON fields and query parameters are dropped"],
  "listeners[].jsonTranscoding.maxBodyBytes": ["test/behaviour/json-transcoding.test.ts > maxBodyBytes: a larger body is 413 and makes no call"],
  "listeners[].jsonTranscoding.streamFormat": [
    "test/behaviour/json-transcoding.test.ts > server streaming as NDJSON (streamFormat: ndjson): a line a message, {error} as the last line after a failure",
  ],
  "listeners[].jsonTranscoding.unknownPaths": [
    "test/behaviour/json-transcoding.test.ts > unknownPaths: notFound answers 404 with a Status; passthrough hands the request on as if transcoding were off",
  ],
  "listeners[].maxConcurrentStreams": [
    "test/behaviour/hostile-streams.test.ts > refuses only the streams over the limit (REFUSED_STREAM) %s; the accepted calls complete on the same connection and the bystander's 200 calls succeed",
  ],
  "listeners[].maxConnectionAge": ["test/behaviour/listener-connections.test.ts > sends GOAWAY once the connection is maxConnectionAge old; a call in flight on it completes within the grace"],
  "listeners[].maxConnectionAgeGrace": ["test/behaviour/listener-connections.test.ts > ends what still runs after the grace with 14 UNAVAILABLE (decided_by shutdown) and closes the connection"],
  "listeners[].maxConnections": ["test/behaviour/attack-slowloris.test.ts > connections over the listener's maxConnections are closed as they are accepted; the first ones stay open"],
  "listeners[].maxHeaderListPairs": ["test/behaviour/listener-keys.test.ts > with maxHeaderListPairs 40, a call with 60 metadata entries is refused (8) before the upstream; one with 10 passes"],
  "listeners[].maxHeaderListSize": [
    "test/behaviour/listener-keys.test.ts > is advertised as SETTINGS_MAX_HEADER_LIST_SIZE, and a call whose metadata is over it is refused before the upstream; a smaller one passes",
  ],
  "listeners[].maxSessionMemoryMiB": [
    "test/behaviour/listener-keys.test.ts > with maxSessionMemoryMiB 1 a connection holding ~2 MiB of queued response gets its new streams refused (ENHANCE_YOUR_CALM, no upstream call); another connection is unaffected",
  ],
  "listeners[].requestHeadersTimeout": [
    "test/behaviour/attack-http1.test.ts > 200 connections that send part of their request headers are closed after requestHeadersTimeout 1s; a gRPC-Web call meanwhile succeeds",
    "test/behaviour/tls-listener.test.ts > bounds the handshake by requestHeadersTimeout: a client that connects to either TLS socket and sends nothing is closed after it, not node's 120 s",
  ],
  "listeners[].routes[].cluster": ["test/behaviour/config-snapshot.test.ts > sends calls that start after a swap to the new snapshot's cluster"],
  "listeners[].routes[].extAuthz.address": [
    "test/behaviour/auth-ext-authz.test.ts > allowed: the call goes on with the headers the service added; denied: its status, message and headers, decided_by ext_authz, not sent",
  ],
  "listeners[].routes[].extAuthz.cluster": [
    "test/behaviour/side-calls-cluster.test.ts > extAuthz.cluster over mTLS to Istio's ext_authz: 20 calls at once, each allowed or denied by its own header, the allowed ones with the headers the service added",
  ],
  "listeners[].routes[].extAuthz.failOpen": [
    "test/behaviour/auth-ext-authz.test.ts > a check that fails (nothing listening) or times out (silent peer) denies with 7, or lets the call through with failOpen",
  ],
  "listeners[].routes[].extAuthz.includePeerCertificate": [
    "test/behaviour/auth-ext-authz.test.ts > the client certificate's identity goes as the source principal (and the certificate with includePeerCertificate)",
  ],
  "listeners[].routes[].extAuthz.timeout": [
    "test/behaviour/auth-ext-authz.test.ts > a check that fails (nothing listening) or times out (silent peer) denies with 7, or lets the call through with failOpen",
  ],
  "listeners[].routes[].headers.request.add": [
    "test/behaviour/header-rules.test.ts > adds and removes request headers, rewrites :authority and the matched service prefix; adds and removes response headers",
  ],
  "listeners[].routes[].headers.request.remove": [
    "test/behaviour/header-rules.test.ts > adds and removes request headers, rewrites :authority and the matched service prefix; adds and removes response headers",
  ],
  "listeners[].routes[].headers.response.add": [
    "test/behaviour/header-rules.test.ts > adds and removes request headers, rewrites :authority and the matched service prefix; adds and removes response headers",
  ],
  "listeners[].routes[].headers.response.remove": [
    "test/behaviour/header-rules.test.ts > adds and removes request headers, rewrites :authority and the matched service prefix; adds and removes response headers",
  ],
  "listeners[].routes[].jwt.algorithms": ["test/behaviour/auth-jwt.test.ts > algorithms: a key the JWKS publishes signs a token the route refuses when its algorithm is not listed"],
  "listeners[].routes[].jwt.audiences": ["test/behaviour/auth-jwt.test.ts > each bad token ends 16 UNAUTHENTICATED (decided_by jwt) before the upstream, counted, with no token in the logs"],
  "listeners[].routes[].jwt.claimsHeader": ["test/behaviour/auth-jwt.test.ts > RS256, ES256 and EdDSA tokens pass; the upstream gets the claims header and no authorization header"],
  "listeners[].routes[].jwt.clockSkew": ["test/behaviour/auth-jwt.test.ts > clockSkew: a token expired 10 s ago passes with 30s of skew; one expired 45 s ago does not (the default 60s would pass it)"],
  "listeners[].routes[].jwt.forwardToken": ["test/behaviour/auth-jwt.test.ts > verifies against the file's keys"],
  "listeners[].routes[].jwt.issuer": ["test/behaviour/auth-jwt.test.ts > each bad token ends 16 UNAUTHENTICATED (decided_by jwt) before the upstream, counted, with no token in the logs"],
  "listeners[].routes[].jwt.jwks.caFile": ["test/behaviour/auth-jwt.test.ts > RS256, ES256 and EdDSA tokens pass; the upstream gets the claims header and no authorization header"],
  "listeners[].routes[].jwt.jwks.file": ["test/behaviour/auth-jwt.test.ts > verifies against the file's keys"],
  "listeners[].routes[].jwt.jwks.refreshInterval": ["test/behaviour/auth-jwt.test.ts > with the server down, the last keys serve through staleWhileError, then calls fail 16 until it is back"],
  "listeners[].routes[].jwt.jwks.staleWhileError": ["test/behaviour/auth-jwt.test.ts > with the server down, the last keys serve through staleWhileError, then calls fail 16 until it is back"],
  "listeners[].routes[].jwt.jwks.timeout": [
    "test/behaviour/auth-jwt.test.ts > a JWKS server that never answers is given up after the timeout (the server sees the connection closed), and a call waiting for the keys ends 16 then",
  ],
  "listeners[].routes[].jwt.jwks.url": ["test/behaviour/auth-jwt.test.ts > a token with a new kid fetches the keys again at once and passes"],
  "listeners[].routes[].match.authority": ["test/behaviour/listener-keys.test.ts > calls to api.example.com (any port, any case) take the authority route; others fall through to the next"],
  "listeners[].routes[].match.path": [
    "test/behaviour/early-aborts.test.ts > answers 12 UNIMPLEMENTED as Trailers-Only to a call no route matches, and a routed call on the same connection goes through",
  ],
  "listeners[].routes[].match.prefix": ["test/behaviour/fault-match-keys.test.ts > match.route: a rule for route prefix:/ (by its label, and by its index 1) leaves the service route's calls alone"],
  "listeners[].routes[].match.service": ["test/behaviour/fault-match-keys.test.ts > match.route: a rule for route prefix:/ (by its label, and by its index 1) leaves the service route's calls alone"],
  "listeners[].routes[].maxRequestMessageBytes": [
    "test/behaviour/message-size-limit.test.ts > refuses a request message one byte over the limit with grpc-go's message, and the upstream handler never runs",
  ],
  "listeners[].routes[].maxResponseMessageBytes": ["test/behaviour/message-size-limit.test.ts > answers 8 for a 1025-byte response message and resets the upstream with RST_STREAM CANCEL"],
  "listeners[].routes[].rateLimit.burst": [
    "test/behaviour/rate-limit.test.ts > key route: the burst passes, the rest end 8 RESOURCE_EXHAUSTED (decided_by rate_limited) without reaching the upstream; a token comes back after 1/callsPerSecond",
  ],
  "listeners[].routes[].rateLimit.callsPerSecond": [
    "test/behaviour/rate-limit.test.ts > key route: the burst passes, the rest end 8 RESOURCE_EXHAUSTED (decided_by rate_limited) without reaching the upstream; a token comes back after 1/callsPerSecond",
  ],
  "listeners[].routes[].rateLimit.global.cluster": [
    "test/behaviour/side-calls-cluster.test.ts > rateLimit.global.cluster over mTLS to envoyproxy/ratelimit: 20 calls at once on one TLS session, exactly the limit (5) admitted, the rest refused by the service",
    "test/behaviour/side-calls-cluster.test.ts > healthCheck: an endpoint that fails its checks gets no side call; without checks, round robin sends it every other one",
  ],
  "listeners[].routes[].rateLimit.global.descriptors[][].from": [
    "test/behaviour/rate-limit-global.test.ts > descriptors from a literal, a header, the client address, the gRPC service and method reach the service whole",
  ],
  "listeners[].routes[].rateLimit.global.descriptors[][].key": [
    "test/behaviour/rate-limit-global.test.ts > descriptors from a literal, a header, the client address, the gRPC service and method reach the service whole",
  ],
  "listeners[].routes[].rateLimit.global.descriptors[][].value": [
    "test/behaviour/rate-limit-global.test.ts > descriptors from a literal, a header, the client address, the gRPC service and method reach the service whole",
  ],
  "listeners[].routes[].rateLimit.global.domain": [
    "test/behaviour/rate-limit-global.test.ts > two dojang processes share one limit: together they admit exactly the limit (within the fail-open count); the rest end 8 rate_limited_global with x-ratelimit-* headers",
  ],
  "listeners[].routes[].rateLimit.global.failureModeDeny": [
    "test/behaviour/rate-limit-global.test.ts > failureModeDeny: a service that cannot be reached refuses the call with 14, decided_by rate_limit_service_failed",
  ],
  "listeners[].routes[].rateLimit.global.service": [
    "test/behaviour/rate-limit-global.test.ts > two dojang processes share one limit: together they admit exactly the limit (within the fail-open count); the rest end 8 rate_limited_global with x-ratelimit-* headers",
  ],
  "listeners[].routes[].rateLimit.global.timeout": [
    "test/behaviour/rate-limit-global.test.ts > a service that stops answering holds a call no longer than the timeout; the call is admitted and the timeout counted",
  ],
  "listeners[].routes[].rateLimit.key": ["test/behaviour/rate-limit.test.ts > key metadata:<name>: one bucket per value, calls without the header share one"],
  "listeners[].routes[].rateLimit.responseHeaders": ["test/behaviour/rate-limit.test.ts > responseHeaders: false leaves them all out"],
  "listeners[].routes[].rbac.default": ["test/behaviour/auth-ext-authz.test.ts > a refusal at one stage asks none after it (no check, no token spent)"],
  "listeners[].routes[].rbac.rules[].action": [
    "test/behaviour/auth-rbac.test.ts > by method and by client certificate SAN (URI prefix, DNS exact); no rule → default deny: 7, decided_by rbac, not sent",
  ],
  "listeners[].routes[].rbac.rules[].claims": ["test/behaviour/auth-rbac.test.ts > by JWT claims, after the token is verified"],
  "listeners[].routes[].rbac.rules[].clientAddresses": ["test/behaviour/auth-rbac.test.ts > by client address (CIDR), IPv4 and IPv6 loopback"],
  "listeners[].routes[].rbac.rules[].identities": [
    "test/behaviour/auth-rbac.test.ts > by method and by client certificate SAN (URI prefix, DNS exact); no rule → default deny: 7, decided_by rbac, not sent",
  ],
  "listeners[].routes[].rbac.rules[].methods": [
    "test/behaviour/auth-rbac.test.ts > by method and by client certificate SAN (URI prefix, DNS exact); no rule → default deny: 7, decided_by rbac, not sent",
  ],
  "listeners[].routes[].rbac.rules[].name": ["test/behaviour/auth-rbac.test.ts > by method and by client certificate SAN (URI prefix, DNS exact); no rule → default deny: 7, decided_by rbac, not sent"],
  "listeners[].routes[].rbac.shadow": ["test/behaviour/auth-rbac.test.ts > shadow: true lets every call through and only counts and logs what it would deny"],
  "listeners[].routes[].retry.backoff.base": ["test/behaviour/retry-backoff.test.ts > base sets the scale: base 2s, 10 calls × 1 retry each wait random(0, 2 s) before it"],
  "listeners[].routes[].retry.backoff.max": [
    "test/behaviour/retry-backoff.test.ts > max caps the doubling: base 1s, max 1500ms, 4 calls × 4 retries all follow within 1.5 s (and a loaded machine's lateness)",
  ],
  "listeners[].routes[].retry.bufferBytes": ["test/behaviour/retry-status.test.ts > commits when the request overflows bufferBytes: the next UNAVAILABLE is not retried"],
  "listeners[].routes[].retry.maxAttempts": ["test/behaviour/retry-status.test.ts > stops at maxAttempts and forwards the last attempt's own status"],
  "listeners[].routes[].retry.perTryTimeout": ["test/behaviour/retry-status.test.ts > cancels an attempt that outlives perTryTimeout and retries it"],
  "listeners[].routes[].retry.retryOn": [
    "test/behaviour/retry-status.test.ts > retries a status retryOn names that the default does not (RESOURCE_EXHAUSTED) to success",
    "test/behaviour/retry-status.test.ts > makes exactly one attempt for a status not in retryOn, and forwards headers and trailers as the upstream sent them",
  ],
  "listeners[].routes[].retry.retryResetAfterRequest": ["test/behaviour/retry-transparent.test.ts > is retried with retryResetAfterRequest: true"],
  "listeners[].routes[].rewriteAuthority": [
    "test/behaviour/header-rules.test.ts > adds and removes request headers, rewrites :authority and the matched service prefix; adds and removes response headers",
  ],
  "listeners[].routes[].rewritePrefix": [
    "test/behaviour/header-rules.test.ts > adds and removes request headers, rewrites :authority and the matched service prefix; adds and removes response headers",
  ],
  "listeners[].routes[].streamIdleTimeout": ["test/behaviour/stream-idle.test.ts > takes the route's streamIdleTimeout over the listener's, and 0 turns it off"],
  "listeners[].routes[].timeout": ["test/behaviour/deadline-budget.test.ts > caps the budget at the route timeout: client 10S, route 2s gives the upstream at most 2 s"],
  "listeners[].streamIdleTimeout": [
    "test/behaviour/stream-idle.test.ts > ends a call whose client sent headers only (no deadline) and whose upstream never answers, with 14 stream_idle, and costs the bystander nothing",
  ],
  "listeners[].tls.caFile": ["test/behaviour/tls-listener.test.ts > passes the verified identity upstream in x-forwarded-client-cert (Envoy's format) and strips a client's own"],
  "listeners[].tls.certFile": ["test/behaviour/tls-listener.test.ts > carries a grpc-js call with TLS credentials to a plaintext upstream (ALPN h2)"],
  "listeners[].tls.certificates[].certFile": ["test/behaviour/tls-listener.test.ts > chooses the certificate by SNI: exact names, one-label wildcards, else the default"],
  "listeners[].tls.certificates[].keyFile": ["test/behaviour/tls-listener.test.ts > chooses the certificate by SNI: exact names, one-label wildcards, else the default"],
  "listeners[].tls.certificates[].serverNames": ["test/behaviour/tls-listener.test.ts > chooses the certificate by SNI: exact names, one-label wildcards, else the default"],
  "listeners[].tls.keyFile": ["test/behaviour/tls-listener.test.ts > carries a grpc-js call with TLS credentials to a plaintext upstream (ALPN h2)"],
  "listeners[].tls.requireClientCert": ["test/behaviour/tls-listener.test.ts > refuses the handshake of a client without a certificate, or with one the CA did not sign"],
  "logLevel": ["test/process/reload.test.ts > logs what applied and what needs a restart, each key by its path; logLevel applies (to the access log too)"],
  "memory.limit": ["test/process/memory-limit.test.ts > 128MiB in the config: node runs with the derived V8 sizes, /config and the start-up line say so"],
  "stats.maxRows": ["test/behaviour/stats.test.ts > stats.maxRows: 2 keeps two method rows; the others count in one row named other, and GET /stats says how many were folded"],
  "shrinkHeapWhenIdle": ["test/process/heap-shrink.test.ts > gives the young generation back after the calls stop"],
  "tracing.endpoint": ["test/behaviour/tracing.test.ts > client span → dojang's SERVER span → one CLIENT span per attempt (a retry's two are siblings) → the upstream's span under each"],
  "tracing.exportInterval": ["test/behaviour/tracing-export.test.ts > 200ms: a call's two spans reach the backend within the interval; 3s (the control): not before 3 s"],
  "tracing.exportTimeout": [
    "test/behaviour/tracing-export.test.ts > 400ms: the collector that never answers sees the connection closed after it, and the call's 2 spans count as export_failed; 10s (the control) still holds its export",
  ],
  "tracing.maxQueueSize": ["test/behaviour/tracing.test.ts > collector slow (accepts, never answers): calls go on at full speed; the bounded queue drops and counts (queue_full)"],
  "tracing.protocol": ["test/behaviour/tracing.test.ts > %s: every export goes as %s, and the backend decodes the call's two spans with their attributes"],
  "tracing.sampleRatio": ["test/behaviour/tracing.test.ts > sampleRatio 0: a new trace is not sampled, the decision goes upstream (flags 00), and nothing is exported"],
  "tracing.serviceName": ["test/behaviour/tracing.test.ts > client span → dojang's SERVER span → one CLIENT span per attempt (a retry's two are siblings) → the upstream's span under each"],
  "watchConfig": [
    "test/process/reload.test.ts > changes route and cluster three times while calls run continuously: none fails, new calls reach the new upstream, a long call finishes on the old cluster",
  ],
  "workers": ["test/process/workers.test.ts > serves calls, sums the workers' metrics on the primary's admin, and drains every worker on SIGTERM with exit 0"],
  "xds.bootstrap": ["test/xds/xds.test.ts > serves a listener, route, cluster and endpoints from the control plane, beside the static ones; /config and /clusters show them with versions"],
};

/**
 * Keys whose effect no outside observer can judge, each with the reason. Keep it short: a key
 * here is one no test can show doing anything.
 */
export const UNJUDGED: Readonly<Record<string, string>> = {
  concurrentMarking:
    "V8's concurrent marking has no outside witness: node's --trace-concurrent-marking and --trace-gc-nvp " +
    "report the same marking tasks (parallel marking in the pause shares them) with the key on or off, " +
    "and even with node started with --no-concurrent-marking; only dojang's own dojang_gc_concurrent_marking " +
    "says which way it set V8 (test/process/heap-shrink.test.ts)",
};
