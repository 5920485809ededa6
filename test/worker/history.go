// Package workere2e tests the lease coordinator running as a Cloudflare
// Worker under the local workerd runtime (e2e_test.go, build tag e2e), and
// holds the checker it applies to the histories concurrent clients record.
package workere2e

import (
	"fmt"
	"sort"
)

// Event is one completed call in a history. Times are readings of one
// monotonic clock shared by every client (real time order); Start is taken
// before the request is sent and End after the answer arrived.
type Event struct {
	Client   int
	Op       string // "acquire", "renew", "release"
	Resource string
	Start    int64
	End      int64
	OK       bool   // granted / released
	Fence    uint64 // the fence granted, renewed or released
	HeldBy   string // for a denied acquisition, the holder named
	// Lease validity in the coordinator's clock domain, for granted
	// acquisitions and renewals: [ExpiresAt-TTL, ExpiresAt).
	ExpiresAt float64
	TTLMillis float64
}

// Check verifies a history against the rules a coordinator must keep, for
// each resource:
//
//   - each acquisition grant has a fence no other acquisition got;
//   - fences never go backwards: a grant that completed before another
//     acquisition began has the lower fence;
//   - renewals and releases only ever name granted fences, and a renewal
//     keeps its fence;
//   - no two live holders: the lease with the next fence starts (in the
//     coordinator's domain) no earlier than the previous lease's last
//     expiry, unless the previous lease was released, and then the next
//     grant did not complete before that release began.
//
// It returns the first violation found, or nil.
func Check(history []Event) error {
	byRes := map[string][]Event{}
	for _, e := range history {
		if e.End < e.Start {
			return fmt.Errorf("event %+v ends before it starts", e)
		}
		byRes[e.Resource] = append(byRes[e.Resource], e)
	}
	names := make([]string, 0, len(byRes))
	for n := range byRes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := checkResource(name, byRes[name]); err != nil {
			return err
		}
	}
	return nil
}

type leaseLife struct {
	grant      Event
	lastExpiry float64
	release    *Event
}

func checkResource(name string, evs []Event) error {
	lives := map[uint64]*leaseLife{}
	var grants []Event
	for _, e := range evs {
		if e.Op == "acquire" && e.OK {
			if prev, dup := lives[e.Fence]; dup {
				return fmt.Errorf("%s: fence %d granted twice (clients %d and %d)", name, e.Fence, prev.grant.Client, e.Client)
			}
			lives[e.Fence] = &leaseLife{grant: e, lastExpiry: e.ExpiresAt}
			grants = append(grants, e)
		}
	}
	for _, e := range evs {
		if e.Op == "acquire" || !e.OK {
			continue
		}
		l := lives[e.Fence]
		if l == nil {
			return fmt.Errorf("%s: %s of fence %d, which was never granted", name, e.Op, e.Fence)
		}
		if l.grant.Client != e.Client {
			return fmt.Errorf("%s: client %d %sd fence %d held by client %d", name, e.Client, e.Op, e.Fence, l.grant.Client)
		}
		switch e.Op {
		case "renew":
			if e.ExpiresAt > l.lastExpiry {
				l.lastExpiry = e.ExpiresAt
			}
		case "release":
			if l.release != nil {
				return fmt.Errorf("%s: fence %d released twice", name, e.Fence)
			}
			ev := e
			l.release = &ev
		}
	}
	sort.Slice(grants, func(i, j int) bool { return grants[i].Fence < grants[j].Fence })
	for i, g := range grants {
		for _, h := range grants[i+1:] {
			if h.End < g.Start {
				return fmt.Errorf("%s: fence went backwards: %d completed before %d began", name, h.Fence, g.Fence)
			}
		}
		if i == 0 {
			continue
		}
		prev := lives[grants[i-1].Fence]
		start := g.ExpiresAt - g.TTLMillis
		if prev.release != nil {
			if g.End < prev.release.Start {
				return fmt.Errorf("%s: fence %d granted before fence %d was released", name, g.Fence, prev.grant.Fence)
			}
			continue
		}
		if start < prev.lastExpiry {
			return fmt.Errorf("%s: two live holders: fence %d (client %d) began at %v, fence %d (client %d) was live until %v",
				name, g.Fence, g.Client, start, prev.grant.Fence, prev.grant.Client, prev.lastExpiry)
		}
	}
	return nil
}
