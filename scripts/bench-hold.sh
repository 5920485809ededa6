#!/usr/bin/env bash
# Holding on loopback, side by side (docs/service.md, Benchmarks):
#
# 1. Handover latency, release to the next waiter holding the lease: the
#    durable coordinator (cmd/coordinator -init, two client.Client holders
#    passing one resource with Hold and Release) and embedded etcd's
#    concurrency.Mutex (Unlock to the waiter's Lock returning; scripts/peers,
#    its own module), ROUNDS rounds of N handovers each, the two in turn in
#    every round; p50 and p99 of each round (min / median / max over the
#    rounds) and of all ROUNDS x N handovers pooled.
# 2. The same for the Go Worker under wrangler dev (ROUNDS_WORKER rounds).
# 3. Expiry to the waiter holding the lease (nobody renews or releases):
#    native and Worker, TTL 1 s, EXPIRY samples each.
# 4. The CPU time of a held lease, TTL 10 s (renewed every 3.3 s): HOLDS
#    leases held for COST_DURATION, client and server, each less the same
#    time idle; native and Worker (HOLDS_WORKER leases; the whole wrangler
#    dev process group); and native with the JavaScript client
#    (LeaseServiceClient.hold in a Node process, HOLDS_JS leases, on the
#    node:http transport then on fetch, in turn in each round); native
#    with every hold through one Go client (native-cost-one: one process
#    holding them all, whose renewals share calls).
#
# Expects `make coordinator worker` first. Load (uptime) is printed before
# each part.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
ROUNDS=${ROUNDS:-5}
N=${N:-200}
ROUNDS_WORKER=${ROUNDS_WORKER:-2}
EXPIRY=${EXPIRY:-50}
HOLDS=${HOLDS:-1000}
# The Worker under wrangler dev spends about 8 ms of CPU per renewal here
# (its process group: workerd, the wasm, wrangler): 100 holds (30
# renewals/s) lost most of their leases at load 12-14, 20 holds do not.
HOLDS_WORKER=${HOLDS_WORKER:-20}
HOLDS_JS=${HOLDS_JS:-$HOLDS}
COST_ROUNDS=${COST_ROUNDS:-3}
COST_DURATION=${COST_DURATION:-30s}

mkdir -p out/bin
$GO build -o out/bin/bench-hold ./scripts/bench-hold
(cd scripts/peers && $GO build -o ../../out/bin/peers .)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
load() { uptime | sed 's/.*load/load/'; }

# quantiles FILE: p50 and p99 of the samples in FILE.
quantiles() {
  sort -g "$1" | awk '{ v[NR] = $1 } END { i50 = int(NR * 0.5) + 1; i99 = int(NR * 0.99) + 1; if (i99 > NR) i99 = NR;
    printf "n=%d  p50 %.3f ms  p99 %.3f ms", NR, v[i50], v[i99] }'
}

# summary FILE NAME: min / median / max over the rounds of p50 and p99.
summary() {
  for q in p50 p99; do
    grep "^$2 " "$1" | awk -v q="$q" '{ for (i = 1; i <= NF; i++) if ($i == q) print $(i+1) }' | sort -g |
      awk -v name="$2" -v q="$q" '{ v[NR] = $1 } END { m = (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2);
        printf "  %-16s %s over %d rounds: %8.3f / %8.3f / %8.3f ms\n", name, q, NR, v[1], m, v[NR] }'
  done
}

echo "== handover, native durable and etcd, $ROUNDS rounds of $N each, in turn ($(nproc) cores; $(load)) =="
for round in $(seq 1 "$ROUNDS"); do
  out/bin/bench-hold -mode handover -target native -n "$N" -samples "$tmp/native" | tee -a "$tmp/rounds"
  out/bin/peers -targets etcd-handover -n "$N" -samples "$tmp/etcd" | tee -a "$tmp/rounds" ||
    echo "bench-hold: etcd failed in round $round; left out of it"
