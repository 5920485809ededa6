# gates/sqlfence: the fence checked by the database itself, against a
# SQLite file (several handles and two processes) and a real PostgreSQL
# server that the tests start in a temporary directory (internal/pgtest;
# scripts/setup.sh installs Debian's postgresql). Missing PostgreSQL fails the
# suite. core/fence itself is in test-core.
TESTS += test-sqlfence
BENCH += bench-sqlfence

.PHONY: test-sqlfence bench-sqlfence

test-sqlfence:
	$(GO) test -count=1 ./gates/sqlfence/ ./internal/pgtest/...

# Commits per second with 1 and 8 writers on SQLite and PostgreSQL, fenced
# next to the same write without fencing, interleaved in one run, with
# min/median/max (durable settings: PostgreSQL with fsync, SQLite in WAL with
# synchronous=FULL). About a minute.
bench-sqlfence:
	GO=$(GO) ./scripts/bench-sqlfence.sh
