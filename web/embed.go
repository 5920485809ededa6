// Package web holds the browser pages: the playground (served from disk by
// cmd/devserver) and the console, which cmd/coordinator -ui serves from the
// copy embedded here.
package web

import "embed"

// Console holds the console's files, served by the coordinator at /ui/:
// its page, script and style, and the playground's drawing (view.js) with
// what it imports and its style sheet, so that both pages draw a lease the
// same way.
//
//go:embed console.html console.css console.js console-state.js view.js model.js words.js style.css
var Console embed.FS

// ConsolePage is the file of Console served at /ui/.
const ConsolePage = "console.html"
