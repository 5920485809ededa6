# The playground: a static page (web/) and the lease-fence module (wasm/js/,
# built by build-wasm in mk/wasm.mk), served on 127.0.0.1 by a small Go server.
#
#   make playground            build everything it needs, serve on :8080
#   make playground PORT=0     any free port (the URL is printed first)
#   make test-web              the page in headless Chromium (node --test)
#   make test-devserver        the server's Go tests
#   make bench-web             load time and bytes transferred, in Chromium

PORT ?= 8080
DEVSERVER := out/bin/devserver

TESTS += test-devserver test-web
BENCH += bench-web

.PHONY: playground devserver test-web test-devserver bench-web

# Always handed to go build: its cache makes an unchanged rebuild cheap.
devserver:
	@mkdir -p out/bin
	$(GO) build -trimpath -o $(DEVSERVER) ./cmd/devserver

playground: build-wasm devserver
	@echo "playground: serving web/ and wasm/js/ (Ctrl-C stops it)"
	$(DEVSERVER) -port $(PORT) -web web -module wasm/js

test-devserver:
	$(GO) test -count=1 ./cmd/devserver/...

# One file at a time: each starts its own server and Chromium, and the
# machine has two cores.
test-web: build-wasm devserver
	@mkdir -p out/test/screenshots
	DEVSERVER=$(DEVSERVER) node --test --test-concurrency=1 test/web/*.test.mjs

bench-web: build-wasm devserver
	DEVSERVER=$(DEVSERVER) node scripts/bench-web.mjs
