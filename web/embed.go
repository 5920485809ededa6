// Package web holds the browser pages: the playground (served from disk by
// cmd/devserver) and the console, which cmd/coordinator -ui serves from the
// copy embedded here.
package web

import "embed"

// Console holds the console's files, served by the coordinator at /ui/:
// its page, script and style, its lane (lease-row.js) drawn with the
// playground's primitives (svg.js) and style sheet, so that both pages draw
// a lease the same way.
//
//go:embed console.html console.css console.js console-state.js lease-row.js svg.js style.css
var Console embed.FS

// ConsolePage is the file of Console served at /ui/.
const ConsolePage = "console.html"
