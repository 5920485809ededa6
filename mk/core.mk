# The core Go library: natively, with the race detector, and under GOOS=js.
TESTS += test-core test-core-race test-core-js
BENCH += bench-core

.PHONY: test-core test-core-race test-core-js bench-core
test-core:
	$(GO) test -count=1 ./core/...

test-core-race:
	$(GO) test -count=1 -race ./core/...

test-core-js:
	GOOS=js GOARCH=wasm $(GO) test -count=1 ./core/...

bench-core:
	$(GO) test -run '^$$' -bench . -benchmem ./core/...
