//go:build !js

package httpfence_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/gates/httpfence"
	"github.com/lease-fence/lease-fence/gates/sqlfence"
	"github.com/lease-fence/lease-fence/test/rig/docsession"
)

// Two agents write to a deploy API through the gate. agent-a's lease ran out
// and agent-b got fence 8; agent-a, stalled, still holds fence 7. agent-b's
// write reaches the API; agent-a's is refused and never does. docs/fencing.md
// shows this example; TestDocShowsTheExample keeps the two the same.
func Example() {
	// doc:start
	// The API the agents write to: here, one that prints what it receives.
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Printf("api: %s %s %q\n", r.Method, r.URL.Path, body)
	}))
	defer api.Close()

	// The gate in front of it, with its floors in SQLite (what fence-proxy runs).
	dir, _ := os.MkdirTemp("", "fence-example")
	defer os.RemoveAll(dir)
	db, _ := sql.Open("sqlite", "file:"+filepath.Join(dir, "proxy.db")+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate")
	defer db.Close()
	store, _ := sqlfence.Open(context.Background(), db, sqlfence.Options{Dialect: sqlfence.SQLite})
	upstream, _ := url.Parse(api.URL)
	proxy, _ := httpfence.New(httpfence.Options{Upstream: upstream, Store: store})
	gate := httptest.NewServer(proxy)
	defer gate.Close()

	// Each agent's client adds the Lease-Fence header to its writes. An agent
	// passes its lease (a *lease.Lease is a TokenSource); fixed tokens here.
	agent := func(holder string, f uint64) *http.Client {
		tok := fence.Token{Resource: "deploy-slot", HolderID: holder, Fence: f}
		return &http.Client{Transport: &httpfence.Transport{Source: httpfence.TokenFunc(func() fence.Token { return tok })}}
	}
	agentA, agentB := agent("agent-a", 7), agent("agent-b", 8)

	resp, _ := agentB.Post(gate.URL+"/deploy", "text/plain", strings.NewReader("release 42"))
	resp.Body.Close()
	fmt.Println("agent-b:", resp.Status, "floor", resp.Header.Get("Lease-Fence-Floor"))

	resp, _ = agentA.Post(gate.URL+"/deploy", "text/plain", strings.NewReader("release 41"))
	if stale := httpfence.StaleFence(resp); stale != nil {
		fmt.Println("agent-a:", resp.Status, stale.Rejection)
	}
	resp.Body.Close()
	// doc:end
	// Output:
	// api: POST /deploy "release 42"
	// agent-b: 200 OK floor 8
	// agent-a: 409 Conflict {1 deploy-slot agent-a 7 agent-b 8}
}

// docs/fencing.md shows the example's body as it is here.
func TestDocShowsTheExample(t *testing.T) {
	if names := docsession.GoBlocks(t, "example_test.go", "../../docs/fencing.md"); len(names) != 1 {
		t.Fatalf("example_test.go has %d doc blocks, want 1", len(names))
	}
}
