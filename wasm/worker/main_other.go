//go:build !(js && wasm)

// Command worker is the lease coordinator as a Cloudflare Worker. It only
// does something when built with GOOS=js GOARCH=wasm; see main_js.go and
// docs/service.md. For a native server use cmd/coordinator.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "worker: build with GOOS=js GOARCH=wasm and run under wrangler (make worker-dev); for a native server use cmd/coordinator")
	os.Exit(2)
}
