package redisfence

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"

	"github.com/lease-fence/lease-fence/core/fence"
)

// The most strings the commits of one batch send together (their commands
// are at most MaxCommands, as in one write). lease-fence/redis keeps the
// same bound.
const maxBatchStrings = 16 * MaxArgsPerCommand

// Commits of one token that declare the same keys (a group) share scripts:
// a group commit. The first commit of an idle group is sent at once, alone;
// those that arrive while it is in flight wait in the group's next batch,
// sent as one script (their commands in order after one check) by its
// first commit's caller when the one in flight has been answered, and so
// on while commits keep arriving. Each commit is still answered as it
// would be alone (see runBatch). Only commits whose context cannot be
// cancelled (ctx.Done() is nil) and without a marker (AtMostOnce) join
// groups: a batch is sent with its first caller's context, and a marker is
// one commit's.

// group is the state of one group while one of its scripts is in flight.
type group struct {
	waiting []*batch // the batches to send after the one in flight, in order
}

// batch is commits of one group sent as one script.
type batch struct {
	tok     fence.Token
	keys    []string // the script's KEYS: the floor, the log, the write's keys
	items   []*item
	count   int           // commands
	strings int           // the strings of their commands, the counts included
	turn    chan struct{} // closed when it is the batch's turn to be sent
}

// item is one commit of a batch.
type item struct {
	args []any // its commands as the script takes them: each its number of strings, then the strings
	w    *Write
	done chan error
}

// commands is how many commands the commit runs.
func (it *item) commands() int { return len(it.w.Commands) }

// groupKey names tok's group for a write declaring keys: the token and
// the keys, each with its length, so that no two groups share a name.
func groupKey(tok fence.Token, keys []string) string {
	var b strings.Builder
	put := func(s string) {
		b.WriteString(strconv.Itoa(len(s)))
		b.WriteByte(':')
		b.WriteString(s)
	}
	put(tok.Resource)
	put(tok.HolderID)
	put(strconv.FormatUint(tok.Fence, 10))
	for _, k := range keys {
		put(k)
	}
	return b.String()
}

// join commits w (checked; cmds its commands' arguments) in its group:
// sent at once if the group is idle, else with the next batch.
func (s *Store) join(ctx context.Context, tok fence.Token, floorKey, logKey string, w *Write, cmds []any) error {
	it := &item{args: cmds, w: w, done: make(chan error, 1)}
	gk := groupKey(tok, w.Keys)
	s.mu.Lock()
	if s.groups == nil {
		s.groups = map[string]*group{}
	}
	g := s.groups[gk]
	if g == nil {
		g = &group{}
		s.groups[gk] = g
		s.mu.Unlock()
		s.send(ctx, gk, g, s.newBatch(tok, floorKey, logKey, w.Keys, it))
		return <-it.done
	}
	var b *batch
	if n := len(g.waiting); n > 0 {
		b = g.waiting[n-1]
		if b.count+it.commands() > MaxCommands || b.strings+len(it.args) > maxBatchStrings {
			b = nil
		}
	}
	leader := b == nil
	if leader {
		b = s.newBatch(tok, floorKey, logKey, w.Keys, it)
		g.waiting = append(g.waiting, b)
	} else {
		b.add(it)
	}
	s.mu.Unlock()
	if s.joined != nil {
		s.joined()
	}
	if leader {
		s.sendWaiting(ctx, gk, g, b)
	}
	return <-it.done
}

func (s *Store) newBatch(tok fence.Token, floorKey, logKey string, wkeys []string, it *item) *batch {
	keys := make([]string, 0, 2+len(wkeys))
	keys = append(keys, floorKey, logKey)
	keys = append(keys, wkeys...)
	b := &batch{tok: tok, keys: keys, turn: make(chan struct{})}
	b.add(it)
	return b
}

func (b *batch) add(it *item) {
	b.items = append(b.items, it)
	b.count += it.commands()
	b.strings += len(it.args)
}

