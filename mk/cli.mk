# cmd/lease-fence: the command-line tool (docs/cli.md). The tests run
# lease-fence built with the race detector (out/bin/race/lease-fence)
# against a real coordinator and fence-proxy, each a child process on a port
# the kernel picks; the command lease-fence runs is the test binary itself,
# told what to do through its standard input.
TESTS += test-cli
BUILD += lease-fence
BENCH += bench-cli

.PHONY: lease-fence lease-fence-race test-cli bench-cli

lease-fence:
	$(GO) build -o out/bin/lease-fence ./cmd/lease-fence

# Built before the suites start (TEST_PREP: see the Makefile), into a path
# of its own, which go build links again only when a source changed.
TEST_PREP += lease-fence-race
lease-fence-race:
	$(GO) build -race -o out/bin/race/lease-fence ./cmd/lease-fence

test-cli: coordinator fence-proxy lease-fence-race
	LEASE_FENCE_TEST_BIN=$(CURDIR)/out/bin $(GO) test -count=1 -race ./cmd/lease-fence/

# lease-fence lock's time from its start to the command's exec, and the
# whole run, against the same command run directly and under flock(1), in
# turn round after round, with a coordinator on loopback.
bench-cli: lease-fence coordinator
	$(GO) run ./scripts/bench-cli
