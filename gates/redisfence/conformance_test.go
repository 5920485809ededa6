//go:build !js

package redisfence_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/gates/gatetest"
	"github.com/lease-fence/lease-fence/gates/redisfence"
	"github.com/lease-fence/lease-fence/test/rig/redistest"
)

// conformGate adapts a Store to the conformance suite: the suite's values
// are a list in the resource's hash slot, appended by an RPUSH in the
// Store's script. A failing write appends, then runs INCR on that list
// (WRONGTYPE).
type conformGate struct {
	s        *redisfence.Store
	rdb      redis.UniversalClient
	ns       string
	deadline bool // each commit gets a context with a deadline, as a hold's is
}

// addr is "host:port prefix", or "cluster:host:port,host:port,... prefix",
// followed by " deadline" for a gate whose commits each get a context with
// a deadline (group commits of cancellable contexts).
func attach(t testing.TB, addr string) gatetest.Gate {
	hostPort, rest, _ := strings.Cut(addr, " ")
	ns, opt, _ := strings.Cut(rest, " ")
	var rdb redis.UniversalClient
	nodes, cluster := strings.CutPrefix(hostPort, "cluster:")
	if cluster {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(nodes, ","), Protocol: 2})
		t.Cleanup(func() { c.Close() })
		rdb = c
	} else {
		rdb = client(t, hostPort)
	}
	// The cluster runs the suite with the commit markers (AtMostOnce) and,
	// with deadlines, without them; the single server without them: both
	// scripts' paths meet every rule.
	s, err := redisfence.Open(rdb, redisfence.Options{Prefix: ns, AtMostOnce: cluster && opt != "deadline"})
	if err != nil {
		t.Fatal(err)
	}
	return &conformGate{s: s, rdb: rdb, ns: ns, deadline: opt == "deadline"}
}

func (g *conformGate) valuesKey(resource string) string {
	return redisfence.Key(resource, g.ns+"values")
}

func (g *conformGate) Commit(ctx context.Context, tok fence.Token, w gatetest.Write) error {
	if g.deadline && ctx.Done() == nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Hour)
		defer cancel()
	}
	if w.Nil {
		return g.s.Commit(ctx, tok, redisfence.Write{})
	}
	k := g.valuesKey(tok.Resource)
	cmds := [][]string{{"RPUSH", k, w.Value}}
	if w.Fail {
		cmds = append(cmds, []string{"INCR", k})
	}
	return g.s.Commit(ctx, tok, redisfence.Write{Keys: []string{k}, Commands: cmds})
}

func (g *conformGate) Admit(ctx context.Context, tok fence.Token) error { return g.s.Admit(ctx, tok) }
func (g *conformGate) Floor(ctx context.Context, r string) (uint64, error) {
	return g.s.Floor(ctx, r)
}
func (g *conformGate) Rejections(ctx context.Context, r string) ([]fence.Rejection, error) {
	return g.s.Rejections(ctx, r)
}
func (g *conformGate) RejectionsAfter(ctx context.Context, r string, after uint64, limit int) ([]fence.Rejection, error) {
	return g.s.RejectionsAfter(ctx, r, after, limit)
}

func (g *conformGate) Values(ctx context.Context, r string) ([]string, error) {
	return g.rdb.LRange(ctx, g.valuesKey(r), 0, -1).Result()
}

// conformConfig is the suite's configuration on the test server; with
// deadline, each commit gets a context with a deadline.
func conformConfig(deadline bool) gatetest.Config {
	return gatetest.Config{
		New: func(t testing.TB, o gatetest.Options) (gatetest.Gate, string) {
			ns := fmt.Sprintf("t%d-", nsSeq.Add(1))
			rdb := client(t, srv.Addr())
			s, err := redisfence.Open(rdb, redisfence.Options{Prefix: ns, MaxRejections: o.MaxRejections})
			if err != nil {
				t.Fatal(err)
			}
			addr := srv.Addr() + " " + ns
			if deadline {
				addr += " deadline"
			}
			return &conformGate{s: s, rdb: rdb, ns: ns, deadline: deadline}, addr
		},
		Attach:      attach,
		FailedWrite: gatetest.KeepsFloor,
		Paged:       true,
		Capped:      true,
		Restart: func(t testing.TB, addr string) {
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
		},
	}
}

