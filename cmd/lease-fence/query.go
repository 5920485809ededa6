//go:build unix

package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/lease-fence/lease-fence/service/client"
	"github.com/lease-fence/lease-fence/service/wire"
)

// cliHolder is the holder id of the commands that hold nothing.
const cliHolder = "lease-fence-cli"

// millis words a number of milliseconds as a duration, to the millisecond.
func millis(ms float64) string {
	return time.Duration(ms * float64(time.Millisecond)).Round(time.Millisecond).String()
}

// table prints rows as columns two spaces apart, without trailing
// spaces.
func (s *stdio) table(rows [][]string) {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
	for _, l := range strings.SplitAfter(b.String(), "\n") {
		if l != "" {
			fmt.Fprintln(s.stdout, strings.TrimRight(l, " \n"))
		}
	}
}

// printJSON writes v as one JSON line.
func (s *stdio) printJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(s.stdout, "%s\n", b)
	return err
}

// queryClient parses args into fs for a command that holds nothing and
// takes one operand (optional: at most one), and returns the operand and a
// client of the connection flags; or, with a nil client, the exit code of
// the command line's mistake (help included).
func (s *stdio) queryClient(fs *flag.FlagSet, conn *connFlags, args []string, optional bool, mistake string) (*client.Client, string, int) {
	ops, cmd, err := parse(fs, args, 0)
	if err != nil {
		return nil, "", parseFailed(err)
	}
	if len(cmd) > 0 || len(ops) > 1 || (!optional && len(ops) == 0) {
		return nil, "", s.fail(fs, &usageError{mistake})
	}
	c, err := conn.client(s.getenv, cliHolder)
	if err != nil {
		return nil, "", s.fail(fs, err)
	}
	if len(ops) == 0 {
		return c, "", 0
	}
	return c, ops[0], 0
}

const lsLine = "ls [--waiters] [--json] [connection flags] [PREFIX]"

func (s *stdio) ls(ctx context.Context, args []string) int {
	fs := s.newFlags("ls", lsLine)
	waiters := fs.Bool("waiters", false, "also list each lease's waiters, in queue order")
	asJSON := fs.Bool("json", false, "print each lease as a JSON line (NDJSON)")
	c, prefix, code := s.queryClient(fs, addConnFlags(fs), args, true, "ls takes at most one PREFIX")
	if c == nil {
		return code
	}
	opts := client.ListOptions{Waiters: *waiters, Prefix: prefix}
	head := []string{"RESOURCE", "HOLDER", "FENCE", "REMAINING", "WAITERS", "VALUE"}
	if *waiters {
		head = append(head, "WAITER IDS")
	}
	rows := [][]string{head}
	for l, err := range c.List(ctx, opts) {
		if err != nil {
			return s.fail(nil, err)
		}
		if *asJSON {
			if err := s.printJSON(l); err != nil {
				return s.fail(nil, err)
			}
			continue
		}
		value := "-"
		if l.Value != nil {
			value = strconv.Quote(*l.Value)
		}
		row := []string{l.Resource, l.HolderID, strconv.FormatUint(l.Fence, 10), millis(l.RemainingMillis), strconv.Itoa(l.Waiters), value}
		if *waiters {
			row = append(row, cmp.Or(strings.Join(l.WaiterIDs, ","), "-"))
		}
		rows = append(rows, row)
	}
	if !*asJSON {
		s.table(rows)
	}
	return exitOK
}

const inspectLine = "inspect [--json] [connection flags] RESOURCE"

// inspectJSON is a resource's state as inspect --json prints it.
type inspectJSON struct {
	Resource        string  `json:"resource"`
	Held            bool    `json:"held"`
	HolderID        string  `json:"holderId,omitzero"`
	Fence           uint64  `json:"fence,omitzero"`
	RemainingMillis float64 `json:"remainingMillis,omitzero"`
	Value           string  `json:"value,omitzero"`
	LastFence       *uint64 `json:"lastFence,omitzero"`
}

func (s *stdio) inspect(ctx context.Context, args []string) int {
	fs := s.newFlags("inspect", inspectLine)
	asJSON := fs.Bool("json", false, "print the state as JSON")
	c, resource, code := s.queryClient(fs, addConnFlags(fs), args, false, "inspect needs one RESOURCE")
	if c == nil {
		return code
	}
	st, err := c.Inspect(ctx, resource)
	if err != nil {
		return s.fail(nil, err)
	}
	if *asJSON {
		out := inspectJSON{Resource: resource, Held: st.Held}
		if st.Held {
			out.HolderID, out.Fence, out.RemainingMillis, out.Value = st.HolderID, st.Fence, float64(st.Remaining)/float64(time.Millisecond), st.Value
		} else {
			out.LastFence = &st.LastFence
		}
		if err := s.printJSON(out); err != nil {
			return s.fail(nil, err)
		}
		return exitOK
	}
	rows := [][]string{{"resource", resource}}
	if st.Held {
		rows = append(rows, []string{"holder", st.HolderID}, []string{"fence", strconv.FormatUint(st.Fence, 10)},
			[]string{"remaining", st.Remaining.Round(time.Millisecond).String()})
		if st.Value != "" {
			rows = append(rows, []string{"value", strconv.Quote(st.Value)})
		}
	} else {
		rows = append(rows, []string{"holder", "-"}, []string{"last fence", strconv.FormatUint(st.LastFence, 10)})
	}
	s.table(rows)
	return exitOK
}

