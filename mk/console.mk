# The console: cmd/coordinator -ui serves web/console.* (drawn by the
# playground's web/svg.js) from the binary; docs/console.md.
#
#   make test-console    its model in Node, and the page in headless Chromium against a real coordinator
#   make bench-console   event-to-frame time at 1,000 resources and 500 events/s, heap over time (MINUTES=10)
#
# The Go side (the files, the headers, the gate relay) is tested with
# cmd/coordinator by test-service.

TESTS += test-console
BENCH += bench-console

.PHONY: test-console bench-console

# One file at a time: the Chromium tests start a coordinator each.
test-console: coordinator fence-proxy
	@mkdir -p out/console
	COORDINATOR=$(CURDIR)/out/bin/coordinator FENCE_PROXY=$(CURDIR)/out/bin/fence-proxy node --test --test-concurrency=1 test/console/*.test.mjs

bench-console: coordinator
	COORDINATOR=$(CURDIR)/out/bin/coordinator node scripts/bench-console.mjs --minutes $(or $(MINUTES),10)
