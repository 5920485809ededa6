//go:build linux

package main

import (
	"encoding/json"
	"os"
	"syscall"
	"testing"
)

// nextLeader reads a leader line of elect --json.
func (c *cli) nextLeader() leaderJSON {
	c.t.Helper()
	l := c.next()
	var ld leaderJSON
	if err := json.Unmarshal([]byte(l), &ld); err != nil || ld.HolderID == "" {
		c.t.Fatalf("not a leader line: %q", l)
	}
	return ld
}

// elect runs its command while leader, with the lease in its environment;
// a campaigner prints each leader and leads once the command exits; an
// observer sees them all; SIGTERM makes the campaigner resign, exit 0.
func TestElect(t *testing.T) {
	t.Parallel()
	url := coordinator(t)
	obs := startCLI(t, url, "elect", "--observe", "--json", "web/leader")
	people := startCLI(t, url, "elect", "--observe", "web/leader")
	a := startCLI(t, url, "elect", "--holder", "web-1", "--value", "10.0.0.1:80", "web/leader", "--", os.Args[0])
	r := a.report()
	if r.Resource != "web/leader" || r.Holder != "web-1" || r.Fence == "" || r.Header == "" {
		t.Fatalf("the command's environment: %+v", r)
	}
	first := leaderJSON{HolderID: "web-1", Fence: 1, Value: "10.0.0.1:80"}
	if got := obs.nextLeader(); got != first {
		t.Fatalf("the observer printed %+v, want %+v", got, first)
	}
	if l := people.next(); l != `fence 1  holder web-1  value "10.0.0.1:80"` {
		t.Fatalf("elect --observe printed %q", l)
	}
	b := startCLI(t, url, "elect", "--holder", "web-2", "--value", "10.0.0.2:80", "--json", "web/leader")
	if got := b.nextLeader(); got != first {
		t.Fatalf("the campaigner printed %+v, want %+v", got, first)
	}
	a.tell("exit 0")
	if code := a.exit(); code != 0 {
		t.Fatalf("the leader's elect exited %d; stderr:\n%s", code, a.stderr.String())
	}
	second := leaderJSON{HolderID: "web-2", Fence: 2, Value: "10.0.0.2:80"}
	if got := b.nextLeader(); got != second {
		t.Fatalf("the campaigner printed %+v, want %+v", got, second)
	}
	if got := obs.nextLeader(); got != second {
		t.Fatalf("the observer printed %+v, want %+v", got, second)
	}
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := b.exit(); code != 0 {
		t.Fatalf("the campaigner exited %d after SIGTERM; stderr:\n%s", code, b.stderr.String())
	}
	if st := inspectJSONOf(t, url, "web/leader"); st.Held {
		t.Fatalf("after the resignation: %+v", st)
	}
	if err := obs.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := obs.exit(); code != 0 {
		t.Fatalf("the observer exited %d after SIGINT; stderr:\n%s", code, obs.stderr.String())
	}
}
