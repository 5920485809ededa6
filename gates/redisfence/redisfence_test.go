//go:build !js

package redisfence_test

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lease-fence/lease-fence/core/fence"
	"github.com/lease-fence/lease-fence/gates/redisfence"
)

// Slot agrees with the Redis Cluster specification's examples.
func TestSlot(t *testing.T) {
	for key, want := range map[string]int{
		"123456789":            0x31C3 & 16383,
		"{user1000}.following": redisfence.Slot("user1000"),
		"foo{}{bar}":           redisfence.Slot("foo{}{bar}"),
		"foo{{bar}}zap":        redisfence.Slot("{bar"),
		"foo{bar}{zap}":        redisfence.Slot("bar"),
	} {
		if got := redisfence.Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
	if redisfence.Slot("foo{}{bar}") == redisfence.Slot("bar") {
		t.Error("an empty tag must hash the whole key")
	}
	// Any resource name, braces included, gives keys in one slot.
	for _, r := range []string{"deploy-slot", "a}b", "}x", "{", "%7D", "a{b}c"} {
		k := redisfence.Key(r, "data")
		if redisfence.Slot(k) != redisfence.Slot("lease-fence:"+redisfence.Tag(r)+":floor") {
			t.Errorf("resource %q: key %q is not in the floor's slot", r, k)
		}
	}
	if redisfence.Tag("a}b") == redisfence.Tag("a%7Db") {
		t.Error("Tag is not one-to-one")
	}
}

// Writes the script cannot run as declared are refused before anything
// changes: unknown commands, commands not allowed in scripts, commands
// without keys, undeclared keys, keys in another slot or in the gate's own
// namespace, and out-of-range options.
func TestBadWritesChangeNothing(t *testing.T) {
	s, rdb, ns := newStore(t, redisfence.Options{})
	tok := fence.Token{Resource: "deploy-slot", HolderID: "agent-a", Fence: 5}
	k := redisfence.Key("deploy-slot", ns+"data")
	must(t, s.Commit(bg, tok, redisfence.Write{Keys: []string{k}, Commands: [][]string{{"SET", k, "v1"}}}))
	bad := []struct {
		name string
		w    redisfence.Write
		text string
	}{
		{"NoCommands", redisfence.Write{Keys: []string{k}}, "write.commands"},
		{"EmptyCommand", redisfence.Write{Keys: []string{k}, Commands: [][]string{{}}}, "command name"},
		{"UnknownCommand", redisfence.Write{Keys: []string{k}, Commands: [][]string{{"SET", k, "v2"}, {"NOSUCHCMD", k}}}, "not a command"},
		// A name spanning two entries of the script's list (SET's and
		// SETEX's, whose arity it has) is no known command either.
		{"SpanningName", redisfence.Write{Keys: []string{k}, Commands: [][]string{{"SET", k, "v2"}, {"SET:-3:1:1:1 SETEX", k, "10", "v"}}}, "not a command"},
		{"WrongArity", redisfence.Write{Keys: []string{k}, Commands: [][]string{{"SET", k, "v2"}, {"SET", k}}}, "number of arguments"},
		{"NotInScripts", redisfence.Write{Keys: []string{k}, Commands: [][]string{{"SET", k, "v2"}, {"WATCH", k}}}, "not allowed in a script"},
		{"NoKeys", redisfence.Write{Keys: []string{k}, Commands: [][]string{{"SET", k, "v2"}, {"FLUSHALL", "ASYNC"}}}, "no key"},
		{"NoKeysNoArgs", redisfence.Write{Keys: []string{k}, Commands: [][]string{{"SET", k, "v2"}, {"FLUSHALL"}}}, "write.commands[1]"},
		{"Publish", redisfence.Write{Keys: []string{k}, Commands: [][]string{{"SET", k, "v2"}, {"PUBLISH", "c", "m"}}}, "no key"},
		{"UndeclaredKey", redisfence.Write{Keys: []string{k}, Commands: [][]string{{"SET", k, "v2"}, {"SET", redisfence.Key("deploy-slot", "other"), "x"}}}, "did not declare"},
		{"OtherSlot", redisfence.Write{Keys: []string{"plain-key"}, Commands: [][]string{{"SET", "plain-key", "x"}}}, "hash slot"},
		{"GateNamespace", redisfence.Write{Keys: []string{ns + redisfence.Tag("deploy-slot") + ":floor"}, Commands: [][]string{{"DEL", ns + redisfence.Tag("deploy-slot") + ":floor"}}}, "own namespace"},
		{"EmptyKey", redisfence.Write{Keys: []string{""}, Commands: [][]string{{"SET", k, "x"}}}, "must not be empty"},
		{"TooManyArgs", redisfence.Write{Keys: []string{k}, Commands: [][]string{append([]string{"RPUSH", k}, make([]string, redisfence.MaxArgsPerCommand)...)}}, "at most"},
	}
	for _, b := range bad {
		for _, f := range []uint64{6, 1} { // admitted / stale, were it valid
			tk := tok
			tk.Fence = f
			err := s.Commit(bg, tk, b.w)
			var ae *fence.ArgumentError
			if !errors.As(err, &ae) || !strings.Contains(err.Error(), b.text) {
				t.Errorf("%s (fence %d): err = %v, want an argument error saying %q", b.name, f, err, b.text)
			}
		}
		if v, _ := rdb.Get(bg, k).Result(); v != "v1" {
			t.Fatalf("%s: the data changed to %q", b.name, v)
		}
		if f, _ := s.Floor(bg, "deploy-slot"); f != 5 {
			t.Fatalf("%s: floor moved to %d", b.name, f)
		}
		if r, _ := s.Rejections(bg, "deploy-slot"); len(r) != 0 {
			t.Fatalf("%s: refusal logged: %v", b.name, r)
		}
	}
	for _, o := range []redisfence.Options{{Prefix: "a{b"}, {Prefix: strings.Repeat("p", 129)}, {MaxRejections: -1}, {MaxRejections: fence.MaxMaxRejections + 1}, {MarkerTTL: 1}} {
		if _, err := redisfence.Open(rdb, o); err == nil {
			t.Errorf("Open(%+v) accepted", o)
		}
	}
	if _, err := redisfence.Open(nil, redisfence.Options{}); err == nil {
		t.Error("Open(nil) accepted")
	}
	if _, err := s.Floor(bg, ""); err == nil {
		t.Error("Floor(\"\") accepted")
	}
	if _, err := s.Rejections(bg, strings.Repeat("r", fence.MaxIDBytes+1)); err == nil {
		t.Error("Rejections of an oversized resource accepted")
	}
}

// A command that fails as it runs stops the write there: the ones before it
// stay, the ones after it do not run, the floor stays raised, and the
// error names the command.
func TestCommandFailsMidWrite(t *testing.T) {
	s, rdb, ns := newStore(t, redisfence.Options{})
	a, b, c := redisfence.Key("r", ns+"a"), redisfence.Key("r", ns+"b"), redisfence.Key("r", ns+"c")
	must(t, rdb.Set(bg, b, "not a number", 0).Err())
	err := s.Commit(bg, fence.Token{Resource: "r", HolderID: "h", Fence: 3}, redisfence.Write{
		Keys:     []string{a, b, c},
		Commands: [][]string{{"SET", a, "1"}, {"INCR", b}, {"SET", c, "3"}},
	})
	var ce *redisfence.CommandError
	if !errors.As(err, &ce) || ce.Index != 1 || ce.Command != "INCR" || ce.Fence != 3 || !strings.Contains(ce.Err, "not an integer") {
		t.Fatalf("err = %v", err)
	}
	if v, _ := rdb.Get(bg, a).Result(); v != "1" {
		t.Errorf("the command before the failure did not stay: %q", v)
	}
	if n, _ := rdb.Exists(bg, c).Result(); n != 0 {
		t.Error("a command after the failure ran")
	}
	if f, _ := s.Floor(bg, "r"); f != 3 {
		t.Errorf("floor %d, want 3", f)
	}
}

// A script that arrives after its commit was settled as aborted does
// nothing: the marker answers it.
func TestLateScriptAfterAbortDoesNothing(t *testing.T) {
	_, rdb, ns := newStore(t, redisfence.Options{})
	base := ns + redisfence.Tag("r") + ":"
	mark := base + "commit:0123"
	must(t, rdb.Set(bg, mark, "aborted", 0).Err())
	k := redisfence.Key("r", ns+"v")
	reply, err := rdb.Eval(bg, redisfence.Script(), []string{base + "floor", base + "rejections", mark, k},
		"h", "7", 1000, 60000, 1, 3, "SET", k, "late").Slice()
	if err != nil || len(reply) != 2 || reply[0] != "replay" || reply[1] != "aborted" {
		t.Fatalf("reply %v, %v", reply, err)
	}
	if n, _ := rdb.Exists(bg, k, base+"floor").Result(); n != 0 {
		t.Fatal("the late script wrote")
	}
}

// cutProxy sits between a client and the server and cuts the first
// connection that sends a script (after skip scripts passed on), once:
// after forwarding it (the script runs, its reply is lost) or instead of
// forwarding it.
type cutProxy struct {
	l       net.Listener
	target  string
	forward bool
	mu      sync.Mutex
	skip    int // scripts to pass on before the one cut
	cut     bool
}

func newCutProxy(t *testing.T, forward bool) *cutProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	p := &cutProxy{l: l, target: srv.Addr(), forward: forward}
	t.Cleanup(func() { l.Close() })
	go p.serve()
	return p
}

