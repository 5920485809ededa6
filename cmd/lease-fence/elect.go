//go:build unix

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/lease-fence/lease-fence/service/client"
)

const electLine = "elect [--value V] [--holder ID] [--observe] [--json] [--kill-after D] [connection flags] NAME [-- CMD [ARGS...]]"

// leaderJSON is a leader as elect --json prints it.
type leaderJSON struct {
	HolderID string `json:"holderId"`
	Fence    uint64 `json:"fence"`
	Value    string `json:"value,omitzero"`
}

func (s *stdio) elect(ctx context.Context, args []string) int {
	fs := s.newFlags("elect", electLine)
	value := fs.String("value", "", "the leader's value while this holder leads (its address, say; not secret)")
	observe := fs.Bool("observe", false, "only print the leaders: do not campaign")
	asJSON := fs.Bool("json", false, "print each leader as a JSON line")
	var hf holdFlags
	addHoldFlags(fs, &hf)
	conn := addConnFlags(fs)
	ops, cmd, err := parse(fs, args, 0)
	if err != nil {
		return parseFailed(err)
	}
	switch {
	case len(ops) != 1:
		return s.fail(fs, &usageError{"elect needs one NAME"})
	case *observe && (len(cmd) > 0 || *value != ""):
		return s.fail(fs, &usageError{"--observe does not campaign: it takes no --value and no command"})
	}
	c, err := hf.client(s.getenv, conn)
	if err != nil {
		return s.fail(fs, err)
	}
	e := client.NewElection(c, ops[0])
	e.Options.RenewEvery = hf.renewEvery
	if len(cmd) > 0 {
		return s.holdAndRun(ctx, c, cmd, hf, func(ctx context.Context) (*client.Held, error) {
			return e.Campaign(ctx, *value)
		})
	}

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	// Observe retries failures without end: one inspection first, so that
	// a wrong URL or token is said at once.
	if _, _, err := e.Leader(ctx); err != nil {
		return s.fail(nil, err)
	}
	lostLead := make(chan error, 1)
	if !*observe {
		go func() {
			h, err := e.Campaign(ctx, *value)
			if err != nil {
				if ctx.Err() != nil {
					err = nil // stopped by a signal while campaigning
				}
				lostLead <- err
				return
			}
			<-h.Context().Done()
			if cause := context.Cause(h.Context()); errors.Is(cause, client.ErrLeaseLost) {
				lostLead <- cause
				return
			}
			// Stopped by a signal: resign, so the next campaigner leads
			// at once.
			_ = h.Release(context.WithoutCancel(ctx))
			lostLead <- nil
		}()
	}
	octx, ocancel := context.WithCancel(ctx)
	defer ocancel()
	leaders := make(chan client.Leader)
	go func() {
		defer close(leaders)
		for l := range e.Observe(octx) {
			select {
			case leaders <- l:
			case <-octx.Done():
				return
			}
		}
	}()
	for {
		select {
		case l, ok := <-leaders:
			if !ok {
				if *observe {
					return exitOK
				}
				// Observe ended with ctx: wait for the resignation.
				if err := <-lostLead; err != nil {
					return s.leadFailed(err)
				}
				return exitOK
			}
			s.printLeader(l, *asJSON)
		case err := <-lostLead:
			ocancel()
			if err != nil {
				return s.leadFailed(err)
			}
			return exitOK
		}
	}
}

// leadFailed reports a campaign that failed, or a lead that was lost.
func (s *stdio) leadFailed(err error) int {
	if errors.Is(err, client.ErrLeaseLost) {
		fmt.Fprintln(s.stderr, "lease-fence: the lead was lost:", err)
		return exitLost
	}
	return s.fail(nil, err)
}

func (s *stdio) printLeader(l client.Leader, asJSON bool) {
	if asJSON {
		b, _ := json.Marshal(leaderJSON{HolderID: l.HolderID, Fence: l.Fence, Value: l.Value})
		fmt.Fprintf(s.stdout, "%s\n", b)
		return
	}
	line := "fence " + strconv.FormatUint(l.Fence, 10) + "  holder " + l.HolderID
	if l.Value != "" {
		line += "  value " + strconv.Quote(l.Value)
	}
	fmt.Fprintln(s.stdout, line)
}
