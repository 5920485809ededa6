# gates/: the fence gate inside other stores, and the conformance suite
# every gate passes (gates/gatetest, run by each gate's own test):
# gates/sqlfence against a SQLite file and a real PostgreSQL server that the
# tests start in a temporary directory (test/rig/pgtest; scripts/setup.sh
# installs Debian's postgresql), with writer processes and a SIGKILLed one.
# gates/redisfence against a real redis-server the tests start on a free
# port (test/rig/redistest: AOF with appendfsync always; killed with SIGKILL
# and restarted in a test). A missing PostgreSQL or redis-server fails the
# suite. core/fence itself is in test-core; gatetest runs the suite against
# it too.
TESTS += test-gates test-gates-js
BENCH += bench-sqlfence

.PHONY: test-gates test-gates-js test-sqlfence bench-sqlfence

# gates/httpfence is left to test-proxy, which runs its tests with -race.
test-gates:
	$(GO) test -count=1 $$($(GO) list ./gates/... | grep -v '/gates/httpfence') ./test/rig/...

# The JavaScript gates (lease-fence/sql, lease-fence/redis, and FenceGate)
# against the JavaScript conformance suite, with real servers started by
# the Go helpers above, and a Go writer and a JavaScript writer sharing one
# floor.
test-gates-js: build-wasm
	node --test test/gates/

test-sqlfence:
	$(GO) test -count=1 ./gates/sqlfence/ ./test/rig/pgtest/...

# Commits per second with 1 and 8 writers on SQLite and PostgreSQL, fenced
# next to the same write without fencing, interleaved in one run, with
# min/median/max (durable settings: PostgreSQL with fsync, SQLite in WAL with
# synchronous=FULL); then the check-and-raise upsert against the three
# statements it replaced (BenchmarkFloorStatements). About three minutes.
bench-sqlfence:
	GO=$(GO) ./scripts/bench-sqlfence.sh

# Commits per second through the gates in databases, next to the same write
# unfenced on the same store, 1 and 8 writers, Go and JavaScript side by
# side, interleaved in one run (PostgreSQL with fsync, SQLite in WAL with
# synchronous=FULL, Redis with appendfsync always); min/median/max over
# rounds and the load. A few minutes: `make bench-gates
# BENCH_GATES_ARGS="5 400 40"` (rounds, commits a side, chunk); add
# `--baseline REV` to measure the gates of git revision REV as a third side
# of each configuration (a change against its predecessor, in one run), and
# `--only REGEX` to keep some configurations.
BENCH += bench-gates
BENCH_GATES_ARGS ?= 5 400 40
.PHONY: bench-gates
# Then Redis's bytes, AOF bytes and CPU per commit of lease-fence/redis
# (scripts/bench-redis-bytes.mjs), and redisfence alone in Go: fenced, the
# RPUSH alone, the script with the commit marker (AtMostOnce), each commit
# with a deadline on its context, a script a commit (a key per writer:
# groups of one) and the script looking every command up, alternating in
# chunks of 20 (five runs), with each side's commits per script.
bench-gates: build-wasm
	node scripts/bench-gates.mjs $(BENCH_GATES_ARGS)
	node scripts/bench-redis-bytes.mjs
	uptime
	$(GO) test -run '^$$' -bench CommitInterleaved -benchtime 600x -count 5 ./gates/redisfence/ | grep '^Benchmark'
	uptime
