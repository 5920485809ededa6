//go:build !js && !wasip1

package pgstore_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lease-fence/lease-fence/service/pgstore"
	"github.com/lease-fence/lease-fence/service/wire"
)

// TestListPagesOnPostgres: 600 leases listed in pages of 20 while
// leases are released and granted between pages, on two replicas: every
// lease live throughout is listed exactly once, in byte order (whatever
// the database's collation: "B" < "a" < "é"), only under the prefix, and
// expired ones are not listed.
func TestListPagesOnPostgres(t *testing.T) {
	const n, limit = 600, 20
	g := newRig(t, 2, pgstore.Options{})
	ctx := context.Background()
	names := []string{}
	for i := range n {
		names = append(names, "job/"+[]string{"B", "a", "é", "z"}[i%4]+strconv.Itoa(i))
	}
	fences := map[string]uint64{}
	for i, r := range names {
		fences[r], _ = g.grant(i%2, acquireMsg("q-"+r, r, "h"))
	}
	g.grant(0, acquireMsg("q-o", "jobs", "h")) // not under "job/"
	g.grant(0, acquireMsg("q-k", "joa", "h"))
	throughout := map[string]bool{}
	for r := range fences {
		throughout[r] = true
	}
	seen := map[string]int{}
	cursor, last, k := "", "", 0
	for {
		page, err := g.r[k%2].svc.List(ctx, wire.ListRequest{Prefix: "job/", Cursor: cursor, Limit: limit}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Leases) > limit {
			t.Fatalf("a page of %d", len(page.Leases))
		}
		for _, l := range page.Leases {
			if l.Resource <= last || !strings.HasPrefix(l.Resource, "job/") || fences[l.Resource] != l.Fence || l.RemainingMillis <= 0 {
				t.Fatalf("listed %+v after %q", l, last)
			}
			last = l.Resource
			seen[l.Resource]++
		}
		if page.Cursor == "" {
			break
		}
		cursor = page.Cursor
		for j := range 5 {
			r := names[(k*37+j*11)%len(names)]
			if f, ok := fences[r]; ok {
				if st, out := g.post(1, releaseMsg("r-"+r, r, "h", f)); st != 200 || out["ok"] != true {
					t.Fatalf("release %s: %d %v", r, st, out)
				}
				delete(fences, r)
				delete(throughout, r)
			}
			nr := "job/new" + strconv.Itoa(k) + "-" + strconv.Itoa(j)
			fences[nr], _ = g.grant(0, acquireMsg("q-"+nr, nr, "h"))
		}
		k++
	}
	for r, c := range seen {
		if c != 1 {
			t.Fatalf("%s listed %d times", r, c)
		}
	}
	for r := range throughout {
		if seen[r] != 1 {
			t.Fatalf("%s, live throughout, listed %d times", r, seen[r])
		}
	}
	g.step(ttl.Seconds()*1000 + 1)
	page, err := g.r[0].svc.List(ctx, wire.ListRequest{}, nil)
	if err != nil || len(page.Leases) != 0 || page.Cursor != "" {
		t.Fatalf("after the TTL: %d leases, cursor %q, %v", len(page.Leases), page.Cursor, err)
	}
}

// TestEventsOfAnotherReplicaArrive: a watcher on one replica receives the
// grants, renewals, releases and sweep expiries decided on another, in
// order, numbered in its own stream.
func TestEventsOfAnotherReplicaArrive(t *testing.T) {
	g := newRig(t, 2, pgstore.Options{})
	// Once the watcher's replica listens, its mark is set: every decision
	// of the other replica from then on sends its events.
	w := g.listeningWatch(1, "ev/")
	seq := w.Hello().Seq
	f, _ := g.grant(0, acquireMsg("q1", "ev/x", "a"))
	g.grant(0, renewMsg("q2", "ev/x", "a", f))
	if st, out := g.post(0, releaseMsg("q3", "ev/x", "a", f)); st != 200 || out["ok"] != true {
		t.Fatalf("%d %v", st, out)
	}
	f2, _ := g.grant(0, acquireMsg("q4", "ev/y", "b"))
	g.step(ttl.Seconds()*1000 + 1)
	g.sweepAll(0)
	want := []string{"granted ev/x a", "renewed ev/x a", "released ev/x a", "granted ev/y b", "expired ev/y b"}
	var got []string
	for len(got) < len(want) {
		select {
		case ev := <-w.Events():
			if ev.Seq != seq+1 {
				t.Fatalf("seq %d after %d", ev.Seq, seq)
			}
			seq = ev.Seq
			if ev.Resource == "ev/y" && ev.Type == wire.EventGranted && ev.Fence != f2 {
				t.Fatalf("grant %+v, want fence %d", ev, f2)
			}
			got = append(got, ev.Type+" "+ev.Resource+" "+ev.HolderID)
		case <-time.After(30 * time.Second): // against a hang only
			t.Fatalf("got %v of %v", got, want)
		}
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("got %v, want %v", got, want)
	}
}
