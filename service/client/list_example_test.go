//go:build !js

package client_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/lease-fence/lease-fence/service/client"
	"github.com/lease-fence/lease-fence/service/wire"
)

// The examples of list and watch; the blocks between "doc:start NAME" and
// "doc:end" are shown, as they are, in docs/service.md
// (TestDocShowsTheListExamples).

// List every live lease under a prefix, page by page.
func ExampleClient_List() {
	holder, stop := coordinator()
	defer stop()
	c := holder("agent-a")
	ctx := context.Background()
	for _, r := range []string{"jobs/b", "jobs/a", "other"} {
		if _, err := c.Acquire(ctx, r); err != nil {
			log.Fatal(err)
		}
	}

	// doc:start list
	for l, err := range c.List(ctx, client.ListOptions{Prefix: "jobs/", Waiters: true}) {
		if err != nil {
			log.Fatal(err) // a Worker answers not_supported
		}
		fmt.Println(l.Resource, l.HolderID, l.Fence, l.Waiters)
	}
	// doc:end
	fmt.Println("listed")
	// Output:
	// jobs/a agent-a 2 0
	// jobs/b agent-a 1 0
	// listed
}

// Watch the events under a prefix; a hello means "reload your picture".
func ExampleClient_Watch() {
	holder, stop := coordinator()
	defer stop()
	c, other := holder("watcher"), holder("agent-b")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	go func() {
		<-started
		l, _ := other.Acquire(ctx, "jobs/x")
		_ = other.Release(ctx, l)
	}()

	// doc:start watch
	for ev, err := range c.Watch(ctx, client.WatchOptions{Prefix: "jobs/"}) {
		if err != nil {
			log.Fatal(err)
		}
		if ev.Type == wire.EventHello {
			// (Re)load the leases with List: events before this may be
			// missing. After a disconnect, Watch resumes without one.
			close(started)
			continue
		}
		fmt.Println(ev.Seq, ev.Type, ev.Resource, ev.HolderID, ev.Fence)
		if ev.Type == wire.EventReleased {
			break
		}
	}
	// doc:end
	fmt.Println("watched")
	// Output:
	// 1 granted jobs/x agent-b 1
	// 2 released jobs/x agent-b 1
	// watched
}

// docs/service.md shows the blocks of the list and watch examples as they
// are here.
func TestDocShowsTheListExamples(t *testing.T) {
	src, err := os.ReadFile("list_example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/service.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile(`(?ms)^(\t*)// doc:start (\S+)\n(.*?)^\t*// doc:end\n`).FindAllStringSubmatch(string(src), -1)
	if len(blocks) != 2 {
		t.Fatalf("found %d blocks, want list and watch", len(blocks))
	}
	for _, b := range blocks {
		indent, name, body := b[1], b[2], b[3]
		lines := strings.Split(strings.TrimRight(body, "\n"), "\n")
		for i, l := range lines {
			lines[i] = strings.TrimPrefix(l, indent)
		}
		want := "```go\n" + strings.Join(lines, "\n") + "\n```"
		if !strings.Contains(string(doc), want) {
			t.Errorf("docs/service.md does not show block %s of list_example_test.go as it is:\n%s", name, want)
		}
	}
}
