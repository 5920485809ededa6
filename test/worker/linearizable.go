package workere2e

import (
	"fmt"
	"time"

	"github.com/anishathalye/porcupine"
)

// leaseState is the sequential specification of one resource's coordinator,
// for a history in which no lease runs out (the e2e uses a long TTL): the
// resource is free or held by one client with one fence, and issued is the
// last fence handed out.
type leaseState struct {
	live   bool
	holder int
	fence  uint64
	issued uint64
}

// leaseModel partitions a history by resource and checks each part against
// leaseState: an acquisition of a free resource is granted the next fence,
// one of a held resource is denied naming the holder; only the holder's
// current fence renews or releases.
var leaseModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byRes := map[string][]porcupine.Operation{}
		var order []string
		for _, op := range history {
			r := op.Input.(Event).Resource
			if _, ok := byRes[r]; !ok {
				order = append(order, r)
			}
			byRes[r] = append(byRes[r], op)
		}
		out := make([][]porcupine.Operation, 0, len(order))
		for _, r := range order {
			out = append(out, byRes[r])
		}
		return out
	},
	Init: func() interface{} { return leaseState{} },
	Step: func(state, input, _ interface{}) (bool, interface{}) {
		s, e := state.(leaseState), input.(Event)
		mine := s.live && s.holder == e.Client && s.fence == e.Fence
		switch e.Op {
		case "acquire":
			if s.live {
				return !e.OK && e.HeldBy == ClientName(s.holder), s
			}
			if !e.OK || e.Fence != s.issued+1 {
				return false, s
			}
			return true, leaseState{live: true, holder: e.Client, fence: e.Fence, issued: e.Fence}
		case "renew":
			return e.OK == mine, s
		case "release":
			if e.OK != mine {
				return false, s
			}
			if mine {
				s.live = false
			}
			return true, s
		}
		return false, s
	},
	DescribeOperation: func(input, _ interface{}) string {
		e := input.(Event)
		return fmt.Sprintf("%s %s %s fence %d ok %v", ClientName(e.Client), e.Op, e.Resource, e.Fence, e.OK)
	},
}

// ClientName is the holder id of client n in the e2e histories.
func ClientName(n int) string { return fmt.Sprintf("client-%d", n) }

// Linearizable checks history with porcupine against leaseModel. Each
// event is both the input and the output of its operation. Resources must
// be fresh (first fence 1) and no lease may expire during the history.
func Linearizable(history []Event, timeout time.Duration) porcupine.CheckResult {
	ops := make([]porcupine.Operation, len(history))
	for i, e := range history {
		ops[i] = porcupine.Operation{ClientId: e.Client, Input: e, Output: e, Call: e.Start, Return: e.End}
	}
	return porcupine.CheckOperationsTimeout(leaseModel, ops, timeout)
}
