# LeaseServiceClient (wasm/js/service-client.mjs, docs/js.md "The service
# client"): tsc compiles the `await using` example in test/svcclient, then
# node --test runs the client against the native coordinator and the Worker
# under wrangler dev (started once, offline), on each transport (node:http,
# then fetch), and in Chromium: with tokens
# and TLS from a private CA that pkigen makes at run time
# (test/svcclient/tls.test.mjs), and from a page on another origin
# (-cors-origin; the Worker's LEASE_CORS_ORIGINS under a second wrangler
# dev: test/svcclient/cors.test.mjs).
# The two transports are two targets, so that make test runs them side by
# side; `make test-svcclient` runs both.
TESTS += test-svcclient-node test-svcclient-fetch

# Built with make build before the suites start (TEST_PREP: see the
# Makefile), so that test-svcclient-node, the longest, starts first.
TEST_PREP += svcclient-prep

SVCCLIENT_ENV = COORDINATOR=$(CURDIR)/out/bin/coordinator PKIGEN=$(CURDIR)/out/bin/pkigen

.PHONY: test-svcclient test-svcclient-node test-svcclient-fetch svcclient-prep
test-svcclient: test-svcclient-node test-svcclient-fetch

svcclient-prep: build-wasm coordinator worker
	$(GO) build -o out/bin/pkigen ./internal/testrig/testpki/pkigen
	tsc -p test/svcclient/tsconfig.json

test-svcclient-node: svcclient-prep
	$(SVCCLIENT_ENV) SVCCLIENT_TRANSPORT=node node --test test/svcclient/

# The files whose clients run in Node, run again on the fetch transport
# (test/svcclient/transport.mjs); the browser's run on its fetch once.
# hold.test.mjs's seeded runs under faults (the most costly tests of the
# suite): 200 on node:http (40 on the Worker), and on fetch 40 more (8 on
# the Worker), from seeds the first pass
# does not use (no schedule run twice). Over those 40 runs each of the
# proxy's five faults meets the fetch transport many times; the rest of the
# fetch pass is the whole suite again.
test-svcclient-fetch: svcclient-prep
	$(SVCCLIENT_ENV) SVCCLIENT_TRANSPORT=fetch HOLD_RUNS=40 HOLD_SEED=1600000 node --test $(SVCCLIENT_FETCH_TESTS)

SVCCLIENT_FETCH_TESTS := $(filter-out test/svcclient/browser.test.mjs test/svcclient/cors.test.mjs,$(wildcard test/svcclient/*.test.mjs))
