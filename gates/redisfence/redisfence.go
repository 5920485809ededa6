// Package redisfence is the fence gate inside Redis: the fence check, the
// raise of the floor, the refusal log and the caller's write run as one Lua
// script on the server, so nothing can come between them, whatever process
// or machine the writers run in.
//
// The caller's write is a list of Redis commands on keys it declares, all
// in the resource's hash slot (use Key to name them), so a Store works on a
// single Redis and on Redis Cluster alike. Store.Commit is the method most
// callers want:
//
//	err := store.Commit(ctx, lease.Token(), redisfence.Write{
//		Keys:     []string{redisfence.Key("deploy-slot", "config")},
//		Commands: [][]string{{"HSET", redisfence.Key("deploy-slot", "config"), "version", "42"}},
//	})
//
// Per resource r the Store keeps, under its prefix (default "lease-fence:"),
// the floor (a hash <prefix>{r}:floor with fence, holder and the count of
// refusals) and the newest MaxRejections refusals (a list
// <prefix>{r}:rejections). With Options.AtMostOnce it also writes a
// short-lived marker per commit (<prefix>{r}:commit:<id>) that makes a
// commit run at most once and lets the Store find out how it ended when the
// connection broke.
//
// A command that fails inside the script: Redis does not undo the commands
// before it. So every command is checked before anything changes (it must
// exist, be allowed in scripts, name at least one key, and only declared
// keys; otherwise Commit returns an *ArgumentError and nothing changed), and
// a command that still fails when it runs (a wrong type, a value that is
// not a number) stops the write there: the commands before it stay applied,
// the ones after it do not run, the floor stays raised to the write's
// fence (the store may hold part of the write, so an older fence must not
// write after it, as with the in-memory gate), and Commit returns a
// *CommandError naming the command.
//
// Concurrent commits of one token that declare the same keys share
// scripts (a group commit): while one is in flight, those that arrive wait
// and go together as the next script, their commands in order after one
// check, and each is still answered as it would be alone, whatever its
// context. Every commit of a Store with AtMostOnce goes one script each.
package redisfence

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lease-fence/lease-fence/core/fence"
)

// The scripts' one source: lease-fence/redis sends the same files' text
// (wasm/js/gate-texts.mjs is generated from them).
//
//go:embed fence.lua
var script string

//go:embed page.lua
var pageScript string

var pageLua = redis.NewScript(pageScript)

// Script is the Lua script a Store runs for every commit and admit. It
// starts with a #!lua line, so it needs Redis 7.0 or later.
func Script() string { return script }

// PageScript is the read-only Lua script RejectionsAfter runs.
func PageScript() string { return pageScript }

var fenceScript = redis.NewScript(script)

// Limits on one write.
const (
	MaxCommands        = 256  // commands in one write
	MaxKeys            = 256  // keys one write declares
	MaxArgsPerCommand  = 1024 // strings in one command, its name included
	DefaultPrefix      = "lease-fence:"
	DefaultMarkerTTL   = time.Minute
	maxPrefixBytes     = 128
	markerIDBytes      = 16
	resolveAttempts    = 5
	resolveAttemptTime = 2 * time.Second
)

// Options configures a Store.
type Options struct {
	// Prefix starts every key the Store keeps: at most 128 bytes, without
	// '{' or '}'. Default "lease-fence:".
	Prefix string
	// MaxRejections is how many of the most recent refusals are kept per
	// resource: 1 to fence.MaxMaxRejections, or 0 for
	// fence.DefaultMaxRejections (1000). The count of refusals, and so the
	// sequence numbers, go on past it. Stores that share keys should agree
	// on it: each refusal trims the log to the refusing Store's value.
	MaxRejections int
	// AtMostOnce makes each commit write a marker with its outcome, kept
	// MarkerTTL: a retry of the same commit (go-redis retries a command
	// whose connection broke, unless MaxRetries is -1) is answered from the
	// marker instead of running again, and a Commit whose reply was lost
	// reads it to learn the outcome. Without it a commit writes one key and
	// a command less (the marker's SET), a Commit whose reply was lost
	// returns an *OutcomeUnknownError, and a client that sends a command
	// again after its connection broke may run the write twice (the fence
	// check still holds: a retry carries the same token).
	AtMostOnce bool
	// MarkerTTL is how long the marker of a commit is kept (AtMostOnce).
	// At least a second; 0 means one minute.
	MarkerTTL time.Duration
}

