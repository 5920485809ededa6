// Package js holds the modules of the npm package (wasm/js) that a Go
// binary serves as they ship.
package js

import "embed"

// Console holds what cmd/coordinator -ui serves beside web.Console, each
// at its base name under /ui/: the service client's reader of Server-Sent
// Events, which the console's page reads its streams with.
//
//go:embed service/sse.mjs
var Console embed.FS
