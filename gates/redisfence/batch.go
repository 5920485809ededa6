package redisfence

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/lease-fence/lease-fence/core/fence"
)

// The most strings the commits of one batch send together (their commands
// are at most MaxCommands, as in one write). lease-fence/redis keeps the
// same bound.
const maxBatchStrings = 16 * MaxArgsPerCommand

// Commits of one token that declare the same keys (a group) share scripts:
// a group commit. The first commit of an idle group is sent at once, alone;
// those that arrive while it is in flight wait in the group's next batch,
// sent as one script (their commands in order after one check) when the one
// in flight has been answered, and so on while commits keep arriving. Each
// commit is still answered as it would be alone (see runBatch).
//
// Any context joins. The first commit of an idle group is a commit alone:
// its caller sends it with its own context, which does to it what the
// client does to any command's (go-redis cuts the reply at the context's
// deadline only with ContextTimeoutEnabled, an *OutcomeUnknownError).
// A commit that waits in a batch waits for its answer or for its
// context's end, whichever comes first: if its context ends before the
// batch is sent, it leaves the batch (nothing of it is sent) and returns
// the context's error; if it ends while the batch's script is in flight,
// it returns at once an *OutcomeUnknownError, the error a commit alone
// gets when its context's deadline cuts the reply. A batch is sent with a
// context that no member's end cancels (context.WithoutCancel of its first
// commit's: its values, no deadline), so one member leaving never cuts the
// script the others are in; the client's own ReadTimeout and WriteTimeout
// bound it. The earliest member deadline does not bound it: cutting the
// connection there would make the outcome unknown for every member, the
// ones with later deadlines too, while the member whose deadline passed
// has already returned.
//
// The batches are sent by a goroutine of the group's (a driver, one while
// the group keeps busy), not by a member's: a member must be free to
// return when its context ends. (The first commit is sent in its caller's
// goroutine: handing it to a goroutine would cost each lone commit two
// wake-ups, about a tenth of its time with one writer in
// BenchmarkCommitInterleaved.)
//
// A Store with a marker (AtMostOnce) sends one script per commit: the
// marker names one commit and holds its outcome, and a lost reply is
// settled by writing that commit's marker as aborted, so a script shared
// by several commits would need a marker per commit, each settled on its
// own.

// group is the state of one group while one of its scripts is in flight.
type group struct {
	waiting []*batch // the batches to send after the one in flight, in order
}

// batch is commits of one group sent as one script.
type batch struct {
	tok     fence.Token
	keys    []string // the script's KEYS: the floor, the log, the write's keys
	items   []*item
	count   int  // commands
	strings int  // the strings of their commands, the counts included
	sent    bool // taken off the waiting list to be sent (under Store.mu)
}

// item is one commit of a batch.
type item struct {
	ctx      context.Context
	args     []any // its commands as the script takes them: each its number of strings, then the strings
	w        *Write
	done     chan error  // its answer (one, buffered)
	answered atomic.Bool // an answer was put on done
	left     bool        // its caller returned before its answer (under Store.mu)
	panicked any         // a panic its caller raises instead of returning (set before done)
}

// commands is how many commands the commit runs.
func (it *item) commands() int { return len(it.w.Commands) }

// answer puts the commit's answer on done.
func (it *item) answer(err error) {
	it.answered.Store(true)
	it.done <- err
}

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
	it := &item{ctx: ctx, args: cmds, w: w, done: make(chan error, 1)}
	gk := groupKey(tok, w.Keys)
	s.mu.Lock()
	if s.groups == nil {
		s.groups = map[string]*group{}
	}
	g := s.groups[gk]
	if g == nil {
		g = &group{}
		s.groups[gk] = g
		b := s.newBatch(tok, floorKey, logKey, w.Keys, it)
		b.sent = true
		s.mu.Unlock()
		s.sendFirst(gk, g, b)
		return <-it.done
	}
	var b *batch
	if n := len(g.waiting); n > 0 {
		b = g.waiting[n-1]
		if b.count+it.commands() > MaxCommands || b.strings+len(it.args) > maxBatchStrings {
			b = nil
		}
	}
	if b == nil {
		b = s.newBatch(tok, floorKey, logKey, w.Keys, it)
		g.waiting = append(g.waiting, b)
	} else {
		b.add(it)
	}
	if s.joined != nil {
		s.joined()
	}
	s.mu.Unlock()
	return s.wait(it, b)
}

// wait returns the answer of it, a commit of b, or returns when its
// context ends first: with the context's error if b was not sent (it
// leaves b), else with an *OutcomeUnknownError.
func (s *Store) wait(it *item, b *batch) error {
	select {
	case err := <-it.done:
		return it.result(err)
	case <-it.ctx.Done():
	}
	s.mu.Lock()
	select {
	case err := <-it.done:
		s.mu.Unlock()
		return it.result(err)
	default:
	}
	it.left = true
	sent := b.sent
	if !sent {
		b.remove(it)
	}
	s.mu.Unlock()
	if !sent {
		return it.ctx.Err()
	}
	return &OutcomeUnknownError{Err: it.ctx.Err()}
}

// result is the commit's answer err, or the panic its batch raised.
func (it *item) result(err error) error {
	if it.panicked != nil {
		panic(it.panicked)
	}
	return err
}