// Store is a fence gate kept in Redis. It is safe for concurrent use, and
// any number of Stores, in any number of processes, may guard the same
// resources: the script runs alone on the server.
type Store struct {
	rdb       redis.Cmdable
	prefix    string
	maxRej    int
	markerTTL time.Duration // 0 without AtMostOnce

	mu     sync.Mutex
	groups map[string]*group // the groups with a script in flight (batch.go)
	joined func()            // tests: called when a commit joins a waiting batch
}

// Write is what Commit writes: commands run in order, inside the script,
// after the fence check.
type Write struct {
	// Keys are every key the commands touch. Each must be in the resource's
	// hash slot (Key(resource, name) is) and must not start with the
	// Store's own <prefix>{resource}: namespace.
	Keys []string
	// Commands, each its name and its arguments, e.g.
	// {"HSET", key, "field", "value"}. At least one.
	Commands [][]string
}

func argError(arg, reason string) error {
	return &fence.ArgumentError{Pkg: "redisfence", Arg: arg, Reason: reason}
}

// Open returns a Store over rdb (a *redis.Client, *redis.ClusterClient or
// anything else that is a redis.Cmdable). It sends nothing: the script is
// loaded on first use.
func Open(rdb redis.Cmdable, opts Options) (*Store, error) {
	if rdb == nil {
		return nil, argError("rdb", "must not be nil")
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	switch {
	case len(opts.Prefix) > maxPrefixBytes:
		return nil, argError("options.prefix", "must be at most 128 bytes")
	case strings.ContainsAny(opts.Prefix, "{}"):
		return nil, argError("options.prefix", "must not contain '{' or '}' (they would change the keys' hash slot)")
	case opts.MaxRejections < 0 || opts.MaxRejections > fence.MaxMaxRejections:
		return nil, argError("options.maxRejections", "must be from 1 to "+strconv.Itoa(fence.MaxMaxRejections)+", or 0 for the default")
	case opts.MarkerTTL != 0 && opts.MarkerTTL < time.Second:
		return nil, argError("options.markerTTL", "must be at least a second, or 0 for the default")
	}
	if opts.MaxRejections == 0 {
		opts.MaxRejections = fence.DefaultMaxRejections
	}
	if opts.MarkerTTL == 0 {
		opts.MarkerTTL = DefaultMarkerTTL
	}
	if !opts.AtMostOnce {
		opts.MarkerTTL = 0
	}
	return &Store{rdb: rdb, prefix: opts.Prefix, maxRej: opts.MaxRejections, markerTTL: opts.MarkerTTL}, nil
}

// Tag returns the hash tag of resource: "{resource}", with '%', '{' and '}'
// written as %25, %7B and %7D so that any resource name makes a tag of its
// own. Every key of a resource's write must hash to the slot of this tag.
func Tag(resource string) string {
	if !strings.ContainsAny(resource, "%{}") {
		return "{" + resource + "}"
	}
	r := strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")
	return "{" + r.Replace(resource) + "}"
}

// Key returns a key for the caller's data of resource, in its hash slot:
// Tag(resource) + ":" + name, e.g. "{deploy-slot}:config".
func Key(resource, name string) string { return Tag(resource) + ":" + name }

func (s *Store) keys(resource string) (floor, log, base string) {
	base = s.prefix + Tag(resource) + ":"
	return base + "floor", base + "rejections", base
}

// Commit runs w's commands inside one script together with the fence check
// and the raise of the floor:
//
//   - nil: every command ran; the floor is at least tok.Fence.
//   - *fence.StaleFenceError: tok.Fence was below the floor; no command
//     ran; the refusal (both holders, both fences, a per-resource Seq) was
//     added to the log.
//   - *fence.ArgumentError: the token or the write was invalid (see Write
//     and the limits); nothing changed.
//   - *CommandError: the write was admitted and a command failed as it ran:
//     the floor is raised, the commands before it ran, the rest did not.
//   - *DBError: Redis could not be reached or refused the script before it
//     ran: nothing changed.
//   - *CorruptKeyError: one of the Store's own keys of the resource holds
//     what the Store did not write (a key of another type, a floor whose
//     fence is not a number): the script refused before changing anything.
//   - *OutcomeUnknownError: the connection broke after the script was sent
//     (without Options.AtMostOnce), or Redis could not be asked how it
//     ended (with it), or ctx ended while the script was in flight (see
//     below); the write may or may not have happened.
//   - the context's error, if ctx was done before anything of the commit
//     was sent.
//
// With Options.AtMostOnce, when the connection breaks after the script was
// sent, Commit settles the outcome before returning: it writes the commit's
// marker as "aborted" unless the script already wrote it, so the script, if
// it arrives late, does nothing; then the marker tells how the commit ended.
//
// Without AtMostOnce, commits of one token declaring the same keys (in the
// same order) are a group, whatever their contexts: the first is sent at
// once, alone, with its own context; those made while a script of the
// group is in flight wait, and go as one script when it has been answered
// (at most MaxCommands commands a script). The script runs their commands
// in order after one check, so each commit gets the answer it would get
// alone: a refusal is the first commit's, a refused or a failed command is
// that commit's (the commits before a failed one ran), and the commits the
// script did not run are sent again alone, in order, so that each refusal
// is logged on its own. A lost reply is an *OutcomeUnknownError for each
// commit of the script. Commit returns once its own script has been
// answered, so what a caller does after it comes after its write.
//
// A commit that waits in a group and whose ctx ends (a deadline, a
// cancel) returns at once: with the context's error if its script was not
// sent yet (it leaves the group: nothing of it is sent, and the others go
// without it), or with an *OutcomeUnknownError wrapping the context's
// error if the script was in flight (as a commit alone gets when go-redis,
// with ContextTimeoutEnabled, cuts the reply at the deadline). The script
// is not cut: it is sent with context.WithoutCancel of its first commit's
// context (its values; no deadline, so the client's ReadTimeout and
// WriteTimeout bound it), and the others get their answers. The first
// commit of an idle group waits for no one: its context goes to the
// client with its script, as any command's (go-redis cuts the reply at
// the context's deadline, an *OutcomeUnknownError, only with
// ContextTimeoutEnabled).
//
// With AtMostOnce every commit is a script of its own: its marker names
// one commit and holds that commit's outcome, and a lost reply is settled
// by marking that one commit aborted.
func (s *Store) Commit(ctx context.Context, tok fence.Token, w Write) error {
	if len(w.Commands) == 0 {
		return argError("write.commands", "must hold at least one command (use Admit to raise the floor without writing)")
	}
	return s.run(ctx, tok, &w)
}

// Admit raises the floor of tok's resource to tok.Fence without writing, so
// a coordinator can push the new generation at reassignment. A token below
// the floor is refused and logged like a stale Commit.
func (s *Store) Admit(ctx context.Context, tok fence.Token) error {
	return s.run(ctx, tok, nil)
}

func (s *Store) check(ctx context.Context) error {
	switch {
	case s == nil || s.rdb == nil:
		return argError("store", "is nil or was not made by Open")
	case ctx == nil:
		return argError("ctx", "must not be nil")
	}
	return nil
}

func (s *Store) run(ctx context.Context, tok fence.Token, w *Write) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if err := tok.Validate(); err != nil {
		return err
	}
	floorKey, logKey, base := s.keys(tok.Resource)
	var cmds []any
	if w != nil {
		var err error
		if cmds, err = checkWrite(tok.Resource, base, w); err != nil {
			return err
		}
		if s.markerTTL == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			return s.join(ctx, tok, floorKey, logKey, w, cmds)
		}
	}
	keys := []string{floorKey, logKey}
	markKey := ""
	if s.markerTTL != 0 {
		id := make([]byte, markerIDBytes)
		_, _ = rand.Read(id)
		markKey = base + "commit:" + hex.EncodeToString(id)
		keys = append(keys, markKey)
	}
	args := make([]any, 0, 5+len(cmds))
	args = append(args, tok.HolderID, strconv.FormatUint(tok.Fence, 10), s.maxRej, s.markerTTL.Milliseconds(), 0)
	if w != nil {
		keys = append(keys, w.Keys...)
		args[4] = len(w.Commands)
		args = append(args, cmds...)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	reply, err := fenceScript.Run(ctx, s.rdb, keys, args...).Slice()
	if err != nil {
		if sentNothing(err) {
			return &DBError{Op: "commit", Err: err}
		}
		if markKey == "" {
			return &OutcomeUnknownError{Err: err}
		}
		return s.resolve(ctx, tok, markKey, err)
	}
	return s.outcome(tok, reply, w)
}

