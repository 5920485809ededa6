package overflow

import (
	"io/fs"
	"regexp"
	"testing"

	wasmjs "github.com/lease-fence/lease-fence/wasm/js"
)

// TestJavaScriptAgrees: the service client's and the console's reader of
// Server-Sent Events (wasm/js/service/sse.mjs, as the coordinator embeds
// it) names the overflow event as Event does.
func TestJavaScriptAgrees(t *testing.T) {
	src, err := fs.ReadFile(wasmjs.Console, "service/sse.mjs")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^export const OVERFLOW = '([^'\\]*)';$`).FindSubmatch(src)
	if m == nil {
		t.Fatal(`wasm/js/service/sse.mjs has no line "export const OVERFLOW = '...';"`)
	}
	if got := string(m[1]); got != Event {
		t.Fatalf("wasm/js/service/sse.mjs: OVERFLOW is %q, Go's Event %q", got, Event)
	}
}
