# The playground: a static page (web/) and the lease-fence module (wasm/js/,
# built by build-wasm in mk/wasm.mk), served on 127.0.0.1 by a small Go server
# that also starts coordinators for live mode (cmd/coordinator, mk/service.mk).
#
#   make playground            build everything it needs, serve on :8080
#   make playground PORT=0     any free port (the URL is printed first)
#   make playground WORKER=1   live mode against the Worker too (wrangler dev; needs make deps)
#   make test-web              the page in headless Chromium (node --test)
#   make test-devserver        the server's Go tests
#   make screenshots-web       every preset's end, drawn into out/test/screenshots
#   make bench-web             load time, bytes transferred, drag-to-redraw time and a redraw's work, in Chromium

PORT ?= 8080
DEVSERVER := out/bin/devserver
COORDINATOR_BIN := out/bin/coordinator
WRANGLER_BIN := node_modules/.bin/wrangler

TESTS += test-devserver test-web-explainer test-web-axe test-web-live test-web-edit test-web-redraw test-web-pages
BENCH += bench-web

.PHONY: playground devserver test-web test-web-explainer test-web-axe test-web-live test-web-edit test-web-redraw test-web-pages test-devserver screenshots-web bench-web soak-edit

# Always handed to go build: its cache makes an unchanged rebuild cheap.
devserver:
	@mkdir -p out/bin
	$(GO) build -o $(DEVSERVER) ./cmd/devserver

LIVE_FLAGS = -coordinator $(COORDINATOR_BIN)$(if $(WORKER), -wrangler $(WRANGLER_BIN) -worker-dir wasm/worker)

playground: build-wasm devserver coordinator $(if $(WORKER),worker)
	@echo "playground: serving web/ and wasm/js/, live mode with $(COORDINATOR_BIN)$(if $(WORKER), and the Worker) (Ctrl-C stops it)"
	$(DEVSERVER) -port $(PORT) -web web -module wasm/js $(LIVE_FLAGS)

test-devserver: coordinator
	LEASE_FENCE_COORDINATOR_BIN=$(CURDIR)/$(COORDINATOR_BIN) $(GO) test -count=1 ./cmd/devserver/... ./internal/...

# Six targets, so that make test can run the five longest files beside the
# rest: explainer.test.mjs alone, axe.test.mjs (axe-core over every preset,
# the explainer's longest check) alone, live.test.mjs alone (live mode
# against the coordinator and the Worker: wrangler dev, started by the dev
# server), edit.test.mjs alone, redraw.test.mjs alone, then the other files
# one at a time (each starts its own server and Chromium, and the machine
# has two cores).
WEB_TESTS := $(sort $(wildcard test/web/*.test.mjs))
WEB_EXPLAINER := test/web/explainer.test.mjs
WEB_LIVE := test/web/live.test.mjs
WEB_EDIT := test/web/edit.test.mjs
WEB_REDRAW := test/web/redraw.test.mjs
WEB_AXE := test/web/axe.test.mjs

test-web: test-web-explainer test-web-axe test-web-live test-web-edit test-web-redraw test-web-pages

test-web-explainer: build-wasm devserver
	@mkdir -p out/test/screenshots
	DEVSERVER=$(DEVSERVER) node --test $(WEB_EXPLAINER)

test-web-axe: build-wasm devserver
	DEVSERVER=$(DEVSERVER) node --test $(WEB_AXE)

test-web-live: build-wasm devserver coordinator worker
	@mkdir -p out/test/screenshots
	DEVSERVER=$(DEVSERVER) COORDINATOR=$(CURDIR)/$(COORDINATOR_BIN) node --test $(WEB_LIVE)

test-web-edit: build-wasm devserver
	@mkdir -p out/test/screenshots
	DEVSERVER=$(DEVSERVER) node --test $(WEB_EDIT)

# edit.test.mjs's seeded random edits, SOAK_EDITS of them (make test: 120).
SOAK_EDITS ?= 1000
soak-edit: build-wasm devserver
	@mkdir -p out/test/screenshots
	DEVSERVER=$(DEVSERVER) EDITS=$(SOAK_EDITS) node --test --test-name-pattern='seeded random edits' $(WEB_EDIT)

test-web-redraw: build-wasm devserver
	@mkdir -p out/test/screenshots
	DEVSERVER=$(DEVSERVER) node --test $(WEB_REDRAW)

test-web-pages: build-wasm devserver
	@mkdir -p out/test/screenshots
	DEVSERVER=$(DEVSERVER) node --test --test-concurrency=1 $(filter-out $(WEB_EXPLAINER) $(WEB_AXE) $(WEB_LIVE) $(WEB_EDIT) $(WEB_REDRAW),$(WEB_TESTS))

# Every preset's end at 1280 px, in a 560-px-high iframe and at 390 px, into
# out/test/screenshots: pictures to look at, no check, so not in make test.
screenshots-web: build-wasm devserver
	DEVSERVER=$(DEVSERVER) node scripts/screenshots-web.mjs

bench-web: build-wasm devserver
	DEVSERVER=$(DEVSERVER) node scripts/bench-web.mjs
	DEVSERVER=$(DEVSERVER) node scripts/bench-drag.mjs
	DEVSERVER=$(DEVSERVER) node scripts/bench-redraw.mjs