func (p *cutProxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		go p.pipe(c)
	}
}

func (p *cutProxy) pipe(c net.Conn) {
	defer c.Close()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer up.Close()
	// cutHere: this connection sent the script; what the server answers
	// from then on is the script's reply, dropped with the connection.
	var cutHere atomic.Bool
	replied := make(chan struct{})
	go func() {
		defer close(replied)
		b := make([]byte, 64<<10)
		for {
			n, err := up.Read(b)
			if n > 0 && cutHere.Load() {
				c.Close()
				return
			}
			if n > 0 {
				if _, err := c.Write(b[:n]); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return
		}
		chunk := buf[:n]
		p.mu.Lock()
		cutNow := !p.cut && strings.Contains(strings.ToUpper(string(chunk)), "EVAL")
		if cutNow && p.skip > 0 {
			p.skip--
			cutNow = false
		}
		if cutNow {
			p.cut = true
		}
		p.mu.Unlock()
		if cutNow {
			cutHere.Store(true)
			if p.forward {
				// Let the script run, then drop the connection before
				// its reply can come back.
				_, _ = up.Write(chunk)
				<-replied // the reply has started, and was not passed on
			}
			up.Close()
			c.Close()
			return
		}
		if _, err := up.Write(chunk); err != nil {
			return
		}
	}
}

// Without AtMostOnce a script writes no marker (KEYS[3] is the caller's
// first key when the marker's time to live is 0), and a commit whose reply
// was lost is an *OutcomeUnknownError, whether the script ran or not.
func TestNoMarkerWithoutAtMostOnce(t *testing.T) {
	s, rdb, ns := newStore(t, redisfence.Options{})
	k := redisfence.Key("r", ns+"v")
	must(t, s.Commit(bg, fence.Token{Resource: "r", HolderID: "h", Fence: 2}, redisfence.Write{Keys: []string{k}, Commands: [][]string{{"SET", k, "a"}}}))
	if keys, _ := rdb.Keys(bg, ns+"*commit:*").Result(); len(keys) != 0 {
		t.Fatalf("markers written without AtMostOnce: %v", keys)
	}
	for _, forward := range []bool{true, false} {
		p := newCutProxy(t, forward)
		cut := client(t, p.l.Addr().String(), func(o *redis.Options) { o.MaxRetries = -1 })
		s, err := redisfence.Open(cut, redisfence.Options{Prefix: ns})
		must(t, err)
		must(t, cut.Ping(bg).Err())
		l := redisfence.Key("r", ns+"list"+strconv.FormatBool(forward))
		err = s.Commit(bg, fence.Token{Resource: "r", HolderID: "h", Fence: 2}, redisfence.Write{Keys: []string{l}, Commands: [][]string{{"RPUSH", l, "once"}}})
		var ou *redisfence.OutcomeUnknownError
		if n, _ := rdb.LLen(bg, l).Result(); !errors.As(err, &ou) || n != map[bool]int64{true: 1, false: 0}[forward] {
			t.Fatalf("forwarded %v: err = %v, %d copies", forward, err, n)
		}
	}
}

// With AtMostOnce, a commit whose connection breaks is settled, not
// guessed: the script ran and its reply was lost (nil, and the write is
// there once), or it never reached the server (a *DBError, nothing
// written, and a late arrival could not run). With go-redis's own retries
// on, a retried script is answered from its marker instead of running
// twice.
func TestLostReplySettled(t *testing.T) {
	for _, tc := range []struct {
		name    string
		forward bool
		retries int
	}{
		{"RanNoRetry", true, -1},
		{"RanWithRetries", true, 3},
		{"NotSentNoRetry", false, -1},
		{"NotSentWithRetries", false, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newCutProxy(t, tc.forward)
			rdb := client(t, p.l.Addr().String(), func(o *redis.Options) { o.MaxRetries = tc.retries })
			_, direct, ns := newStore(t, redisfence.Options{})
			s, err := redisfence.Open(rdb, redisfence.Options{Prefix: ns, AtMostOnce: true})
			must(t, err)
			must(t, rdb.Ping(bg).Err()) // load nothing yet; connection made
			k := redisfence.Key("r", ns+"list")
			err = s.Commit(bg, fence.Token{Resource: "r", HolderID: "h", Fence: 4}, redisfence.Write{
				Keys: []string{k}, Commands: [][]string{{"RPUSH", k, "once"}},
			})
			n, _ := direct.LLen(bg, k).Result()
			switch {
			case tc.forward && (err != nil || n != 1):
				t.Fatalf("script ran: err = %v, %d copies of the write", err, n)
			case !tc.forward && tc.retries < 0:
				var de *redisfence.DBError
				if !errors.As(err, &de) || n != 0 {
					t.Fatalf("script not sent: err = %v, %d copies", err, n)
				}
			case !tc.forward && (err != nil || n != 1):
				// go-redis retried on a fresh connection: the write
				// happened once.
				t.Fatalf("retried: err = %v, %d copies", err, n)
			}
		})
	}
}

