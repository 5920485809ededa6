# gates/httpfence and cmd/fence-proxy: the fence gate in front of an HTTP API
# (docs/fencing.md, "fence-proxy"). The tests run the proxy in-process and as
# a child process (SIGKILLed between raising a floor and forwarding), with
# agent and upstream processes, on SQLite state files in temporary
# directories; a short fuzz run of the Lease-Fence header parser.
TESTS += test-proxy test-proxy-js
BUILD += fence-proxy
BENCH += bench-proxy

.PHONY: fence-proxy test-proxy test-proxy-js bench-proxy

fence-proxy:
	$(GO) build -o out/bin/fence-proxy ./cmd/fence-proxy

test-proxy:
	$(GO) test -count=1 -race ./gates/httpfence/ ./cmd/fence-proxy/
	$(call fuzz_brief,FuzzParseHeader,./gates/httpfence/,20000x)

# From JavaScript: leaseFenceHeader and staleFenceError
# (lease-fence/service-client) against the real proxy (out/bin/fence-proxy)
# run as a child process, and test/gates' conformance suite through HTTP.
test-proxy-js: build-wasm fence-proxy
	FENCE_PROXY=$(CURDIR)/out/bin/fence-proxy node --test test/proxy/

# The proxy's added latency (p50/p99, reads and writes, each request sent
# directly or through the proxy in turn) and writes per second through it
# against the same write sent directly and sent through a reverse proxy
# that only forwards (-floor: httputil.ReverseProxy, what any second HTTP
# process on the path costs), 1 and 8 writers, with an upstream that writes
# to memory and one that fdatasyncs each write; then, without that side,
# the same with every write raising the fence floor (ARGS=... for
# scripts/bench-proxy's flags, given to both runs: -baseline BIN adds
# another fence-proxy build as a side, -profile DIR takes CPU profiles of
# proxy and upstream under load instead). About 5 minutes.
# BenchmarkUpstreamTransport compares the proxy's upstream transport with
# http.Transport in one process.
bench-proxy: fence-proxy
	uptime
	$(GO) run ./scripts/bench-proxy -floor $(ARGS)
	$(GO) run ./scripts/bench-proxy -raise -work fsync -rounds 3 $(ARGS)
	uptime
