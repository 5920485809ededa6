// Command mutate checks that the test suites catch careless changes. It
// applies named single-point breaks ("mutations") to core/ and to the gates
// one at a time, runs the mutation's suite for each (`make test-core` for
// core/; a gate's conformance suite for a gate), restores the file, and
// prints a table. A mutation is caught when the suite fails; one that
// survives is a hole in the tests. `make mutate` runs it from the
// repository root.
//
// Every mutation replaces one exact piece of source text that must occur
// exactly once in its file. If a pattern is missing or ambiguous (the code
// changed), the run stops before mutating anything and names it: a mutation
// is never skipped silently. A mutation that does not compile is reported as
// broken, not as caught.
//
// The file under mutation is restored after each run, when a run fails, and
// on SIGINT/SIGTERM (the tool restores and exits 130). Only SIGKILL leaves a
// mutation in place; `git diff core/` shows it.
//
// Usage:
//
//	go run ./scripts/mutate [-run regexp] [-list] [-timeout 2m]
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"
)

// A mutation replaces Old by New in File (relative to the repository root).
type mutation struct {
	Name  string
	File  string
	Old   string
	New   string
	Why   string // what the break does
	Suite string // the key in suites of the suite that must catch it; "" is "core"
}

// A suite is the command that must fail for a mutation to be caught, and
// the packages compiled (tests too) first, so that a mutation that does not
// build is reported as broken rather than caught.
type suite struct {
	cmd  []string
	pkgs []string
}

var suites = map[string]suite{
	"core": {cmd: []string{"make", "test-core"}, pkgs: corePkgs},
	// The PostgreSQL Store's conformance suite in this process (the rules
	// that show whether a raise waits for the writes in flight).
	"sqlfence": {
		cmd:  []string{"go", "test", "-count=1", "-run", "^TestConformance$/^Postgres$/^(RaiseWaitsForEqualWrites|FloorRaisedBeforeWrite|ConcurrentWriters)$", "./gates/sqlfence/"},
		pkgs: []string{"./gates/sqlfence/"},
	},
	// FenceGate.commitAsync against the JavaScript conformance suite and
	// its own tests of shared admission.
	"js-gate": jsSuite("FenceGate|share the gate", "test/gates/gates.test.mjs", "test/js/commit-async.test.mjs"),
	// lease-fence/sql against the JavaScript conformance rule.
	"js-sql": jsSuite("lease-fence/sql: raiseWaitsForEqualWrites", "test/gates/gates.test.mjs"),
}

// jsSuite is node --test over the test files, on the tests whose name
// matches pattern (the JavaScript gates use the wasm module that make
// build-wasm made; the mutations change only their JavaScript).
func jsSuite(pattern string, files ...string) suite {
	return suite{cmd: append([]string{"node", "--test", "--test-name-pattern=" + pattern}, files...)}
}

func (m mutation) suite() suite {
	if m.Suite == "" {
		return suites["core"]
	}
	return suites[m.Suite]
}