// A server that is gone gives a *DBError (nothing was sent), not a hang.
func TestServerDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr := l.Addr().String()
	l.Close()
	s, err := redisfence.Open(client(t, addr, func(o *redis.Options) { o.MaxRetries = -1 }), redisfence.Options{})
	must(t, err)
	err = s.Admit(bg, fence.Token{Resource: "r", HolderID: "h", Fence: 1})
	var de *redisfence.DBError
	if !errors.As(err, &de) {
		t.Fatalf("err = %v, want *redisfence.DBError", err)
	}
}

// dumpNamespace returns every key under ns (and the resource's data keys,
// which carry ns in their names) with its serialized value.
func dumpNamespace(t *testing.T, rdb *redis.Client, ns string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, pattern := range []string{ns + "*", "*" + ns + "*"} {
		keys, err := rdb.Keys(bg, pattern).Result()
		must(t, err)
		for _, k := range keys {
			v, err := rdb.Dump(bg, k).Result()
			must(t, err)
			out[k] = v
		}
	}
	return out
}

// One of the gate's own keys holding what the gate did not write (another
// type, a fence or a count that is not a number, a log of broken entries)
// is refused with a *CorruptKeyError naming it, before the script changes
// anything: no command runs, no marker is left, the floor and the log stay
// as they were. Reads of such a key say the same.
func TestCorruptGateKeysAreRefusedBeforeAnythingChanges(t *testing.T) {
	for _, c := range []struct {
		name    string
		key     string // "floor" or "log"
		corrupt func(rdb *redis.Client, floor, log string) error
		stale   bool // only a refusal (which writes the log) meets it
	}{
		{"FloorIsAString", "floor", func(rdb *redis.Client, floor, _ string) error { return rdb.Set(bg, floor, "7", 0).Err() }, false},
		{"FloorIsAList", "floor", func(rdb *redis.Client, floor, _ string) error { return rdb.RPush(bg, floor, "7").Err() }, false},
		{"FenceNotANumber", "floor", func(rdb *redis.Client, floor, _ string) error {
			return rdb.HSet(bg, floor, "fence", "seven", "holder", "h").Err()
		}, false},
		{"FenceNegative", "floor", func(rdb *redis.Client, floor, _ string) error {
			return rdb.HSet(bg, floor, "fence", "-7", "holder", "h").Err()
		}, false},
		{"CountNotANumber", "floor", func(rdb *redis.Client, floor, _ string) error {
			return rdb.HSet(bg, floor, "fence", "7", "holder", "h", "rejections", "x").Err()
		}, false},
		{"LogIsAString", "log", func(rdb *redis.Client, floor, log string) error {
			return errors.Join(rdb.HSet(bg, floor, "fence", "7", "holder", "h").Err(), rdb.Set(bg, log, "x", 0).Err())
		}, true},
		{"LogIsAHash", "log", func(rdb *redis.Client, floor, log string) error {
			return errors.Join(rdb.HSet(bg, floor, "fence", "7", "holder", "h").Err(), rdb.HSet(bg, log, "a", "b").Err())
		}, true},
		{"LogOfBrokenEntries", "log", func(rdb *redis.Client, floor, log string) error {
			return errors.Join(rdb.HSet(bg, floor, "fence", "7", "holder", "h").Err(), rdb.RPush(bg, log, "1", "a", "2").Err())
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, rdb, ns := newStore(t, redisfence.Options{})
			base := ns + redisfence.Tag("r") + ":"
			floor, log := base+"floor", base+"rejections"
			must(t, c.corrupt(rdb, floor, log))
			data := redisfence.Key("r", ns+"data")
			must(t, rdb.Set(bg, data, "before", 0).Err())
			want := map[string]string{"floor": floor, "log": log}[c.key]
			before := dumpNamespace(t, rdb, ns)
			fences := []uint64{9, 3}
			if c.stale {
				fences = []uint64{3}
			}
			for _, f := range fences {
				tok := fence.Token{Resource: "r", HolderID: "agent", Fence: f}
				for _, err := range []error{
					s.Commit(bg, tok, redisfence.Write{Keys: []string{data}, Commands: [][]string{{"SET", data, "after"}}}),
					s.Admit(bg, tok),
				} {
					var ce *redisfence.CorruptKeyError
					if !errors.As(err, &ce) || ce.Key != want || !strings.Contains(err.Error(), "nothing was changed") {
						t.Fatalf("fence %d: err = %v, want a *CorruptKeyError for %s", f, err, want)
					}
				}
				if after := dumpNamespace(t, rdb, ns); fmt.Sprint(after) != fmt.Sprint(before) {
					t.Fatalf("fence %d changed keys: %d before, %d after", f, len(before), len(after))
				}
			}
			var ce *redisfence.CorruptKeyError
			if c.key == "floor" && c.name != "CountNotANumber" {
				if _, err := s.Floor(bg, "r"); !errors.As(err, &ce) || ce.Key != floor {
					t.Errorf("Floor: %v", err)
				}
			}
			if c.key == "log" {
				if _, err := s.Rejections(bg, "r"); !errors.As(err, &ce) || ce.Key != log {
					t.Errorf("Rejections: %v", err)
				}
				if _, err := s.RejectionsAfter(bg, "r", 0, 10); !errors.As(err, &ce) || ce.Key != log {
					t.Errorf("RejectionsAfter: %v", err)
				}
			}
		})
	}
}

