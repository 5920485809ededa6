# LeaseServiceClient (wasm/js/service-client.mjs, docs/js.md "The service
# client"): tsc compiles the `await using` example in test/svcclient, then
# node --test runs the client against the native coordinator and the Worker
# under wrangler dev (started once, offline), on each transport (node:http,
# then fetch), and in Chromium: with tokens
# and TLS from a private CA that pkigen makes at run time
# (test/svcclient/tls.test.mjs), and from a page on another origin
# (-cors-origin; the Worker's LEASE_CORS_ORIGINS under a second wrangler
# dev: test/svcclient/cors.test.mjs).
# The two transports are separate targets, so that make test runs them side
# by side, and so is hold.test.mjs on node:http, the longest file (mostly
# real-time waits of its 5 s TTL), once for each coordinator;
# `make test-svcclient` runs them all.
TESTS += test-svcclient-node test-svcclient-hold-native test-svcclient-hold-worker test-svcclient-fetch

# Built with make build before the suites start (TEST_PREP: see the
# Makefile), so that test-svcclient-node, the longest, starts first.
TEST_PREP += svcclient-prep

SVCCLIENT_ENV = COORDINATOR=$(CURDIR)/out/bin/coordinator PKIGEN=$(CURDIR)/out/bin/pkigen

.PHONY: test-svcclient test-svcclient-node test-svcclient-hold-native test-svcclient-hold-worker test-svcclient-fetch svcclient-prep soak-hold
test-svcclient: test-svcclient-node test-svcclient-hold-native test-svcclient-hold-worker test-svcclient-fetch

svcclient-prep: build-wasm coordinator worker
	$(GO) build -o out/bin/pkigen ./test/rig/testpki/pkigen
	tsc -p test/svcclient/tsconfig.json

# node --test runs one file at a time on two cores (its default is one less
# than the cores); these files mostly wait (on timers, child processes and
# their servers, each its own on port 0, with resource names of their own),
# so three run side by side.
SVCCLIENT_JOBS ?= 3

SVCCLIENT_HOLD := test/svcclient/hold.test.mjs
test-svcclient-node: svcclient-prep
	$(SVCCLIENT_ENV) SVCCLIENT_TRANSPORT=node node --test --test-concurrency=$(SVCCLIENT_JOBS) $(filter-out $(SVCCLIENT_HOLD),$(wildcard test/svcclient/*.test.mjs))
# The two runs of hold.test.mjs draw the same seeds as one run against both
# would (a seed depends on the run and the coordinator only).
test-svcclient-hold-native: svcclient-prep
	$(SVCCLIENT_ENV) SVCCLIENT_TRANSPORT=node SVCCLIENT_TARGETS=native node --test $(SVCCLIENT_HOLD)
test-svcclient-hold-worker: svcclient-prep
	$(SVCCLIENT_ENV) SVCCLIENT_TRANSPORT=node SVCCLIENT_TARGETS=worker node --test $(SVCCLIENT_HOLD)

# The files whose clients run in Node, run again on the fetch transport
# (test/svcclient/transport.mjs), against the native coordinator only
# (SVCCLIENT_TARGETS): what the transport does with an answer does not
# depend on which server wrote it, and the Worker's answers are checked by
# the node:http pass; the browser's run on its fetch once.
# hold.test.mjs's seeded runs under faults (the most costly tests of the
# suite): 40 on node:http (8 on the Worker), and on fetch 20 more, from
# seeds the first pass does not use (no schedule run twice). The hold's
# deliberate breaks (hold.test.mjs, RUNS) fail within six runs from either
# first seed; over 20 runs each of the proxy's five faults meets the fetch
# transport many times; the rest of the fetch pass is the whole suite
# again. `make soak-hold` runs many more.
test-svcclient-fetch: svcclient-prep
	$(SVCCLIENT_ENV) SVCCLIENT_TRANSPORT=fetch SVCCLIENT_TARGETS=native HOLD_RUNS=20 HOLD_SEED=1600000 node --test --test-concurrency=$(SVCCLIENT_JOBS) $(SVCCLIENT_FETCH_TESTS)

SVCCLIENT_FETCH_TESTS := $(filter-out test/svcclient/browser.test.mjs test/svcclient/cors.test.mjs,$(wildcard test/svcclient/*.test.mjs))

# The seeded hold runs under faults, many more than make test makes, from
# the same first seeds (a failure there replays with the HOLD_RUNS and
# HOLD_SEED it names): hold.test.mjs on each transport against both
# coordinators (the Worker a fifth as many), then the Go client's
# RenewalsUnderFaults against the Worker (test/worker). Tens of minutes.
SOAK_HOLD_RUNS ?= 1000
soak-hold: svcclient-prep
	$(SVCCLIENT_ENV) SVCCLIENT_TRANSPORT=node HOLD_RUNS=$(SOAK_HOLD_RUNS) node --test --test-name-pattern='under faults' test/svcclient/hold.test.mjs
	$(SVCCLIENT_ENV) SVCCLIENT_TRANSPORT=fetch HOLD_RUNS=$(SOAK_HOLD_RUNS) HOLD_SEED=1600000 node --test --test-name-pattern='under faults' test/svcclient/hold.test.mjs
	$(WRANGLER_OFFLINE) HOLD_RUNS=$(SOAK_HOLD_RUNS) $(GO) test -count=1 -tags e2e -timeout 120m -run '^TestHolding$$/^RenewalsUnderFaults$$' ./test/worker/
