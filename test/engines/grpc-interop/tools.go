//go:build tools

// grpc-go's own interop client, built by scripts/engines.mjs (engine.json); kept here so go.sum
// pins what it needs.
package main

import _ "google.golang.org/grpc/interop/client"
