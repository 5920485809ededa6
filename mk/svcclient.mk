# LeaseServiceClient (wasm/js/service-client.mjs, docs/js.md "The service
# client"): tsc compiles the `await using` example in test/svcclient, then
# node --test runs the client against the native coordinator and the Worker
# under wrangler dev (started once, offline), and in Chromium.
TESTS += test-svcclient

.PHONY: test-svcclient
test-svcclient: build-wasm coordinator worker
	tsc -p test/svcclient/tsconfig.json
	COORDINATOR=$(CURDIR)/out/bin/coordinator node --test test/svcclient/
