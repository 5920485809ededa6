# The coordinator as a service (docs/service.md): the state machine and its
# stores (service, service/pebblestore), the protocol (service/wire), the
# HTTP server (service/httpapi) and Go client (service/client), the native
# server, the Cloudflare Worker under the local
# workerd runtime, and the benchmarks against Redis and etcd.
TESTS += test-service-coordinator test-service-pgstore test-service-local lint-service test-worker-e2e
BUILD += coordinator worker
BENCH += bench-service bench-stores bench-memory bench-hold bench-watch

WORKER_DIR := wasm/worker
# wrangler offline: no metrics, no request.cf lookup.
WRANGLER_OFFLINE := WRANGLER_SEND_METRICS=false CLOUDFLARE_CF_FETCH_ENABLED=false

.PHONY: coordinator worker worker-dev test-service test-service-coordinator test-service-pgstore test-service-local lint-service service-race-prep test-worker-e2e bench-service bench-stores bench-memory bench-hold bench-watch

coordinator:
	$(GO) build -o out/bin/coordinator ./cmd/coordinator

# The Worker: Go compiled to wasm, plus the wasm_exec.js that
# syumai/workers ships (Go's, patched to hand the runtime's env to Go).
worker:
	mkdir -p $(WORKER_DIR)/build
	GOOS=js GOARCH=wasm $(GO) build -trimpath -ldflags='-s -w' -o $(WORKER_DIR)/build/app.wasm ./$(WORKER_DIR)
	install -m 644 "$$($(GO) list -m -f '{{.Dir}}' github.com/syumai/workers)/cmd/workers-assets-gen/assets/wasm_exec_go.js" $(WORKER_DIR)/build/wasm_exec.js

# Serves the Worker on http://127.0.0.1:8788; state in wasm/worker/.wrangler/state.
worker-dev: worker
	cd $(WORKER_DIR) && $(WRANGLER_OFFLINE) wrangler dev

# service/... and cmd/coordinator with the race detector, in three targets
# that make test runs side by side (each mostly waits: on child processes,
# PostgreSQL, fsync and timers), and lint-service; `make test-service` runs
# all four.
#   test-service-coordinator  the real server (fail-closed start, 25 kill -9
#       restarts, a second server, a restored backup, a full tmpfs, 1,100 idle
#       connections under a 1024 file-descriptor limit, replicas over
#       PostgreSQL and their short drills)
#   test-service-pgstore      the store over PostgreSQL
#   test-service-local        the rest of service/...: the state machine, the
#       Pebble store (damage table, full disk, ENOSPC), the protocol, the HTTP
#       API, the client, linearizability over HTTP; a short fuzz run of the
#       request decoder
#   lint-service              vet/staticcheck of what `make lint` does not
#       see: the e2e build tag and the peers module
# The history checker's tests (test/worker without the e2e tag, one
# goroutine each) run in test-worker-e2e.
test-service: test-service-coordinator test-service-pgstore test-service-local lint-service

# The packages the three share are compiled with -race once, before they
# start (TEST_PREP: see the Makefile), not by each at the same time.
TEST_PREP += service-race-prep
SERVICE_TESTED := ./service/... ./cmd/coordinator/
service-race-prep:
	$(GO) build -race $$($(GO) list -deps -test -f '{{if not (or .ForTest (eq .Name "main"))}}{{.ImportPath}}{{end}}' $(SERVICE_TESTED))

# cmd/coordinator's children that only ever end by SIGKILL (the kill -9
# tests, the drills, the holding suites' servers) run out/bin/coordinator,
# built without the race detector, which fails a process only when it
# exits (LEASE_FENCE_COORDINATOR_BIN).
test-service-coordinator: coordinator service-race-prep
	LEASE_FENCE_COORDINATOR_BIN=$(CURDIR)/out/bin/coordinator $(GO) test -count=1 -race -timeout 30m ./cmd/coordinator/

test-service-pgstore: service-race-prep
	$(GO) test -count=1 -race -timeout 30m ./service/pgstore/

test-service-local: service-race-prep
	$(GO) test -count=1 -race -timeout 30m $$($(GO) list ./service/... | grep -v '/service/pgstore$$')
	$(call fuzz_brief,FuzzDecodeMessage,./service/wire/,40000x)
	$(call fuzz_brief,FuzzDecodeReply,./service/wire/,40000x)

lint-service:
	$(GO) vet -tags e2e ./test/worker/
	GOBIN=$(CURDIR)/out/bin $(GO) install $(STATICCHECK)
	out/bin/staticcheck -tags e2e ./test/worker/
	cd scripts/peers && $(GO) vet ./... && ../../out/bin/staticcheck ./...

# End to end against the Worker under wrangler dev (workerd), on a free port
# with its state in a temporary directory; about a minute.
test-worker-e2e: worker
	$(WRANGLER_OFFLINE) $(GO) test -count=1 -tags e2e -timeout 15m ./test/worker/

# Durable coordinator against Redis (appendfsync always) and etcd, side by
# side, and p50 acquire at 100 and 100,000 leases (ALL=1: more targets).
bench-service: coordinator worker
	GO=$(GO) ./scripts/bench-service.sh

# Storage engines alone: synced writes/s of one entry, Pebble, bbolt and
# the hand-made log of commit 68fc4fa (LOG_COMMIT=), side by side.
bench-stores:
	GO=$(GO) ./scripts/bench-stores.sh

# RSS and live heap before, during and 2 x TTL after 200,000 refused
# renewals and 1,000,000 acquire/release cycles (a few minutes).
bench-memory: coordinator
	$(GO) run ./scripts/bench-memory

# Holding: handover latency (release to the next waiter holding the lease)
# of the durable coordinator against etcd's concurrency.Mutex, side by side
# in rounds, and of the Worker; expiry to the waiter holding; the CPU time of
# a held lease (TTL 10 s), client and server (scripts/bench-hold.sh).
bench-hold: coordinator worker
	GO=$(GO) ./scripts/bench-hold.sh

# Watch event delay at 1,000 events/s and a list of 100,000 leases end to
# end, against the native coordinator (issue 27), then what one page of a
# list costs with 10,000 and 100,000 leases held.
bench-watch: coordinator
	$(GO) run ./scripts/bench-watch
	$(GO) test -run '^$$' -bench '^BenchmarkListPage$$' -count 3 ./service/
