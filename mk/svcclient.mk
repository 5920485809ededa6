# LeaseServiceClient (wasm/js/service-client.mjs, docs/js.md "The service
# client"): tsc compiles the `await using` example in test/svcclient, then
# node --test runs the client against the native coordinator and the Worker
# under wrangler dev (started once, offline), on each transport (node:http,
# then fetch), and in Chromium: with tokens
# and TLS from a private CA that pkigen makes at run time
# (test/svcclient/tls.test.mjs), and from a page on another origin
# (-cors-origin; the Worker's LEASE_CORS_ORIGINS under a second wrangler
# dev: test/svcclient/cors.test.mjs).
TESTS += test-svcclient

.PHONY: test-svcclient
test-svcclient: build-wasm coordinator worker
	$(GO) build -o out/bin/pkigen ./internal/testrig/testpki/pkigen
	tsc -p test/svcclient/tsconfig.json
	COORDINATOR=$(CURDIR)/out/bin/coordinator PKIGEN=$(CURDIR)/out/bin/pkigen SVCCLIENT_TRANSPORT=node node --test test/svcclient/
	COORDINATOR=$(CURDIR)/out/bin/coordinator PKIGEN=$(CURDIR)/out/bin/pkigen SVCCLIENT_TRANSPORT=fetch \
	  HOLD_RUNS=$(SVCCLIENT_FETCH_HOLD_RUNS) HOLD_SEED=$(SVCCLIENT_FETCH_HOLD_SEED) node --test $(SVCCLIENT_FETCH_TESTS)

# The files whose clients run in Node, run again on the fetch transport
# (test/svcclient/transport.mjs); the browser's run on its fetch once.
SVCCLIENT_FETCH_TESTS := $(filter-out test/svcclient/browser.test.mjs test/svcclient/cors.test.mjs,$(wildcard test/svcclient/*.test.mjs))
# hold.test.mjs's seeded runs under faults (the most costly tests of the
# suite): 200 on node:http, and on fetch 40 more, from seeds the first pass
# does not use (no schedule run twice). Over those 40 runs each of the
# proxy's five faults meets the fetch transport many times; the rest of the
# fetch pass is the whole suite again.
SVCCLIENT_FETCH_HOLD_RUNS := 40
SVCCLIENT_FETCH_HOLD_SEED := 1600000