// send runs batch b of group g (its commits all answered when it returns),
// then gives the turn to the group's next batch, or ends the group. When
// it answered other callers than its own, it lets the goroutines its
// answers woke run first (runtime.Gosched): callers that commit again at
// once then find the group still busy and wait for the next batch
// together, instead of the first of them finding it idle and sending its
// commit alone. (With nothing else to run, a Gosched costs tens of
// microseconds of CPU: the scheduler wakes another thread to look for
// work. A lone commit does not pay it.)
//
// A panic while b runs (a go-redis hook's) answers b's commits not yet
// answered with an error, passes the turn on as above, and goes on in
// this caller's goroutine: the group's other callers are not left waiting.
func (s *Store) send(ctx context.Context, gk string, g *group, b *batch) {
	defer func() {
		if p := recover(); p != nil {
			err := fmt.Errorf("redisfence: the commit's batch was not answered: a panic while it ran: %v", p)
			for _, it := range b.items {
				select {
				case it.done <- err: // not answered yet (or answered and read: nobody reads this)
				default:
				}
			}
			s.passTurn(gk, g)
			panic(p)
		}
	}()
	s.runBatch(ctx, b)
	if len(b.items) > 1 {
		runtime.Gosched()
	}
	s.passTurn(gk, g)
}

// passTurn gives the turn to group g's next batch, or ends the group.
func (s *Store) passTurn(gk string, g *group) {
	s.mu.Lock()
	if len(g.waiting) == 0 {
		delete(s.groups, gk)
	} else {
		close(g.waiting[0].turn)
	}
	s.mu.Unlock()
}

// sendWaiting sends b, the group's first waiting batch, once it has the
// turn. It takes b off the list only then, after letting the goroutines
// just woken by the batch before run (runtime.Gosched): the callers whose
// commits that batch answered, when they commit again at once, join b
// rather than the batch after it.
func (s *Store) sendWaiting(ctx context.Context, gk string, g *group, b *batch) {
	<-b.turn
	runtime.Gosched()
	s.mu.Lock()
	g.waiting = g.waiting[1:]
	s.mu.Unlock()
	s.send(ctx, gk, g, b)
}

// runBatch runs the commits of b as one script and answers each as outcome
// would answer it alone. The script's commands are the commits' in order,
// so its reply names the commit it stopped at: "stale" (nothing ran) is
// the first commit's refusal; "invalid" (nothing ran) is that commit's;
// "failed" is that commit's, and the ones before it ran. The commits the
// script did not run are then sent again alone, in order, so that each
// refusal is logged on its own, before the group's next batch is sent.
func (s *Store) runBatch(ctx context.Context, b *batch) {
	tok := b.tok
	args := make([]any, 0, 5+b.strings)
	args = append(args, tok.HolderID, strconv.FormatUint(tok.Fence, 10), s.maxRej, 0, b.count)
	for _, it := range b.items {
		args = append(args, it.args...)
	}
	reply, err := fenceScript.Run(ctx, s.rdb, b.keys, args...).Slice()
	if err != nil {
		e := error(&OutcomeUnknownError{Err: err})
		if sentNothing(err) {
			e = &DBError{Op: "commit", Err: err}
		}
		for _, it := range b.items {
			it.done <- e
		}
		return
	}
	alone := func(it *item) {
		s.runBatch(ctx, &batch{tok: tok, keys: b.keys, items: []*item{it}, count: it.commands(), strings: len(it.args)})
	}
	kind := ""
	if len(reply) > 0 {
		kind, _ = reply[0].(string)
	}
	switch {
	case kind == "stale":
		b.items[0].done <- s.outcome(tok, reply, b.items[0].w)
		for _, it := range b.items[1:] {
			alone(it)
		}
	case (kind == "invalid" || kind == "failed") && len(reply) == 3:
		// The commit of the script's command c (counted from 0), and c
		// within it.
		c, _ := reply[1].(int64)
		c--
		i := 0
		for ; i < len(b.items)-1 && c >= int64(b.items[i].commands()); i++ {
			c -= int64(b.items[i].commands())
		}
		for k, it := range b.items {
			switch {
			case k == i:
				it.done <- s.outcome(tok, []any{kind, c + 1, reply[2]}, it.w)
			case k < i && kind == "failed":
				it.done <- nil
			default:
				alone(it)
			}
		}
	default:
		for _, it := range b.items {
			it.done <- s.outcome(tok, reply, it.w)
		}
	}
}
