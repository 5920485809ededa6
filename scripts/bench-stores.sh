#!/usr/bin/env bash
# Storage engines side by side (docs/service.md, "Choosing the engine"):
# synced writes per second of one entry of about 230 bytes, 1 and 8
# writers, each on its own keys, with Pebble, bbolt (an Update per write,
# and db.Batch), and (LOG_COMMIT=68fc4fa, the default) the hand-made
# write-ahead log of that commit (its BoltStore.Apply of one record: a log
# frame and an fdatasync, concurrent applies sharing one). ROUNDS rounds,
# every target in turn in each, DURATION each; min / median / max.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-3s}
LOG_COMMIT=${LOG_COMMIT:-68fc4fa}

mkdir -p out/bin
(cd scripts/peers && $GO build -o ../../out/bin/peers .)
tmp=$(mktemp -d)
results=$tmp/results
trap 'rm -rf "$tmp"' EXIT
if [ -n "$LOG_COMMIT" ]; then
  # The old log, built from that commit's tree with a harness of the same
  # shape as scripts/peers (one Apply per cycle, each writer its own key).
  git archive "$LOG_COMMIT" | tar -x -C "$tmp"
  mkdir -p "$tmp/scripts/oldlog"
  cat >"$tmp/scripts/oldlog/main.go" <<'EOF'
package main

import (
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lease-fence/lease-fence/service/wire"
)

func main() {
	d := flag.Duration("duration", 3*time.Second, "")
	flag.Parse()
	for _, writers := range []int{1, 8} {
		dir, _ := os.MkdirTemp("", "oldlog-")
		s, err := wire.CreateBoltStore(filepath.Join(dir, "state.db"))
		if err != nil {
			panic(err)
		}
		var n atomic.Int64
		var fence atomic.Uint64
		stop := time.Now().Add(*d)
		start := time.Now()
		var wg sync.WaitGroup
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; time.Now().Before(stop); i++ {
					f := fence.Add(1)
					rec := wire.Record{Resource: "bench-" + strconv.Itoa(w) + "-" + strconv.Itoa(i%64), HolderID: "holder-0000",
						RequestID: "0123456789abcdef0123456789abcdef", Fence: f, ExpiresAt: 1796000000000.125, SecretHash: sha256.Sum256([]byte("s"))}
					if err := s.Apply(context.Background(), wire.Change{IssuedFence: f, Put: []wire.Record{rec}}); err != nil {
						panic(err)
					}
					n.Add(1)
				}
			}()
		}
		wg.Wait()
		el := time.Since(start).Seconds()
		fmt.Printf("%-18s clients=%-2d %6d cycles in %5.2fs  %8.0f cycles/s\n", "store-oldlog", writers, n.Load(), el, float64(n.Load())/el)
		s.Close()
		os.RemoveAll(dir)
	}
}
EOF
  (cd "$tmp" && $GO build -o "$OLDPWD/out/bin/oldlog" ./scripts/oldlog)
fi

echo "== storage engines, synced writes: $ROUNDS rounds of $DURATION ($(nproc) cores; $(uptime | sed 's/.*load/load/')) =="
for round in $(seq 1 "$ROUNDS"); do
  out/bin/peers -targets store-pebble,store-bbolt,store-bbolt-batch -cycles 100000000 -duration "$DURATION" | tee -a "$results"
  if [ -n "$LOG_COMMIT" ]; then out/bin/oldlog -duration "$DURATION" | tee -a "$results"; fi
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
