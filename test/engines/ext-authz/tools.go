//go:build tools

// Package tools pins Istio's sample ext_authz server (samples/extauthz/cmd/extauthz), which
// scripts/engines.mjs builds as .engines/bin/ext-authz (engine.json). Test-only: dojang's
// ext_authz filter is tested against it (envoy.service.auth.v3.Authorization/Check over gRPC).
// The server has no TLS listener; tlsfront/ (.engines/bin/tls-front) puts Go's crypto/tls in
// front of it for the tests of ext_authz over TLS.
package tools

import _ "istio.io/istio/samples/extauthz/cmd/extauthz"