// RejectionsAfter's bounds, and a page read while refusals trim the log:
// every page holds consecutive sequence numbers above the one asked.
func TestRejectionsAfter(t *testing.T) {
	s, _, _ := newStore(t, redisfence.Options{MaxRejections: 4})
	for _, c := range []struct {
		after uint64
		limit int
	}{{0, 0}, {0, -1}, {0, redisfence.MaxRejectionsPage + 1}, {fence.MaxFence + 1, 1}} {
		if _, err := s.RejectionsAfter(bg, "r", c.after, c.limit); !isArgErr(err) {
			t.Errorf("RejectionsAfter(%d, %d) = %v, want an argument error", c.after, c.limit, err)
		}
	}
	if _, err := s.RejectionsAfter(bg, "", 0, 1); !isArgErr(err) {
		t.Errorf("an empty resource: %v", err)
	}
	must(t, s.Admit(bg, fence.Token{Resource: "r", HolderID: "new", Fence: 1000}))
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 200 {
			_ = s.Admit(bg, fence.Token{Resource: "r", HolderID: "old", Fence: uint64(i + 1)})
		}
	})
	for range 200 {
		page, err := s.RejectionsAfter(bg, "r", 0, 3)
		must(t, err)
		for i := 1; i < len(page); i++ {
			if page[i].Seq != page[i-1].Seq+1 {
				t.Fatalf("page %+v is not consecutive", page)
			}
		}
		if len(page) > 0 {
			next, err := s.RejectionsAfter(bg, "r", page[0].Seq, 2)
			must(t, err)
			if len(next) > 0 && next[0].Seq <= page[0].Seq {
				t.Fatalf("after %d: %+v", page[0].Seq, next)
			}
		}
	}
	wg.Wait()
	all, err := s.Rejections(bg, "r")
	must(t, err)
	if len(all) != 4 || all[3].Seq != 200 {
		t.Fatalf("the log keeps %+v", all)
	}
	page, err := s.RejectionsAfter(bg, "r", 0, 10)
	must(t, err)
	if fmt.Sprint(page) != fmt.Sprint(all) {
		t.Fatalf("after 0: %+v, want the oldest kept on: %+v", page, all)
	}
}