// checkWrite checks w and returns its commands as the script's arguments
// take them: each its number of strings, then the strings.
func checkWrite(resource, base string, w *Write) ([]any, error) {
	switch {
	case len(w.Commands) > MaxCommands:
		return nil, argError("write.commands", "must hold at most "+strconv.Itoa(MaxCommands)+" commands")
	case len(w.Keys) > MaxKeys:
		return nil, argError("write.keys", "must hold at most "+strconv.Itoa(MaxKeys)+" keys")
	}
	slot := Slot(base)
	for i, k := range w.Keys {
		arg := "write.keys[" + strconv.Itoa(i) + "]"
		switch {
		case k == "":
			return nil, argError(arg, "must not be empty")
		case strings.HasPrefix(k, base):
			return nil, argError(arg, "is in the gate's own namespace "+strconv.Quote(base))
		case Slot(k) != slot:
			return nil, argError(arg, strconv.Quote(k)+" is not in the hash slot of resource "+strconv.Quote(resource)+": name it with redisfence.Key")
		}
	}
	n := 0
	for i, c := range w.Commands {
		arg := "write.commands[" + strconv.Itoa(i) + "]"
		switch {
		case len(c) == 0 || c[0] == "":
			return nil, argError(arg, "must start with a command name")
		case len(c) > MaxArgsPerCommand:
			return nil, argError(arg, "must hold at most "+strconv.Itoa(MaxArgsPerCommand)+" strings")
		}
		n += 1 + len(c)
	}
	args := make([]any, 0, n)
	for _, c := range w.Commands {
		args = append(args, len(c))
		for _, a := range c {
			args = append(args, a)
		}
	}
	return args, nil
}

