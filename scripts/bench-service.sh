#!/usr/bin/env bash
# Service benchmarks, all on loopback, in one run: the native coordinator
# (memory and -state), the Go Worker against a plain-JS Durable Object under
# wrangler dev, then Redis 7 (two ways: three round trips per cycle, and two
# like the coordinator) and embedded etcd (scripts/peers, its own Go
# module). Figures are acquire+release cycles per second, 1 and 8 clients,
# each client on its own resource. Expects `make coordinator worker` first.
# Tune with CYCLES, DURATION, ROUNDS.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
# Fast targets stop at CYCLES (a slice of CYCLES/ROUNDS per round, long
# enough that connection setup does not count), slow ones at DURATION.
CYCLES=${CYCLES:-40000}
DURATION=${DURATION:-12s}
ROUNDS=${ROUNDS:-4}

if ! command -v redis-server >/dev/null; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "bench-service: redis-server is missing; run as root or: apt-get install -y redis-server" >&2
    exit 1
  fi
  echo "bench-service: apt-get install redis-server"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
fi

mkdir -p out/bin
$GO build -o out/bin/bench-service ./scripts/bench-service
(cd scripts/peers && $GO build -o ../../out/bin/peers .)

echo "== lease-fence coordinator over HTTP ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)) =="
out/bin/bench-service -targets native,native-raw,native-durable -cycles "$CYCLES" -duration "$DURATION" -rounds "$ROUNDS"
out/bin/bench-service -targets worker,worker-plain-js -cycles "$CYCLES" -duration "$DURATION" -rounds "$ROUNDS"
echo "== peers (load $(cut -d' ' -f1-3 /proc/loadavg)) =="
out/bin/peers -cycles "$CYCLES" -duration "$DURATION"