func isArgErr(err error) bool {
	var ae *fence.ArgumentError
	return errors.As(err, &ae)
}

// The commands whose arity and keys the script knows itself exist on the
// server, are allowed in scripts, take no keys elsewhere (movablekeys), and
// have the arity, first key, last key and step the script says, as COMMAND
// INFO itself says.
func TestScriptKnownCommandsAreTheServers(t *testing.T) {
	_, rest, ok := strings.Cut(redisfence.Script(), "local known = [[\n")
	list, _, ok2 := strings.Cut(rest, "]]\n")
	if !ok || !ok2 {
		t.Fatal("the script has no list of known commands")
	}
	entries := strings.Fields(list)
	if len(entries) != 51 {
		t.Fatalf("%d commands parsed from %q", len(entries), list)
	}
	// The script finds " NAME:" and reads up to the next space or line end.
	for _, e := range entries {
		if !strings.Contains(list, " "+e+" ") && !strings.Contains(list, " "+e+"\n") {
			t.Errorf("entry %q is not between a space and a space or line end in the list", e)
		}
	}
	rdb := client(t, srv.Addr())
	for _, e := range entries {
		f := strings.Split(e, ":")
		if len(f) != 5 {
			t.Fatalf("entry %q", e)
		}
		// The script reads each number as one digit after an optional '-'.
		for _, x := range f[1:] {
			if d := strings.TrimPrefix(x, "-"); len(d) != 1 || d[0] < '0' || d[0] > '9' {
				t.Errorf("entry %q: %q is not one digit after an optional '-'", e, x)
			}
		}
		info, err := rdb.Do(bg, "COMMAND", "INFO", f[0]).Slice()
		if err != nil || len(info) != 1 || info[0] == nil {
			t.Errorf("%s: COMMAND INFO %v %v", f[0], info, err)
			continue
		}
		c := info[0].([]any)
		got := fmt.Sprintf("%s:%d:%d:%d:%d", f[0], c[1], c[3], c[4], c[5])
		if got != e {
			t.Errorf("the script says %s, the server %s", e, got)
		}
		for _, fl := range c[2].([]any) {
			if fl == "noscript" || fl == "movablekeys" {
				t.Errorf("%s is %s", f[0], fl)
			}
		}
	}
}