const watchLine = "watch [--json] [--stream ID --after-seq N] [connection flags] [PREFIX]"

// helloJSON is a hello as watch --json prints it.
type helloJSON struct {
	Type   string `json:"type"`
	Stream string `json:"stream"`
	Seq    uint64 `json:"seq"`
}

func (s *stdio) watch(ctx context.Context, args []string) int {
	fs := s.newFlags("watch", watchLine)
	asJSON := fs.Bool("json", false, "print each event as a JSON line (NDJSON)")
	stream := fs.String("stream", "", "resume the stream with this id (from a hello) ...")
	after := fs.Uint64("after-seq", 0, "... after this sequence number")
	c, prefix, code := s.queryClient(fs, addConnFlags(fs), args, true, "watch takes at most one PREFIX")
	if c == nil {
		return code
	}
	opts := client.WatchOptions{Stream: *stream, AfterSeq: *after, Prefix: prefix}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	for ev, err := range c.Watch(ctx, opts) {
		if err != nil {
			return s.fail(nil, err)
		}
		if err := s.printEvent(ev, *asJSON); err != nil {
			return s.fail(nil, err)
		}
	}
	return exitOK
}

// printEvent prints one event of a watch: a JSON line, or a line of
// fixed columns. A hello says that the watch starts afresh (events before
// it may be missing): on stderr for people, as a line for scripts.
func (s *stdio) printEvent(ev client.Event, asJSON bool) error {
	if ev.Type == wire.EventHello {
		if asJSON {
			return s.printJSON(helloJSON{Type: ev.Type, Stream: ev.Stream, Seq: ev.Seq})
		}
		fmt.Fprintf(s.stderr, "lease-fence: watching stream %s from seq %d (earlier events are not shown: ls has the leases now)\n", ev.Stream, ev.Seq)
		return nil
	}
	if asJSON {
		return s.printJSON(ev.Event)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-8d %-10s %s", ev.Seq, ev.Type, ev.Resource)
	if ev.HolderID != "" {
		fmt.Fprintf(&b, "  holder %s", ev.HolderID)
	}
	if ev.Fence != 0 {
		fmt.Fprintf(&b, "  fence %d", ev.Fence)
	}
	if ev.RemainingMillis != 0 {
		fmt.Fprintf(&b, "  remaining %s", millis(ev.RemainingMillis))
	}
	if ev.Waiters != nil {
		fmt.Fprintf(&b, "  waiters %d", *ev.Waiters)
	}
	if ev.Value != nil {
		fmt.Fprintf(&b, "  value %s", strconv.Quote(*ev.Value))
	}
	_, err := fmt.Fprintln(s.stdout, b.String())
	return err
}

const revokeLine = "revoke [--holder H] [--fence F] [--json] [connection flags] RESOURCE"

// revokedJSON is what revoke --json prints.
type revokedJSON struct {
	Resource      string `json:"resource"`
	HolderID      string `json:"holderId,omitzero"`
	Fence         uint64 `json:"fence,omitzero"`
	RemovedWaiter string `json:"removedWaiter,omitzero"`
}

func (s *stdio) revoke(ctx context.Context, args []string) int {
	fs := s.newFlags("revoke", revokeLine)
	holder := fs.String("holder", "", "end only this holder's lease, or remove this waiter")
	fenceN := fs.Uint64("fence", 0, "end the lease only if it has this fence (then a lost answer is retried safely)")
	asJSON := fs.Bool("json", false, "print what was revoked as JSON")
	c, resource, code := s.queryClient(fs, addConnFlags(fs), args, false, "revoke needs one RESOURCE")
	if c == nil {
		return code
	}
	r, err := c.Revoke(ctx, resource, client.RevokeOptions{HolderID: *holder, Fence: *fenceN})
	if err != nil {
		var we *wire.Error
		if errors.As(err, &we) && we.Code == wire.CodeNotHeld {
			fmt.Fprintln(s.stderr, "lease-fence:", we.Message)
			return exitError
		}
		fmt.Fprintln(s.stderr, "lease-fence:", describe(err))
		return exitCode(err)
	}
	if *asJSON {
		if err := s.printJSON(revokedJSON{Resource: resource, HolderID: r.HolderID, Fence: r.Fence, RemovedWaiter: r.RemovedWaiter}); err != nil {
			return s.fail(nil, err)
		}
		return exitOK
	}
	if r.RemovedWaiter != "" {
		fmt.Fprintf(s.stdout, "removed waiter %s from %s\n", r.RemovedWaiter, resource)
	} else {
		fmt.Fprintf(s.stdout, "revoked %s: holder %s, fence %d\n", resource, r.HolderID, r.Fence)
	}
	return exitOK
}
