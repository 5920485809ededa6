#!/usr/bin/env bash
# Storage engines side by side (docs/benchmarks.md, "Storage engines"):
# synced writes per second of one entry of about 230 bytes, 1 and 8
# writers, each on its own keys, with Pebble and bbolt (an Update per
# write, and db.Batch). ROUNDS rounds, every engine in turn in each,
# DURATION each; min / median / max.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-3s}

mkdir -p out/bin
(cd scripts/peers && $GO build -o ../../out/bin/peers .)
tmp=$(mktemp -d)
results=$tmp/results
trap 'rm -rf "$tmp"' EXIT

echo "== storage engines, synced writes: $ROUNDS rounds of $DURATION ($(nproc) cores; $(uptime | sed 's/.*load/load/')) =="
for round in $(seq 1 "$ROUNDS"); do
  out/bin/peers -targets store-pebble,store-bbolt,store-bbolt-batch -cycles 100000000 -duration "$DURATION" | tee -a "$results"
done
echo
echo "writes/s over $ROUNDS rounds (min / median / max):"
awk '{ for (i = 1; i <= NF; i++) if ($i == "cycles/s") print $1, $2, $(i-1) }' "$results" |
  sort -k1,1 -k2,2 -k3,3n |
  awk '{ key = $1 " " $2; v[key] = v[key] " " $3; n[key]++ }
       END { for (k in v) { split(substr(v[k], 2), a, " "); c = n[k];
             printf "  %-18s %-10s %7.0f / %7.0f / %7.0f\n", substr(k, 1, index(k, " ") - 1), substr(k, index(k, " ") + 1), a[1], (c % 2 ? a[(c + 1) / 2] : (a[c / 2] + a[c / 2 + 1]) / 2), a[c] } }' |
  sort
echo "== done ($(uptime | sed 's/.*load/load/')) =="
