//go:build !js

package redisfence_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/gates/redisfence"
	"github.com/lease-fence/lease-fence/test/rig/docsession"
)

// A newer holder's write lands; the stalled holder's is refused by Redis and
// logged, whatever process it runs in.
func ExampleStore_Commit() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()

	// doc:start
	store, _ := redisfence.Open(rdb, redisfence.Options{})
	key := redisfence.Key("deploy-slot", "config") // "{deploy-slot}:config", in the resource's hash slot
	write := func(version string) redisfence.Write {
		return redisfence.Write{Keys: []string{key}, Commands: [][]string{{"HSET", key, "version", version}}}
	}
	fresh := fence.Token{Resource: "deploy-slot", HolderID: "agent-b", Fence: 2}
	stale := fence.Token{Resource: "deploy-slot", HolderID: "agent-a", Fence: 1}
	fmt.Println(store.Commit(ctx, fresh, write("from b")))
	err := store.Commit(ctx, stale, write("from a"))
	var se *fence.StaleFenceError
	fmt.Println(errors.As(err, &se), se.AdmittedHolderID, rdb.HGet(ctx, key, "version").Val())
	// doc:end

	rejections, _ := store.Rejections(ctx, "deploy-slot")
	fmt.Printf("%+v\n", rejections)
	// Output:
	// <nil>
	// true agent-b from b
	// [{Seq:1 Resource:deploy-slot RefusedHolderID:agent-a RefusedFence:1 AdmittedHolderID:agent-b AdmittedFence:2}]
}

// docs/fencing.md shows the example's body as it is here.
func TestDocShowsTheExample(t *testing.T) {
	if names := docsession.GoBlocks(t, "example_test.go", "../../docs/fencing.md"); len(names) != 1 {
		t.Fatalf("example_test.go has %d doc blocks, want 1", len(names))
	}
}