var mutations = []mutation{
	// core/clock
	{
		Name: "clock/guarded-reads-outside-lock", File: "core/clock/source.go",
		Old: "\tg.mu.Lock()\n\tdefer g.mu.Unlock()\n\tv := g.read()\n",
		New: "\tv := g.read()\n\tg.mu.Lock()\n\tdefer g.mu.Unlock()\n",
		Why: "the guarded clock reads its source before taking its lock",
	},
	{
		Name: "clock/guard-allows-small-backwards", File: "core/clock/source.go",
		Old: "case g.seen && v < g.last:", New: "case g.seen && v+1 < g.last:",
		Why: "a reading slightly lower than the last one is accepted",
	},
	{
		Name: "clock/manual-returns-stepped-value", File: "core/clock/source.go",
		Old: "\tm.now = next\n\treturn Instant{Millis: v, Domain: m.domain}, nil",
		New: "\tm.now = next\n\treturn Instant{Millis: next, Domain: m.domain}, nil",
		Why: "Manual.Now returns the value after the step",
	},
	{
		Name: "clock/stuck-step-accepted", File: "core/clock/source.go",
		Old: "func stuck(v, step float64) bool { return step > 0 && v+step == v }",
		New: "func stuck(v, step float64) bool { return false }",
		Why: "a step below the float spacing is accepted",
	},
	{
		Name: "clock/zero-manual-reads", File: "core/clock/source.go",
		Old: "func (m *Manual) Now() (Instant, error) {\n\tif m == nil || m.domain == \"\" {",
		New: "func (m *Manual) Now() (Instant, error) {\n\tif m == nil {",
		Why: "a zero Manual hands out readings with an empty domain",
	},
	{
		Name: "clock/since-ignores-domain", File: "core/clock/clock.go",
		Old: "func (t Instant) Since(earlier Instant) (float64, error) {\n\tif t.Domain != earlier.Domain {",
		New: "func (t Instant) Since(earlier Instant) (float64, error) {\n\tif false && t.Domain != earlier.Domain {",
		Why: "instants of two domains are subtracted",
	},
	// core/fence
	{
		Name: "fence/would-admit-strict", File: "core/fence/fence.go",
		Old: "return tok.Fence >= g.floor.Load(), nil", New: "return tok.Fence > g.floor.Load(), nil",
		Why: "WouldAdmit uses > instead of >= (refuses the floor's own generation)",
	},
	{
		Name: "fence/writes-not-serialized", File: "core/fence/fence.go",
		Old: "\tif f != g.floor.Load() || !g.claimed.Load() || !g.turn.CompareAndSwap(0, f<<2|lockHeld) {\n\t\t_ = g.lockSlow(tok, nil, nil) // waits for as long as it takes\n\t}\n\tdefer g.unlock(f, nil)\n", New: "\t_ = f\n",
		Why: "Commit runs writes without taking the gate's write lock",
	},
	{
		Name: "fence/admit-does-not-supersede", File: "core/fence/fence.go",
		Old: "\t\tif past {\n\t\t\tg.supersede(tok.HolderID, tok.Fence, false)\n\t\t}\n", New: "\t\t_ = past\n",
		Why: "an Admit past a running CommitContext write does not tell it",
	},
	{
		Name: "fence/waiter-does-not-supersede", File: "core/fence/turn.go",
		Old: "\tg.describeRunning()\n\tg.supersede(tok.HolderID, tok.Fence, true)\n", New: "\tg.describeRunning()\n",
		Why: "a newer write queueing behind a running CommitContext write does not tell it",
	},
	{
		Name: "fence/raise-joins-running", File: "core/fence/turn.go",
		Old: "if !g.exclusive && g.turn.Load()>>2 == f && len(g.waiters) == 0 {", New: "if !g.exclusive && len(g.waiters) == 0 {",
		Why: "a write with a higher fence runs alongside the running writes instead of waiting for them",
	},
	{
		Name: "fence/equal-joins-ahead-of-raise", File: "core/fence/turn.go",
		Old: "if !g.exclusive && g.turn.Load()>>2 == f && len(g.waiters) == 0 {", New: "if !g.exclusive && g.turn.Load()>>2 == f {",
		Why: "a write with the running fence joins it while a higher fence waits",
	},
	{
		Name: "fence/equal-fence-supersedes", File: "core/fence/turn.go",
		Old: "if !r.on || fence <= r.fence {", New: "if !r.on || fence < r.fence {",
		Why: "an equal fence (the same generation) supersedes a running write",
	},
	{
		Name: "fence/start-ignores-waiting-newer", File: "core/fence/turn.go",
		Old: "\t\tif x.fence > w.fence {\n\t\t\tg.supersede(x.holder, x.fence, true)", New: "\t\tif x.fence > w.fence {\n\t\t\t_ = x",
		Why: "a write that gets its turn while a newer fence waits behind it is not told",
	},
	{
		Name: "fence/signal-after-write-returned", File: "core/fence/turn.go",
		Old: "\tprev := g.run\n\tg.run = running{}\n", New: "\tprev := g.run\n",
		Why: "the gate keeps the record of a write that ended, so a newer fence reaches its context afterwards",
	},
	{
		Name: "fence/write-context-not-ended", File: "core/fence/fence.go",
		Old: "\t\twc.finish() // first: nothing is signalled once write has returned\n", New: "",
		Why: "a CommitContext write's context is not ended when the write returns",
	},
	{
		Name: "fence/busy-error-anonymous", File: "core/fence/turn.go",
		Old: "\t\t\terr := g.busy(tok, g.run, ctx.Err())\n", New: "\t\t\terr := ctx.Err()\n",
		Why: "a write that gives up waiting returns the bare context error, naming nothing",
	},
	{
		Name: "fence/busy-names-wrong-holder", File: "core/fence/turn.go",
		Old: "\tcase g.prevFence:\n\t\tholder = g.prevHolder\n", New: "",
		Why: "a write that an Admit overtook is named without its holder",
	},
	{
		Name: "fence/lock-free-context-not-caught-up", File: "core/fence/fence.go",
		Old: "\t\t\tg.catchUp(f)\n", New: "",
		Why: "a CommitContext on the lock-free path misses a newer fence that arrived before it published its context",
	},
	{
		Name: "fence/refusal-not-logged", File: "core/fence/fence.go",
		Old: "\t\tg.ring = append(g.ring, r)\n", New: "",
		Why: "a refused write is not appended to the rejections log",
	},
	{
		Name: "fence/fence-above-max-accepted", File: "core/fence/fence.go",
		Old: "tok.Fence == 0 || tok.Fence > MaxFence ||", New: "tok.Fence == 0 ||",
		Why: "a gate accepts fences above MaxFence",
	},
	// core/lease: the coordinator
	{
		Name: "lease/replay-cache-1023", File: "core/lease/coordinator.go",
		Old: "const ReplayCacheSize = 1024", New: "const ReplayCacheSize = 1023",
		Why: "the replay cache holds 1023 grants, not the spec's 1024",
	},
	{
		Name: "lease/coordinator-reads-clock-outside-lock", File: "core/lease/coordinator.go",
		Old: "\tc.mu.Lock()\n\tdefer c.mu.Unlock()\n\tpos, h, err := c.acquireCheck(&req)\n\tif err != nil {\n\t\treturn Outcome{}, err\n\t}\n\tnow, err := c.clk.Now()\n\tif err != nil {\n\t\treturn Outcome{}, err\n\t}\n",
		New: "\tnow, err := c.clk.Now()\n\tif err != nil {\n\t\treturn Outcome{}, err\n\t}\n\tc.mu.Lock()\n\tdefer c.mu.Unlock()\n\tpos, h, err := c.acquireCheck(&req)\n\tif err != nil {\n\t\treturn Outcome{}, err\n\t}\n",
		Why: "Acquire reads the coordinator's clock before taking its lock",
	},
	{
		Name: "lease/acquire-validates-after-reading", File: "core/lease/coordinator.go",
		Old: "\tif err := req.validate(KindAcquire); err != nil {\n\t\treturn Outcome{}, err\n\t}\n\tc.mu.Lock()\n\tdefer c.mu.Unlock()\n\tpos, h, err := c.acquireCheck(&req)\n\tif err != nil {\n\t\treturn Outcome{}, err\n\t}\n\tnow, err := c.clk.Now()\n\tif err != nil {\n\t\treturn Outcome{}, err\n\t}\n",
		New: "\tc.mu.Lock()\n\tdefer c.mu.Unlock()\n\tnow, err := c.clk.Now()\n\tif err != nil {\n\t\treturn Outcome{}, err\n\t}\n\tif err := req.validate(KindAcquire); err != nil {\n\t\treturn Outcome{}, err\n\t}\n\tpos, h, err := c.acquireCheck(&req)\n\tif err != nil {\n\t\treturn Outcome{}, err\n\t}\n",
		Why: "Acquire reads the clock before validating the request",
	},
	{
		Name: "lease/renew-checks-fence-after-reading", File: "core/lease/coordinator.go",
		Old: "\tif err := c.renewCheck(&req); err != nil {\n\t\treturn Outcome{}, err\n\t}\n\tnow, err := c.clk.Now()\n\tif err != nil {\n\t\treturn Outcome{}, err\n\t}\n",
		New: "\tnow, err := c.clk.Now()\n\tif err != nil {\n\t\treturn Outcome{}, err\n\t}\n\tif err := c.renewCheck(&req); err != nil {\n\t\treturn Outcome{}, err\n\t}\n",
		Why: "Renew reads the clock before refusing a fence never issued",
	},
	{
		Name: "lease/holder-records-reading", File: "core/lease/coordinator.go",
		Old: "\tr, ok := c.leases.find(resource, c.leases.tag(resource))\n\tif !ok || !r.rec().liveAt(now.Millis) {",
		New: "\tc.record(now)\n\tr, ok := c.leases.find(resource, c.leases.tag(resource))\n\tif !ok || !r.rec().liveAt(now.Millis) {",
		Why: "Holder, a query, records its reading",
	},
	{
		Name: "lease/observe-allows-backwards", File: "core/lease/coordinator.go",
		Old: "\tif c.seen && now.Millis < c.last {", New: "\tif false && c.seen && now.Millis < c.last {",
		Why: "the coordinator acts on a reading earlier than one it acted on",
	},
	{
		Name: "lease/second-lease-for-same-holder", File: "core/lease/rules.go",
		Old: "\tif s.LiveAt(now.Millis) {", New: "\tif s.LiveAt(now.Millis) && s.HolderID != req.HolderID {",
		Why: "a holder that already owns the lease is granted a second one",
	},
	{
		Name: "lease/renewal-resurrects-expired", File: "core/lease/rules.go",
		Old: "if s.HolderID != req.HolderID || s.Fence != req.Fence || !s.LiveAt(now.Millis) {",
		New: "if s.HolderID != req.HolderID || s.Fence != req.Fence {",
		Why: "an expired lease is renewed",
	},
	{
		Name: "lease/release-by-anyone", File: "core/lease/rules.go",
		Old: "if s.HolderID != tok.HolderID || s.Fence != tok.Fence || !s.LiveAt(now) {",
		New: "if s.Fence != tok.Fence || !s.LiveAt(now) {",
		Why: "a release by another holder ends the lease",
	},
	{
		Name: "lease/fence-not-incremented", File: "core/lease/rules.go",
		Old: "\ts.Issued++\n", New: "",
		Why: "a new acquisition reuses the last fence",
	},
	{
		Name: "lease/restore-accepts-future", File: "core/lease/coordinator.go",
		Old: "if l.ExpiresAt.Millis > now.Millis+c.ms {", New: "if l.ExpiresAt.Millis > now.Millis+2*c.ms {",
		Why: "Restore accepts a lease ending later than now+TTL",
	},
	{
		Name: "lease/restore-skips-replay-cache", File: "core/lease/coordinator.go",
		Old: "\tfor _, l := range replayed {", New: "\tfor _, l := range replayed[:0] {",
		Why: "restored leases are not put back in the replay cache",
	},
	{
		Name: "lease/regrant-keeps-old-entry", File: "core/lease/replay.go",
		Old: "\t\tr.ring[prev].retired = true\n", New: "",
		Why: "a request id granted again leaves its older cache entry findable",
	},
	{
		Name: "lease/table-delete-leaves-hole", File: "core/lease/table.go",
		Old: "\t\ttags[hole], recs[hole] = v, recs[j]\n\t\thole = j\n", New: "\t\tbreak\n",
		Why: "deleting a lease or forgetting a request breaks the probe run of the entries after it",
	},
	{
		Name: "lease/sweep-deletes-live", File: "core/lease/coordinator.go",
		Old: "return !h.liveAt(now) })", New: "return true })",
		Why: "a sweep deletes live leases too",
	},
	{
		Name: "lease/split-misroutes", File: "core/lease/table.go",
		Old: "\t\t\tif (uint(i)>>(t.depth-st.depth-1))&1 == 0 {", New: "\t\t\tif (uint(i)>>(t.depth-st.depth-1))&1 == 1 {",
		Why: "a split points the directory at the wrong half",
	},
	{
		Name: "lease/replay-overwrites-live-slot", File: "core/lease/replay.go",
		Old: "\t\tif r.stale(v) {\n", New: "\t\tif v != 0 {\n",
		Why: "an insertion into the replay index overwrites a live slot",
	},
	// core/lease: the client and the lease
	{
		Name: "lease/deadline-adds-skew", File: "core/lease/client.go",
		Old: "req.SentAt.AddMillis(clock.Millis(g.TTL) - c.skewMs)", New: "req.SentAt.AddMillis(clock.Millis(g.TTL) + c.skewMs)",
		Why: "the holder's deadline adds the clock skew instead of subtracting it",
	},
	{
		Name: "lease/anchor-from-future-accepted", File: "core/lease/client.go",
		Old: "\t\tif now.Millis > cur.Millis {", New: "\t\tif now.Millis > cur.Millis+1e12 {",
		Why: "BeginAcquireAt accepts a send instant later than the clock's reading",
	},
	{
		Name: "lease/second-completion-accepted", File: "core/lease/client.go",
		Old: "\tif ok && r.done {\n\t\treturn Lease{}, &CompletedError{", New: "\tif ok && r.done && false {\n\t\treturn Lease{}, &CompletedError{",
		Why: "a request completed twice is not reported as completed",
	},
	{
		Name: "lease/altered-request-accepted", File: "core/lease/client.go",
		Old: "return req.RequestID == r.id && req.Resource == r.resource && req.SentAt.Millis == r.millis &&",
		New: "return req.RequestID == r.id && req.SentAt.Millis == r.millis &&",
		Why: "a request whose resource was changed after it was begun completes",
	},
	{
		Name: "lease/completed-memory-1023", File: "core/lease/client.go",
		Old: "const completedMemory = 1024", New: "const completedMemory = 1023",
		Why: "a client remembers 1023 completed requests, not 1024",
	},
	// core/naive
	{
		Name: "naive/renewal-keeps-old-deadline", File: "core/naive/naive.go",
		Old: "\tl.expiresAt = now.Add(l.ttl)\n", New: "\tif l.expiresAt.Domain == \"\" {\n\t\tl.expiresAt = now.Add(l.ttl)\n\t}\n",
		Why: "the naive lease ignores renewals",
	},
	// gates/sqlfence
	{
		Name: "sqlfence/raise-joins-share", File: "gates/sqlfence/sqlfence.go", Suite: "sqlfence",
		Old: "\tcmp := \"=\"\n\tif broken {", New: "\tcmp := \"<=\"\n\tif broken {",
		Why: "a higher fence takes the share path: it runs alongside the writes in flight instead of waiting, and does not raise",
	},
	{
		Name: "sqlfence/share-without-advisory-lock", File: "gates/sqlfence/statements.sql", Suite: "sqlfence",
		Old: "pg_advisory_xact_lock_shared(hashtext('{floor}'), hashtext($1))::text AS locked", New: "''::text AS locked",
		Why: "an equal-fence write takes only the row's share lock, so one that arrives after a waiting raise runs before it",
	},
	{
		Name: "sqlfence/raise-skips-advisory-lock", File: "gates/sqlfence/sqlfence.go", Suite: "sqlfence",
		Old: "\t\t\terr = tx.StmtContext(ctx, s.raiseLock).QueryRowContext(ctx, tok.Resource).Scan(&n)\n", New: "\t\t\t_ = n\n",
		Why: "a raise waits only on the floor row, so equal-fence writes that arrive after it share the row ahead of it",
	},
	// wasm/js: FenceGate.commitAsync and lease-fence/sql
	{
		Name: "js/commitAsync-raise-joins", File: "wasm/js/gate.mjs", Suite: "js-gate",
		Old: "!this.#runTold && this.#runHolder === null && fence === this.#fence;", New: "!this.#runTold && this.#runHolder === null && fence >= this.#fence;",
		Why: "a commitAsync write with a higher fence starts alongside the running writes instead of waiting for them",
	},
	{
		Name: "js/commitAsync-joins-ahead-of-waiting", File: "wasm/js/gate.mjs", Suite: "js-gate",
		Old: "(head || this.#queue.length === 0) && !this.#runTold && ", New: "",
		Why: "a commitAsync write with the running fence joins it while a higher fence waits",
	},
	{
		Name: "js/sql-raise-joins-share", File: "wasm/js/sql.mjs", Suite: "js-sql",
		Old: "'{cmp}': '='", New: "'{cmp}': '<='",
		Why: "lease-fence/sql admits a higher fence through the share statement: it neither waits nor raises",
	},
	{
		Name: "js/sql-share-without-advisory-lock", File: "wasm/js/sql.mjs", Suite: "js-sql",
		Old: "const share = exclusive ? null : q('share');", New: "const share = exclusive ? null : q('share').replace(/pg_advisory_xact_lock_shared\\(.*?\\)\\)::text/, \"''::text\");",
		Why: "lease-fence/sql's equal-fence write takes only the row's share lock, so one that arrives after a waiting raise runs before it",
	},
}

