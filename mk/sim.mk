# Proof under faults: the deterministic simulator, porcupine histories and
# fuzzing (core/sim). `make test` runs test-sim; `make soak` and `make fuzz`
# run longer.
TESTS += test-sim

SIM_SEEDS       ?= 10000
SOAK_FROM       ?= 10000
SOAK_SEEDS      ?= 200000
SOAK_MODE       ?=
FUZZTIME        ?= 60s
# A new interesting input is minimized for up to a minute by default, during
# which the fuzzer makes no progress; keep it short.
FUZZ_MINIMIZE   ?= 2s

.PHONY: test-sim soak fuzz

# 10,000 seeds of the simulator with fenced agents, the naive comparison, the
# linearizability checks (in process and over HTTP), the committed fuzz
# corpus as regression tests, and a brief run of each core/sim fuzz target.
test-sim:
	$(GO) test -count=1 ./core/sim -args -seeds=$(SIM_SEEDS) -naiveseeds=2000
	$(GO) test -count=1 ./test/httpcheck
	$(call fuzz_brief,FuzzOps,./core/sim,50000x)
	$(call fuzz_brief,FuzzSimSeed,./core/sim,2500x)

# Many more seeds than make test, starting where it stops, with a progress
# line; SOAK_MODE=-naive counts overlapping writes of the naive lease instead.
soak:
	$(GO) run ./cmd/simulate -from $(SOAK_FROM) -n $(SOAK_SEEDS) $(SOAK_MODE)

# Every fuzz target of every package, found with go test -list, each for
# FUZZTIME.
fuzz:
	@set -e; for pkg in $$($(GO) list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' ./...); do \
	  for target in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "fuzz: $$pkg $$target for $(FUZZTIME)"; \
	    $(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZ_MINIMIZE) $$pkg; \
	  done; \
	done

BENCH += bench-sim
.PHONY: bench-sim
# Seeds per second, events and invariant evaluations per run, and porcupine's
# time per history.
bench-sim:
	$(GO) test -run '^$$' -bench . -benchtime 2000x ./core/sim