done
echo "per round (min / median / max):"
summary "$tmp/rounds" native-handover
summary "$tmp/rounds" etcd-handover
echo "pooled:"
echo "  native-handover  $(quantiles "$tmp/native")"
echo "  etcd-handover    $(quantiles "$tmp/etcd")"

echo
echo "== handover, Worker under wrangler dev, $ROUNDS_WORKER rounds of $N ($(load)) =="
for round in $(seq 1 "$ROUNDS_WORKER"); do
  out/bin/bench-hold -mode handover -target worker -n "$N" -samples "$tmp/worker" | tee -a "$tmp/rounds-worker"
done
echo "pooled:"
echo "  worker-handover  $(quantiles "$tmp/worker")"

echo
echo "== expiry to the waiter holding the lease, TTL 1 s, $EXPIRY samples ($(load)) =="
out/bin/bench-hold -mode expiry -target native -n "$EXPIRY"
out/bin/bench-hold -mode expiry -target worker -n "$EXPIRY"

echo
echo "== the CPU time of a held lease, TTL 10 s, $HOLDS leases (the Worker $HOLDS_WORKER) for $COST_DURATION, $COST_ROUNDS rounds, in turn ($(load)) =="
for round in $(seq 1 "$COST_ROUNDS"); do
  out/bin/bench-hold -mode cost -target native -holds "$HOLDS" -duration "$COST_DURATION" | tee -a "$tmp/cost"
  out/bin/bench-hold -mode cost -one-client -target native -holds "$HOLDS" -duration "$COST_DURATION" | tee -a "$tmp/cost"
  for transport in node fetch; do
    out/bin/bench-hold -mode cost -client js -transport "$transport" -target native -holds "$HOLDS_JS" -duration "$COST_DURATION" | tee -a "$tmp/cost"
    out/bin/bench-hold -mode cost -one-client -client js -transport "$transport" -target native -holds "$HOLDS_JS" -duration "$COST_DURATION" | tee -a "$tmp/cost"
  done
  out/bin/bench-hold -mode cost -target worker -holds "$HOLDS_WORKER" -duration "$COST_DURATION" | tee -a "$tmp/cost" ||
    echo "bench-hold: the Worker's cost run failed in round $round; left out of it"
done
echo "per round, us of CPU per second of held lease (min / median / max):"
for target in native-cost native-cost-one native-cost-js native-cost-js-fetch native-cost-js-one native-cost-js-one-fetch worker-cost; do
  for side in client server; do
    grep "^$target " "$tmp/cost" | awk -v side="$side" '{ for (i = 1; i <= NF; i++) if ($i == side && $(i+2) == "us/lease-s") print $(i+1) }' | sort -g |
      awk -v name="$target" -v side="$side" 'NR { v[NR] = $1 } END { if (NR == 0) exit; m = (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2);
        printf "  %-24s %-6s over %d rounds: %9.2f / %9.2f / %9.2f\n", name, side, NR, v[1], m, v[NR] }'
  done
done
# costs NAME SIDE: the us/lease-s of SIDE of each NAME line, in round order.
costs() { grep "^$1 " "$tmp/cost" | awk -v side="$2" '{ for (i = 1; i <= NF; i++) if ($i == side && $(i+2) == "us/lease-s") print $(i+1) }'; }
echo "the JS client on node:http over the same on fetch, in the same round (min / median / max):"
for pair in "native-cost-js native-cost-js-fetch" "native-cost-js-one native-cost-js-one-fetch"; do
  set -- $pair
  for side in client server; do
    paste <(costs "$1" "$side") <(costs "$2" "$side") | awk '$2 > 0 { print $1 / $2 }' | sort -g |
      awk -v name="$1" -v side="$side" 'NR { v[NR] = $1 } END { if (NR == 0) exit; m = (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2);
        printf "  %-24s %-6s over %d rounds: %6.3fx / %6.3fx / %6.3fx\n", name, side, NR, v[1], m, v[NR] }'
  done
done
echo "== done ($(load)) =="
