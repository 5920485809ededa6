# The coordinator over PostgreSQL (docs/postgres.md, "The coordinator over PostgreSQL: replicas
# over one database"): service/pgstore and the short drills of
# cmd/coordinator run in test-service (mk/service.mk); the long drills and
# the benchmarks have their own targets.
TESTS += lint-pg-drill
BENCH += bench-pg

.PHONY: lint-pg-drill drill-pg bench-pg

# vet and staticcheck of what only the drill build tag builds.
lint-pg-drill:
	$(GO) vet -tags drill ./cmd/coordinator/
	GOBIN=$(CURDIR)/out/bin $(GO) install $(STATICCHECK)
	out/bin/staticcheck -tags drill ./cmd/coordinator/

# The long drills (a few minutes): each of three coordinators killed ten
# times under load, PostgreSQL crashed three times (fsync on), the loss of
# the primary with a synchronous standby and with an asynchronous one (a
# report of what that loses), a coordinator cut off from the database.
drill-pg:
	$(GO) test -count=1 -tags drill -timeout 30m -v \
	  -run '^(TestReplicasKill9|TestPostgresRestartUnderLoad|TestFailoverSynchronous|TestFailoverAsynchronous|TestPartitionedReplica)$$' \
	  ./cmd/coordinator/ | grep -v '^time='

# Cycles/s against a bare transaction and the embedded store, failover and
# promotion times (scripts/bench-pg; ROUNDS, DURATION, KILLS, PROMOTIONS;
# PREVIOUS=path of another coordinator build: the target pg-prev).
bench-pg: coordinator
	$(GO) build -o out/bin/bench-pg ./scripts/bench-pg
	out/bin/bench-pg -rounds $${ROUNDS:-5} -duration $${DURATION:-3s} -kills $${KILLS:-10} -promotions $${PROMOTIONS:-5} $${PREVIOUS:+-previous $$PREVIOUS}