// sentNothing reports whether err means the script was never sent: no
// connection could be made or had from the pool.
func sentNothing(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		// Redis answered with an error, so the script did not run (OOM,
		// BUSY, LOADING, READONLY, a cluster redirection ...): the
		// script's own refusals are replies, not errors.
		return true
	}
	return errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrClosed)
}

// resolve settles a commit whose reply was lost: it marks the commit
// aborted unless the script already marked it, then reads the marker.
func (s *Store) resolve(ctx context.Context, tok fence.Token, markKey string, cause error) error {
	bg := context.WithoutCancel(ctx)
	for i := range resolveAttempts {
		c, cancel := context.WithTimeout(bg, resolveAttemptTime)
		set, err := s.rdb.SetNX(c, markKey, "aborted", s.markerTTL).Result()
		var v string
		if err == nil && !set {
			v, err = s.rdb.Get(c, markKey).Result()
		}
		cancel()
		if err == nil {
			if set {
				return &DBError{Op: "commit", Err: cause}
			}
			return s.marker(tok, v, cause)
		}
		if i+1 < resolveAttempts {
			t := time.NewTimer(time.Duration(10<<i) * time.Millisecond)
			<-t.C
		}
	}
	return &OutcomeUnknownError{Err: cause}
}

// outcome turns the script's reply into Commit's result.
func (s *Store) outcome(tok fence.Token, reply []any, w *Write) error {
	str := func(i int) string {
		if i < len(reply) {
			switch v := reply[i].(type) {
			case string:
				return v
			case int64:
				return strconv.FormatInt(v, 10)
			}
		}
		return ""
	}
	switch str(0) {
	case "ok":
		return nil
	case "stale":
		return s.stale(tok, str(1), str(2), str(3))
	case "invalid":
		i, _ := strconv.Atoi(str(1))
		return argError("write.commands["+strconv.Itoa(i-1)+"]", str(2))
	case "failed":
		i, _ := strconv.Atoi(str(1))
		return commandError(tok, w, i-1, str(2))
	case "replay":
		return s.marker(tok, str(1), nil)
	case "corrupt":
		return &CorruptKeyError{Key: str(1), Reason: str(2)}
	}
	return &DBError{Op: "commit", Err: errors.New("unexpected reply from the script")}
}