// corePkgs are the packages `make test-core` tests (mk/core.mk).
var corePkgs = []string{"./core/clock/...", "./core/fence/...", "./core/lease/...", "./core/naive/...", "./core/argerr/..."}

func main() {
	runPat := flag.String("run", "", "run only the mutations whose name matches this regexp")
	list := flag.Bool("list", false, "list the mutations and exit")
	timeout := flag.Duration("timeout", 2*time.Minute, "go test -timeout for each run (a mutation that hangs fails its run)")
	flag.Parse()

	if *list {
		w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
		for _, m := range mutations {
			fmt.Fprintf(w, "%s\t%s\t%s\n", m.Name, m.File, m.Why)
		}
		w.Flush()
		return
	}
	selected := mutations
	if *runPat != "" {
		re, err := regexp.Compile(*runPat)
		if err != nil {
			fatal(err)
		}
		selected = nil
		for _, m := range mutations {
			if re.MatchString(m.Name) {
				selected = append(selected, m)
			}
		}
		if len(selected) == 0 {
			fatal(fmt.Errorf("no mutation matches %q", *runPat))
		}
	}

	originals, err := check(selected)
	if err != nil {
		fatal(err)
	}
	r := &restorer{originals: originals}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sig
		r.restoreAll()
		fmt.Fprintf(os.Stderr, "\nmutate: %v: restored %s, stopping\n", s, strings.Join(r.files(), ", "))
		cancelRuns() // run ends the program
	}()
	defer r.restoreAll()

	env := append(os.Environ(), "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -timeout="+timeout.String()))
	start := time.Now()
	seen := map[string]bool{}
	for _, m := range selected {
		cmd := m.suite().cmd
		if key := strings.Join(cmd, " "); !seen[key] {
			seen[key] = true
			fmt.Printf("mutate: the unmutated suite first: %s\n", key)
			if out, err := run(env, cmd[0], cmd[1:]...); err != nil {
				os.Stderr.Write(out)
				r.restoreAll()
				fatal(fmt.Errorf("%s fails without any mutation; fix that first", key))
			}
		}
	}

	type result struct {
		m       mutation
		verdict string
		secs    float64
		detail  string
	}
	var results []result
	survived, broken := 0, 0
	for i, m := range selected {
		fmt.Printf("mutate: [%d/%d] %s\n", i+1, len(selected), m.Name)
		t0 := time.Now()
		mutated := strings.Replace(string(originals[m.File]), m.Old, m.New, 1)
		r.write(m.File, []byte(mutated))
		verdict, detail := "caught", ""
		// Compile everything (tests too) without running a test: a mutation
		// that does not build would look caught.
		su := m.suite()
		compiled, cerr := []byte(nil), error(nil)
		if len(su.pkgs) != 0 { // JavaScript has nothing to compile first
			compiled, cerr = run(env, "go", append([]string{"test", "-count=1", "-run", "^$"}, su.pkgs...)...)
		}
		if cerr != nil {
			verdict, detail = "BROKEN", firstLines(compiled, 3)
			broken++
		} else if out, err := run(env, su.cmd[0], su.cmd[1:]...); err == nil {
			verdict = "SURVIVED"
			survived++
		} else {
			detail = firstFailure(out)
		}
		if err := r.restore(m.File); err != nil {
			fatal(err)
		}
		results = append(results, result{m, verdict, time.Since(t0).Seconds(), detail})
	}

	fmt.Println()
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "#\tmutation\tfile\tresult\tseconds\tfirst failure")
	for i, res := range results {
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%.1f\t%s\n", i+1, res.m.Name, res.m.File, res.verdict, res.secs, res.detail)
	}
	w.Flush()
	fmt.Printf("\n%d mutations: %d caught, %d survived, %d broken; %s in all\n",
		len(results), len(results)-survived-broken, survived, broken, time.Since(start).Round(time.Second))
	if survived > 0 || broken > 0 {
		r.restoreAll()
		os.Exit(1)
	}
}