func (s *Store) newBatch(tok fence.Token, floorKey, logKey string, wkeys []string, it *item) *batch {
	keys := make([]string, 0, 2+len(wkeys))
	keys = append(keys, floorKey, logKey)
	keys = append(keys, wkeys...)
	b := &batch{tok: tok, keys: keys}
	b.add(it)
	return b
}

func (b *batch) add(it *item) {
	b.items = append(b.items, it)
	b.count += it.commands()
	b.strings += len(it.args)
}

func (b *batch) remove(it *item) {
	b.items = slices.DeleteFunc(b.items, func(x *item) bool { return x == it })
	b.count -= it.commands()
	b.strings -= len(it.args)
}

// sendFirst sends b, a lone commit, in its caller's goroutine and with its
// context, then hands the group's waiting batches to a driver.
// A panic while b runs (a go-redis hook's) answers its commit, hands the
// group on as well, and goes on in this goroutine.
func (s *Store) sendFirst(gk string, g *group, b *batch) {
	defer func() {
		if p := recover(); p != nil {
			s.failed(b, p, false)
			s.handOn(gk, g)
			panic(p)
		}
	}()
	s.runBatch(b.items[0].ctx, b)
	s.handOn(gk, g)
}

// handOn starts a driver for group g's waiting batches, or ends the group.
func (s *Store) handOn(gk string, g *group) {
	if !s.endIfIdle(gk, g) {
		go s.drive(gk, g)
	}
}

// drive sends group g's waiting batches in order until none is left, and
// ends the group. Before taking each batch off the list it lets the
// goroutines the last answers woke run first
// (runtime.Gosched): callers that commit again at once then find the group
// still busy and join the batch about to be sent, instead of the first of
// them finding it idle and sending its commit alone. (With nothing else to
// run, a Gosched costs tens of microseconds of CPU: the scheduler wakes
// another thread to look for work. A lone commit with none waiting after
// it does not pay it.)
func (s *Store) drive(gk string, g *group) {
	for {
		runtime.Gosched()
		b := s.next(gk, g)
		if b == nil || !s.sendDriven(gk, g, b) {
			return
		}
		if len(b.items) == 1 && s.endIfIdle(gk, g) {
			return
		}
	}
}

// endIfIdle ends group g if no batch waits, and reports whether it did.
func (s *Store) endIfIdle(gk string, g *group) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(g.waiting) > 0 {
		return false
	}
	delete(s.groups, gk)
	return true
}

// next takes group g's first waiting batch off the list, without the
// commits whose context has ended (each answered with its context's
// error: nothing of it is sent), or ends the group when none is left.
func (s *Store) next(gk string, g *group) *batch {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(g.waiting) > 0 {
		b := g.waiting[0]
		g.waiting = g.waiting[1:]
		b.sent = true
		for _, it := range slices.Clone(b.items) {
			if err := it.ctx.Err(); err != nil {
				b.remove(it)
				it.answer(err)
			}
		}
		if len(b.items) > 0 {
			return b
		}
	}
	delete(s.groups, gk)
	return nil
}

// sendDriven runs b in the group's driver. A panic while it runs (a
// go-redis hook's) answers b's commits not yet answered with an error,
// starts another driver for the group's waiting batches, and goes on in
// the goroutine of b's first commit still waiting (as it would have, had
// that commit sent b), or in the driver if none is.
func (s *Store) sendDriven(gk string, g *group, b *batch) (ok bool) {
	defer func() {
		if p := recover(); p != nil {
			carried := s.failed(b, p, true)
			go s.drive(gk, g)
			if !carried {
				panic(p)
			}
		}
	}()
	s.runBatch(context.WithoutCancel(b.items[0].ctx), b)
	return true
}

// failed answers b's commits not yet answered after a panic p while b ran;
// with carry, the first of them still waiting raises p instead (reporting
// whether one did).
func (s *Store) failed(b *batch, p any, carry bool) (carried bool) {
	err := fmt.Errorf("redisfence: the commit's batch was not answered: a panic while it ran: %v", p)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, it := range b.items {
		if it.answered.Load() {
			continue
		}
		if carry && !carried && !it.left {
			it.panicked, carried = p, true
		}
		it.answer(err)
	}
	return carried
}

// runBatch runs the commits of b as one script and answers each as outcome
// would answer it alone. The script's commands are the commits' in order,
// so its reply names the commit it stopped at: "stale" (nothing ran) is
// the first commit's refusal; "invalid" (nothing ran) is that commit's;
// "failed" is that commit's, and the ones before it ran. The commits the
// script did not run are then sent again alone, in order, so that each
// refusal is logged on its own, before the group's next batch is sent.
// It is sent with ctx: a lone commit's own context, or a context no
// member's end cancels (see above).
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
			it.answer(e)
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
		b.items[0].answer(s.outcome(tok, reply, b.items[0].w))
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
				it.answer(s.outcome(tok, []any{kind, c + 1, reply[2]}, it.w))
			case k < i && kind == "failed":
				it.answer(nil)
			default:
				alone(it)
			}
		}
	default:
		for _, it := range b.items {
			it.answer(s.outcome(tok, reply, it.w))
		}
	}
}
