# The library for JavaScript: wasm/lib (Go, GOOS=js) compiled into
# wasm/js/lease-fence.wasm, loaded by wasm/js/runtime.mjs through
# wasm/js/wasm_exec.mjs (Go's wasm_exec.js made into a module that leaves
# globalThis alone, generated from the installed Go's copy).
BUILD += build-wasm
TESTS += test-js test-consumers test-wasm-fuzz-go
BENCH += bench-js

WASM_LIB  := wasm/js/lease-fence.wasm
WASM_EXEC := wasm/js/wasm_exec.mjs
# The texts the JavaScript gates send (lease-fence/redis's Lua scripts,
# lease-fence/sql's statements), generated from the files Go embeds.
GATE_TEXTS := wasm/js/gate-texts.mjs
WASM_SRC   = $(shell find core wasm/lib -name '*.go' -not -name '*_test.go') go.mod

.PHONY: build-wasm test-js test-consumers test-wasm-fuzz-go bench-js
build-wasm: $(WASM_LIB) $(WASM_EXEC) $(GATE_TEXTS)

$(GATE_TEXTS): gates/redisfence/fence.lua gates/redisfence/page.lua gates/sqlfence/statements.sql core/fence/fence.go scripts/gate-texts.mjs
	node scripts/gate-texts.mjs

$(WASM_LIB): $(WASM_SRC)
	GOOS=js GOARCH=wasm $(GO) build -trimpath -ldflags='-s -w' -o $@ ./wasm/lib

$(WASM_EXEC): $(GOROOT)/lib/wasm/wasm_exec.js scripts/wasm-exec-module.mjs
	GOVERSION=$$($(GO) env GOVERSION) node scripts/wasm-exec-module.mjs $< $@

# The Go tests of the bridge, node --test over test/js (which includes
# installing the npm pack tarball into an empty folder), and tsc over the
# typed example and over a Node-only project (lib es2022, types node,
# exactOptionalPropertyTypes) using the package. Both projects emit nothing,
# so tsc runs incrementally: its record of each file's diagnostics
# (out/tsbuildinfo) lets a run check again only the files that changed and
# those that depend on them, and report the rest's errors from the record.
TSC_NOEMIT = tsc --incremental --tsBuildInfoFile out/tsbuildinfo/$(subst /,-,$(1)).tsbuildinfo -p $(1)
test-js: build-wasm coordinator
	$(GO) test -count=1 ./wasm/lib/...
	$(GO_JS) $(GO) test -count=1 ./wasm/lib/convert ./wasm/lib/bridge
	node --test test/js/
	$(call TSC_NOEMIT,wasm/js/tsconfig.json)
	$(call TSC_NOEMIT,test/js/types-node/tsconfig.json)

# The package as users get it: npm pack, installed into a temp folder, and
# small apps built and run with each host and bundler (Node ESM and CommonJS,
# TypeScript nodenext CommonJS and bundler, Deno, Bun, esbuild for node and
# browser, webpack 5, Vite build and dev, Rollup, a Worker under wrangler
# dev); browser pages run in one headless Chromium. 10-16 s here, up to 50 s
# under heavy load.
test-consumers: build-wasm
	node --test test/consumers/consumers.test.mjs

# A brief run of each Go fuzz target over the argument decoding and the
# bridge; the seed corpora are under wasm/lib/*/testdata/fuzz.
test-wasm-fuzz-go:
	$(call fuzz_brief,FuzzArgs,./wasm/lib/convert,200000x)
	$(call fuzz_brief,FuzzRequestRoundTrip,./wasm/lib/convert,100000x)
	$(call fuzz_brief,FuzzBridge,./wasm/lib/bridge,100000x)

bench-js: build-wasm
	node scripts/bench-js.mjs
	node scripts/bench-import.mjs
	node scripts/size-wasm.mjs