// check reads every file the mutations touch and makes sure each pattern
// occurs exactly once and changes something. It returns the files' contents.
func check(ms []mutation) (map[string][]byte, error) {
	originals := map[string][]byte{}
	var problems []string
	for _, m := range ms {
		src, ok := originals[m.File]
		if !ok {
			b, err := os.ReadFile(m.File)
			if err != nil {
				return nil, fmt.Errorf("%s: %w (run from the repository root)", m.Name, err)
			}
			originals[m.File], src = b, b
		}
		switch n := strings.Count(string(src), m.Old); {
		case m.Old == m.New:
			problems = append(problems, m.Name+": the replacement is the same text")
		case n == 0:
			problems = append(problems, fmt.Sprintf("%s: pattern not found in %s (the code changed; update the mutation):\n%s", m.Name, m.File, indent(m.Old)))
		case n > 1:
			problems = append(problems, fmt.Sprintf("%s: pattern occurs %d times in %s; make it unique:\n%s", m.Name, n, m.File, indent(m.Old)))
		}
	}
	if len(problems) > 0 {
		return nil, errors.New("mutations that cannot be applied (nothing was changed):\n" + strings.Join(problems, "\n"))
	}
	return originals, nil
}

// restorer puts files back as they were.
type restorer struct {
	mu        sync.Mutex
	originals map[string][]byte
	dirty     map[string]bool
	ended     bool // restoreAll was called: write does nothing
}

