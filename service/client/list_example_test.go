//go:build !js

package client_test

import (
	"context"
	"fmt"
	"log"

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