// marker turns a commit's marker into Commit's result.
func (s *Store) marker(tok fence.Token, v string, cause error) error {
	kind, rest, _ := strings.Cut(v, ":")
	switch kind {
	case "ok":
		return nil
	case "stale":
		seq, rest, _ := strings.Cut(rest, ":")
		floor, holder, _ := strings.Cut(rest, ":")
		return s.stale(tok, seq, floor, holder)
	case "failed":
		i, msg, _ := strings.Cut(rest, ":")
		n, _ := strconv.Atoi(i)
		return commandError(tok, nil, n-1, msg)
	case "aborted":
		if cause == nil {
			cause = errors.New("the commit was settled as not run")
		}
		return &DBError{Op: "commit", Err: cause}
	}
	return &OutcomeUnknownError{Err: errors.New("redisfence: unknown commit marker " + strconv.Quote(v))}
}

func (s *Store) stale(tok fence.Token, seq, floor, holder string) error {
	q, _ := strconv.ParseUint(seq, 10, 64)
	f, _ := strconv.ParseUint(floor, 10, 64)
	return &fence.StaleFenceError{Rejection: fence.Rejection{
		Seq: q, Resource: tok.Resource, RefusedHolderID: tok.HolderID, RefusedFence: tok.Fence,
		AdmittedHolderID: holder, AdmittedFence: f,
	}}
}

func commandError(tok fence.Token, w *Write, i int, msg string) error {
	e := &CommandError{Resource: tok.Resource, Fence: tok.Fence, Index: i, Err: msg}
	if w != nil && i >= 0 && i < len(w.Commands) {
		e.Command = w.Commands[i][0]
	}
	return e
}

// CommandError is returned when a write was admitted and one of its
// commands failed as it ran. The floor was raised to Fence (and stays
// raised: Redis does not undo the commands before this one, so the store
// may hold part of the write), commands 0 to Index-1 ran, and Index and the
// ones after it did not.
type CommandError struct {
	Resource string
	Fence    uint64
	Index    int    // the failed command, counted from 0
	Command  string // its name ("" when learnt from the marker)
	Err      string // Redis's error
}

func (e *CommandError) Error() string {
	return "redisfence: write to " + strconv.Quote(e.Resource) + " at fence " + strconv.FormatUint(e.Fence, 10) +
		" admitted, but command " + strconv.Itoa(e.Index) + " " + e.Command + " failed (the commands before it ran, the rest did not): " + e.Err
}

// CorruptKeyError is returned when one of the Store's own keys (a
// resource's floor or rejection log) holds something the Store did not
// write: a key of another type, a fence or a refusal count that is not a
// number, a log that is not made of whole refusals. The script refuses
// before changing anything, and the resource takes no write until the key
// is repaired or deleted (deleting the floor forgets it: an older fence is
// then admitted).
type CorruptKeyError struct {
	Key    string
	Reason string // what is wrong with it, or Redis's error about it
}

func (e *CorruptKeyError) Error() string {
	return "redisfence: the gate's key " + strconv.Quote(e.Key) + " holds what the gate did not write (" + e.Reason + "); nothing was changed"
}

// wrongType turns a WRONGTYPE error from reading one of the Store's keys
// into a *CorruptKeyError.
func wrongType(key string, err error) error {
	var rerr redis.Error
	if errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "WRONGTYPE") {
		return &CorruptKeyError{Key: key, Reason: rerr.Error()}
	}
	return nil
}

// DBError is a failure to reach Redis, or an error Redis answered instead
// of running the script. The write did not happen and nothing changed.
type DBError struct {
	Op  string
	Err error
}

func (e *DBError) Error() string { return "redisfence: " + e.Op + " did not happen: " + e.Err.Error() }

// Unwrap returns the client's error.
func (e *DBError) Unwrap() error { return e.Err }

// OutcomeUnknownError is returned when the connection broke after the
// script was sent and Redis could not be asked afterwards. The write may or
// may not have happened; read the floor and your keys to find out.
type OutcomeUnknownError struct{ Err error }

func (e *OutcomeUnknownError) Error() string {
	return "redisfence: the commit's outcome is unknown: " + e.Err.Error()
}