// A known command with the wrong number of arguments, or an odd MSET, is
// refused before anything changes, as an unknown one is by the server.
func TestScriptChecksKnownCommandsArity(t *testing.T) {
	s, rdb, ns := newStore(t, redisfence.Options{})
	tok := fence.Token{Resource: "r", HolderID: "a", Fence: 3}
	k, k2 := redisfence.Key("r", ns+"a"), redisfence.Key("r", ns+"b")
	for _, cmd := range [][]string{{"INCR"}, {"INCR", k, "1"}, {"set", k}, {"MSET", k, "1", k2}, {"LMOVE", k, k2, "LEFT"}, {"HINCRBY", k, "f"}} {
		w := redisfence.Write{Keys: []string{k, k2}, Commands: [][]string{{"SET", k, "x"}, cmd}}
		err := s.Commit(bg, tok, w)
		var ae *fence.ArgumentError
		if !errors.As(err, &ae) || !strings.Contains(err.Error(), "number of arguments") {
			t.Errorf("%q: %v", cmd, err)
		}
	}
	if n, _ := rdb.Exists(bg, k).Result(); n != 0 {
		t.Error("a refused write ran its first command")
	}
	// The keys of known commands are where the server says: a second key
	// of MSET, LMOVE's destination, every key of DEL.
	for _, cmd := range [][]string{{"MSET", k, "1", "undeclared", "2"}, {"LMOVE", k, "undeclared", "LEFT", "RIGHT"}, {"DEL", k, "undeclared"}} {
		err := s.Commit(bg, tok, redisfence.Write{Keys: []string{k}, Commands: [][]string{cmd}})
		if err == nil || !strings.Contains(err.Error(), "did not declare: undeclared") {
			t.Errorf("%q: %v", cmd, err)
		}
	}
	must(t, s.Commit(bg, tok, redisfence.Write{Keys: []string{k, k2}, Commands: [][]string{{"MSET", k, "1", k2, "2"}, {"del", k2}, {"LPUSH", k2, "x"}, {"LMOVE", k2, k2, "LEFT", "RIGHT"}}}))
	// Many declared keys (the script makes them a set): each is declared,
	// and a key beside them is not.
	var many []string
	mset := []string{"MSET"}
	for i := range 12 {
		many = append(many, redisfence.Key("r", fmt.Sprintf("%smany%d", ns, i)))
		mset = append(mset, many[i], "v")
	}
	must(t, s.Commit(bg, tok, redisfence.Write{Keys: many, Commands: [][]string{mset, append([]string{"DEL"}, many...)}}))
	err := s.Commit(bg, tok, redisfence.Write{Keys: many, Commands: [][]string{{"DEL", many[11], "undeclared"}}})
	if err == nil || !strings.Contains(err.Error(), "did not declare: undeclared") {
		t.Errorf("DEL of an undeclared key beside 12 declared: %v", err)
	}
}