// The Store passes the conformance suite against a real redis-server: two
// writer processes, a writer SIGKILLed mid-run, and the server itself
// killed with SIGKILL and restarted from its AOF (appendfsync always): the
// floor, the log and the values survive. A write that fails part way keeps
// the floor raised (KeepsFloor): Redis does not undo the commands before the
// failing one.
func TestConformance(t *testing.T) {
	gatetest.Run(t, conformConfig(false))
}

// The suite again with a deadline on every commit's context (what a hold's
// context has): the commits share scripts as those with
// context.Background() do, and meet every rule.
func TestConformanceDeadline(t *testing.T) {
	gatetest.Run(t, conformConfig(true))
}

// The deliberate break: a script that compares the fence with <= instead
// of < refuses the fence at the floor, and one that never raises the floor
// admits stale writes. The suite fails on both.
func TestConformanceBreakCaught(t *testing.T) {
	for _, b := range []struct {
		name, old, new string
		rules          []string
	}{
		{"EqualRefused", "if fenceN < floorN then", "if fenceN <= floorN then", []string{"EqualFenceAdmitted"}},
		{"NoRaise", "redis.call('HSET', floorKey, 'fence', fence, 'holder', holder)", "", []string{"LowerFenceRefused", "AdmitRaisesWithoutWriting"}},
	} {
		for _, deadline := range []bool{false, true} {
			restore := redisfence.BreakScript(b.old, b.new)
			got := gatetest.Failures(t, conformConfig(deadline))
			restore()
			for _, r := range b.rules {
				if len(got[r]) == 0 {
					t.Errorf("%s (deadline %v): rule %s did not catch the broken script (failures: %v)", b.name, deadline, r, got)
				}
			}
		}
	}
}

// The Store passes the suite on a Redis Cluster of three masters
// (go-redis's ClusterClient routes each script by its first key; every key
// of a commit is in the resource's slot), with writer processes and a
// SIGKILLed writer: with AtMostOnce, and without it with a deadline on
// every commit's context (group commits).
// The suite's resources are on two masters (deploy-slot and other-slot in
// slots 3772 and 1787, fresh-slot in 9665 of the three equal ranges).
func TestConformanceCluster(t *testing.T) {
	var cluster *redistest.Cluster
	var once sync.Once
	for _, deadline := range []bool{false, true} {
		name := "AtMostOnce"
		if deadline {
			name = "DeadlineGroups"
		}
		t.Run(name, func(t *testing.T) {
			gatetest.Run(t, gatetest.Config{
				New: func(t testing.TB, o gatetest.Options) (gatetest.Gate, string) {
					once.Do(func() {
						var err error
						if cluster, err = redistest.StartCluster(3); err != nil {
							t.Fatal(err)
						}
					})
					if cluster == nil {
						t.Fatal("no cluster")
					}
					addr := "cluster:" + strings.Join(cluster.Addrs(), ",") + " " + fmt.Sprintf("c%d-", nsSeq.Add(1))
					if deadline {
						addr += " deadline"
					}
					g := attach(t, addr).(*conformGate)
					s, err := redisfence.Open(g.rdb, redisfence.Options{Prefix: g.ns, MaxRejections: o.MaxRejections, AtMostOnce: !deadline})
					if err != nil {
						t.Fatal(err)
					}
					g.s = s
					return g, addr
				},
				Attach:      attach,
				FailedWrite: gatetest.KeepsFloor,
				Paged:       true,
				Capped:      true,
			})
		})
	}
	if cluster != nil {
		if err := cluster.Stop(); err != nil {
			t.Error(err)
		}
	}
}
