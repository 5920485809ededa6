//go:build !js

package sqlfence_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/gates/sqlfence"
)

// FloorsAfter pages through the floors in order, within a prefix, each
// once; RejectionTotal counts the refusals of every resource; bad
// arguments are argument errors.
func TestFloorsAfterAndRejectionTotal(t *testing.T) {
	forEach(t, func(t *testing.T, b *backend) {
		s := open(t, b, b.open(t))
		ctx := context.Background()
		names := []string{"a", "job", "jobs/1", "jobs/2", "jobs/3", "jobs0", "jobz", "k"}
		for i, r := range names {
			if err := s.Admit(ctx, fence.Token{Resource: r, HolderID: "h" + r, Fence: uint64(i + 1)}); err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range []string{"a", "jobs/2", "jobs/2"} {
			if err := s.Admit(ctx, fence.Token{Resource: r, HolderID: "old", Fence: 1}); r != "a" && !fence.IsStale(err) {
				t.Fatalf("stale admit on %s: %v", r, err)
			}
		}
		if n, err := s.RejectionTotal(ctx); err != nil || n != 2 {
			t.Fatalf("RejectionTotal = %d, %v; want 2", n, err)
		}
		page := func(prefix, after string, limit int) string {
			t.Helper()
			fs, err := s.FloorsAfter(ctx, prefix, after, limit)
			if err != nil {
				t.Fatal(err)
			}
			return fmt.Sprint(fs)
		}
		for _, c := range []struct {
			prefix, after string
			limit         int
			want          string
		}{
			{"", "", 3, "[{a ha 1} {job hjob 2} {jobs/1 hjobs/1 3}]"},
			{"", "jobs/1", 3, "[{jobs/2 hjobs/2 4} {jobs/3 hjobs/3 5} {jobs0 hjobs0 6}]"},
			{"", "jobz", 3, "[{k hk 8}]"},
			{"", "k", 3, "[]"},
			{"jobs/", "", 2, "[{jobs/1 hjobs/1 3} {jobs/2 hjobs/2 4}]"},
			{"jobs/", "jobs/2", 2, "[{jobs/3 hjobs/3 5}]"},
			{"jobs/", "a", 10, "[{jobs/1 hjobs/1 3} {jobs/2 hjobs/2 4} {jobs/3 hjobs/3 5}]"},
			{"jo", "jobs0", 10, "[{jobz hjobz 7}]"},
			{"x", "", 10, "[]"},
		} {
			if got := page(c.prefix, c.after, c.limit); got != c.want {
				t.Errorf("FloorsAfter(%q, %q, %d) = %s, want %s", c.prefix, c.after, c.limit, got, c.want)
			}
		}
		long := string(make([]byte, fence.MaxIDBytes+1))
		for _, c := range []struct {
			prefix, after string
			limit         int
		}{{"", "", 0}, {"", "", sqlfence.MaxFloorsPage + 1}, {long, "", 1}, {"", long, 1}} {
			var ae *fence.ArgumentError
			if _, err := s.FloorsAfter(ctx, c.prefix, c.after, c.limit); !errors.As(err, &ae) {
				t.Errorf("FloorsAfter(%d-byte prefix, %d-byte after, %d) = %v, want an argument error", len(c.prefix), len(c.after), c.limit, err)
			}
		}
	})
}
