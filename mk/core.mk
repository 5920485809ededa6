# The core Go library (core/clock, core/fence, core/lease, core/naive, and
# core/argerr, their one argument-error type):
# natively, with the race detector, and under GOOS=js (Node runs the test
# binary through go_js_wasm_exec, which the Makefile puts on PATH).
# core/sim and service/wire are tested by their own targets.
# make test runs test-core-race and not test-core: the same tests of the
# same packages, the race detector besides. test-core is what `make mutate`
# runs after each mutation (quicker without -race).
TESTS += test-core-race test-core-js
BENCH += bench-core

CORE_PKGS := ./core/clock/... ./core/fence ./core/lease/... ./core/naive/... ./core/argerr/...

.PHONY: test-core test-core-race test-core-js bench-core
test-core:
	$(GO) test -count=1 $(CORE_PKGS)

test-core-race:
	$(GO) test -count=1 -race $(CORE_PKGS)

test-core-js:
	$(GO_JS) $(GO) test -count=1 $(CORE_PKGS)

# Medians need several runs: `make bench-core BENCHCOUNT=10`. Each run is a
# separate `go test -count=1`, so the benchmarks that come in pairs (ours,
# then its baseline: BenchmarkCycle's coordinator and map+mutex at each
# number of held leases) alternate BENCHCOUNT times instead of running one
# side BENCHCOUNT times and then the other. BENCH_RE narrows the set, e.g.
# `make bench-core BENCH_RE=Cycle`. BenchmarkCycleInterleaved makes the
# same comparison inside one run, in alternating chunks, so that the noise of
# other processes falls on both sides alike.
BENCHCOUNT ?= 5
BENCH_RE   ?= .
bench-core:
	uptime
	for i in $$(seq $(BENCHCOUNT)); do \
	  $(GO) test -run '^$$' -bench '$(BENCH_RE)' -benchmem -count 1 $(CORE_PKGS) | grep -v '^ok\|^PASS\|^goos\|^goarch\|^cpu\|^pkg'; \
	done

# The mutation run (scripts/mutate): named single-point breaks of core/
# and of the gates, applied one at a time, each followed by its suite
# (`make test-core`, a gate's conformance rules); every one must be caught. Several minutes, so not part of `make test`, which only checks
# that every mutation still applies to the current source.
TESTS += test-mutate-patterns
.PHONY: mutate test-mutate-patterns
mutate:
	$(GO) run ./scripts/mutate

test-mutate-patterns:
	$(GO) test -count=1 ./scripts/mutate/
