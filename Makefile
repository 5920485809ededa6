# lease-fence. `make playground` and `make test` are the two commands the
# README starts with; each part of the project adds its targets in mk/*.mk.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO        ?= go
GOROOT    := $(shell $(GO) env GOROOT)
# go_js_wasm_exec lives here; GOOS=js tests need it on PATH.
export PATH := $(GOROOT)/lib/wasm:$(CURDIR)/node_modules/.bin:$(PATH)
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
# GOOS=js tests, vet and staticcheck: -trimpath, as the shipped wasm builds
# have, so an empty build cache compiles the standard library and the
# dependencies once for js, not twice (about 75 s of CPU for the standard
# library alone). The wasm builds pass the flag on their command line: built
# with it in GOFLAGS, lease-fence.wasm came out with the commit stamped in.
GO_JS     := GOOS=js GOARCH=wasm GOFLAGS=-trimpath

# Brief fuzz runs in `make test` are bounded by executions, never by seconds:
# with a -fuzztime duration, Go 1.26's fuzz coordinator can fail a clean run
# with "context deadline exceeded" as the time runs out (go.dev/issue/75804,
# fixed in Go 1.27). Each starts from the seeds and the committed corpus
# (testdata/fuzz) alone, in a cache of its own emptied first: Go's shared
# fuzz cache keeps every input a run finds interesting (FuzzSimSeed adds
# hundreds) and replays them all before fuzzing, so a run from it grows
# slower with every run on the machine. `make fuzz` keeps that cache.
# Use as: $(call fuzz_brief,FuzzName,./pkg,1000x)
FUZZ_BRIEF := -count=1 -run '^$$' -fuzzminimizetime 200x
# Two recipe lines: scripts/check-test-targets.sh runs every `go test` line
# of the recipes (with a stand-in go) while make test runs, so the line that
# empties a cache must not be one of them.
define fuzz_brief
rm -rf $(CURDIR)/out/fuzzcache/$(1)
$(GO) test $(FUZZ_BRIEF) -fuzz '^$(1)$$' -fuzztime $(3) $(2) -args -test.fuzzcachedir=$(CURDIR)/out/fuzzcache/$(1)
endef

# Each mk/*.mk appends to these.
BUILD :=
TEST_PREP :=
TESTS :=
BENCH :=

include $(sort $(wildcard mk/*.mk))

.PHONY: help build test deps lint bench clean
help:
	@echo "make playground   build and serve the playground on 127.0.0.1"
	@echo "make test         install test dependencies and run every test"
	@echo "make build        build the wasm module, the Worker and the commands"
	@echo "make bench        run the benchmarks and print figures"
	@echo "make lint         go vet, staticcheck, gofmt, every Go package's tests in a target"

build: $(BUILD)

# deps installs what the tests need: npm packages from package-lock.json and
# Debian's chromium when it is missing.
deps:
	./scripts/setup.sh

# The suites run TEST_JOBS at a time. Most of a suite's time is spent
# waiting on fsync, child processes and timers (its CPU time is a third of
# its wall time or less), so four at a time keep the two cores busy where
# two left them idle. Each suite starts its own servers on port 0 in
# temporary directories, so they do not meet. Output is kept per suite
# (--output-sync) so a failure reads whole.
TEST_JOBS ?= 4

# The suites start longest first, so that no long one starts last and runs
# alone at the end; those not named here follow in the order of mk/*.mk.
# Their times: docs/benchmarks.md, "Test suite times".
TEST_ORDER := test-web-explainer test-web-axe test-worker-e2e test-web-live test-svcclient-hold-native test-web-edit \
  test-service-coordinator test-web-pages test-service-pgstore test-svcclient-hold-worker test-svcclient-node \
  test-web-redraw test-gates-js test-service-local test-svcclient-fetch test-console lint test-proxy test-js test-sim \
  test-cli test-core-race test-gates test-wasm-fuzz-go test-core-js test-consumers lint-service lint-pg-drill \
  test-proxy-js
TEST_GOALS = $(foreach t,$(TEST_ORDER),$(filter $(t),lint $(TESTS))) $(filter-out $(TEST_ORDER),lint $(TESTS))

# What the suites need built (make build, the dev server, and TEST_PREP:
# what a suite's recipe needs made first) is built first and then taken as
# made (-o): a suite whose prerequisites are still
# being built when make reaches it is put off until make has gone through
# every other goal, which would start the longest suites last.
TEST_BUILDS = $(BUILD) devserver $(TEST_PREP)

test: deps
	$(MAKE) --no-print-directory -j$(TEST_JOBS) $(TEST_BUILDS)
	$(MAKE) --no-print-directory -j$(TEST_JOBS) --output-sync=target $(addprefix -o ,$(TEST_BUILDS)) $(TEST_GOALS)
	@echo "make test: all suites passed"

lint:
	@out=$$(find . -name '*.go' -not -path './node_modules/*' -not -path './.git/*' -print0 | xargs -0 gofmt -l); \
	  if [ -n "$$out" ]; then echo "not gofmt'ed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO_JS) $(GO) vet ./...
	GOBIN=$(CURDIR)/out/bin $(GO) install $(STATICCHECK)
	out/bin/staticcheck ./...
	$(GO_JS) out/bin/staticcheck ./...
	GO=$(GO) scripts/check-test-targets.sh $(TESTS)

bench: $(BENCH)

clean:
	rm -rf out
