//go:build tools

// Package tools pins envoyproxy/ratelimit, the reference Envoy RateLimitService, which
// scripts/engines.mjs builds into .engines/bin/ratelimit (engine.json) for the global rate-limit tests.
package tools

import _ "github.com/envoyproxy/ratelimit/src/service_cmd"