// Unwrap returns the client's error.
func (e *OutcomeUnknownError) Unwrap() error { return e.Err }

func (s *Store) checkQuery(ctx context.Context, resource string) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	switch {
	case resource == "":
		return argError("resource", "must not be empty")
	case len(resource) > fence.MaxIDBytes:
		return argError("resource", "must be at most "+strconv.Itoa(fence.MaxIDBytes)+" bytes")
	}
	return nil
}

// Floor returns the highest fence admitted for resource (0 if none has been).
func (s *Store) Floor(ctx context.Context, resource string) (uint64, error) {
	if err := s.checkQuery(ctx, resource); err != nil {
		return 0, err
	}
	floorKey, _, _ := s.keys(resource)
	v, err := s.rdb.HGet(ctx, floorKey, "fence").Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		if ce := wrongType(floorKey, err); ce != nil {
			return 0, ce
		}
		return 0, &DBError{Op: "reading the floor", Err: err}
	}
	f, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, &CorruptKeyError{Key: floorKey, Reason: "its fence field is not a decimal number"}
	}
	return f, nil
}

// Rejections returns the most recent refusals for resource (at most
// MaxRejections of them), oldest first.
func (s *Store) Rejections(ctx context.Context, resource string) ([]fence.Rejection, error) {
	if err := s.checkQuery(ctx, resource); err != nil {
		return nil, err
	}
	_, logKey, _ := s.keys(resource)
	v, err := s.rdb.LRange(ctx, logKey, 0, -1).Result()
	return rejections(resource, logKey, v, err)
}

// MaxRejectionsPage is the largest limit RejectionsAfter takes.
const MaxRejectionsPage = fence.MaxRejectionsPage

// RejectionsAfter returns a page of resource's refusals: those kept whose
// Seq is above after, oldest first, at most limit (1 to MaxRejectionsPage)
// of them, read in one step (a script) so that a refusal trimming the log
// meanwhile cannot shift the page. Start with after 0 and pass the last Seq
// of each page to get the next; a page shorter than limit is the end of the
// log as it was then. Refusals trimmed from the log (beyond MaxRejections)
// are gone: a page starts at the oldest one kept.
func (s *Store) RejectionsAfter(ctx context.Context, resource string, after uint64, limit int) ([]fence.Rejection, error) {
	if err := s.checkQuery(ctx, resource); err != nil {
		return nil, err
	}
	switch {
	case after > fence.MaxFence:
		// Sequence numbers count refusals; Lua reads numbers as doubles.
		return nil, argError("after", "must be at most "+strconv.FormatUint(fence.MaxFence, 10))
	case limit < 1 || limit > MaxRejectionsPage:
		return nil, argError("limit", "must be from 1 to "+strconv.Itoa(MaxRejectionsPage))
	}
	_, logKey, _ := s.keys(resource)
	v, err := pageLua.Run(ctx, s.rdb, []string{logKey}, strconv.FormatUint(after, 10), limit).StringSlice()
	return rejections(resource, logKey, v, err)
}

// rejections parses elements of a rejection log (five per refusal).
func rejections(resource, logKey string, v []string, err error) ([]fence.Rejection, error) {
	if err != nil {
		if ce := wrongType(logKey, err); ce != nil {
			return nil, ce
		}
		return nil, &DBError{Op: "reading rejections", Err: err}
	}
	if len(v)%5 != 0 {
		return nil, &CorruptKeyError{Key: logKey, Reason: "is not a list of whole refusals"}
	}
	out := make([]fence.Rejection, 0, len(v)/5)
	for i := 0; i+5 <= len(v); i += 5 {
		seq, e1 := strconv.ParseUint(v[i], 10, 64)
		rf, e2 := strconv.ParseUint(v[i+2], 10, 64)
		af, e3 := strconv.ParseUint(v[i+4], 10, 64)
		if errors.Join(e1, e2, e3) != nil {
			return nil, &CorruptKeyError{Key: logKey, Reason: "refusal " + strconv.Itoa(i/5) + " has a field that is not a decimal number"}
		}
		out = append(out, fence.Rejection{Seq: seq, Resource: resource, RefusedHolderID: v[i+1], RefusedFence: rf, AdmittedHolderID: v[i+3], AdmittedFence: af})
	}
	return out, nil
}
