//go:build tools

// The conformance suite's runner and reference server, built by scripts/engines.mjs (engine.json).
package tools

import (
	_ "connectrpc.com/conformance/cmd/connectconformance"
	_ "connectrpc.com/conformance/cmd/referenceserver"
)