func (r *restorer) write(file string, b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		return
	}
	if r.dirty == nil {
		r.dirty = map[string]bool{}
	}
	r.dirty[file] = true
	if err := os.WriteFile(file, b, 0o644); err != nil {
		r.restoreLocked()
		fatal(err)
	}
}

func (r *restorer) restore(file string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := os.WriteFile(file, r.originals[file], 0o644); err != nil {
		return err
	}
	if got, err := os.ReadFile(file); err != nil || !bytes.Equal(got, r.originals[file]) {
		return fmt.Errorf("%s was not restored (%v); restore it with git", file, err)
	}
	delete(r.dirty, file)
	return nil
}

// restoreAll restores every file written, for good: the program ends.
func (r *restorer) restoreAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ended = true
	r.restoreLocked()
}

func (r *restorer) restoreLocked() {
	for f := range r.dirty {
		if err := os.WriteFile(f, r.originals[f], 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "mutate: could not restore %s: %v\n", f, err)
			continue
		}
		delete(r.dirty, f)
	}
}

func (r *restorer) files() []string { return slices.Collect(maps.Keys(r.originals)) }

// runs is the context of the commands run: cancelling it interrupts the
// one in progress and kills it if it has not ended ten seconds later (so
// that no go test is left behind compiling or running a mutated tree),
// and then run ends the program.
var runs, cancelRuns = context.WithCancel(context.Background())

func run(env []string, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(runs, name, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if runs.Err() != nil {
		os.Exit(130)
	}
	if errors.Is(err, exec.ErrWaitDelay) {
		err = nil // it succeeded; a process it left holds its output
	}
	return out.Bytes(), err
}

// firstFailure returns the name of the first failing test in go test (or
// node --test) output.
func firstFailure(out []byte) string {
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.TrimSpace(line); strings.HasPrefix(f, "--- FAIL: ") {
			return strings.Fields(f)[2]
		}
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.TrimSpace(line); strings.HasPrefix(f, "not ok ") {
			if _, name, ok := strings.Cut(f, " - "); ok {
				return name
			}
		}
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "panic: test timed out") {
			return "timed out"
		}
	}
	return "(see the suite's output)"
}

func firstLines(out []byte, n int) string {
	lines := strings.SplitN(strings.TrimSpace(string(out)), "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " | ")
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "mutate:", err)
	os.Exit(2)
}
