#!/usr/bin/env bash
# Service benchmarks on loopback, in one run, side by side (docs/service.md):
#
# 1. Durable coordinator against durable peers: acquire+release cycles/s at
#    1 and 8 clients, each client on its own resource, for cmd/coordinator
#    with its Pebble state (synced before every grant), Redis 7 with
#    appendonly yes + appendfsync always (three round trips per cycle, and
#    two with Lua scripts like the coordinator's two calls), and embedded
#    etcd's concurrency.Mutex (scripts/peers, its own Go module). The
#    coordinator is driven by client.Client, by client.Client on call
#    sessions (native-durable-sess) and by a minimal HTTP client like the
#    peers' minimal clients. ROUNDS rounds, all in turn in every round
#    (each on a fresh server, in an order rotated and reversed from round
#    to round: in_order), each run DURATION (or CYCLES cycles); min /
#    median / max over the rounds.
#    BASELINE=path/to/coordinator adds that build as "baseline-durable",
#    "baseline-durable-sess" and "baseline-durable-raw" in every round (an
#    older commit, side by side).
# 2. p50 acquire on durable coordinators holding 100 and 100,000 live
#    leases, one sample of each in turn.
# 3. Tokens and TLS against without (NET=0 skips it): the coordinator in
#    memory with -auth (a tokens file of 10 entries), with TLS (a private CA
#    made at the start, kept-alive connections), with both, and without,
#    driven by client.Client and by the minimal client; and durable without
#    and with both. ROUNDS rounds of NET_DURATION (4s) per target and
#    client count, the targets taking 10 turns in every round; cycles/s,
#    and the server's and the client's CPU time per cycle (steadier than
#    cycles/s on a machine shared with other work); then each side over
#    the plain one of its round, min / median / max.
#    NET_ONLY=1 runs this part alone.
# 4. With ALL=1 also: the coordinator in memory (client.Client and a minimal
#    client), the Go Worker and a plain-JS Durable Object under wrangler dev,
#    Redis without persistence.
#
# Expects `make coordinator worker` first. Redis is installed if missing
# (apt, as root) and started by scripts/peers on a free 127.0.0.1 port,
# never as the system service.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
CYCLES=${CYCLES:-100000}
DURATION=${DURATION:-5s}
ROUNDS=${ROUNDS:-5}
SAMPLES=${SAMPLES:-2000}

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

results=$(mktemp)
net_results=$(mktemp)
trap 'rm -f "$results" "$net_results"' EXIT

# spread WIDTH FORMAT: reads "name clients value" lines and prints, for
# each name and client count, min / median / max of the values, the name
# WIDTH wide and each figure in the printf FORMAT.
spread() {
  sort -k1,1 -k2,2 -k3,3n |
    awk -v w="$1" -v f="$2" '{ key = $1 " " $2; v[key] = v[key] " " $3; n[key]++ }
         END { fmt = "  %-" w "s %-10s %" f " / %" f " / %" f "\n";
               for (k in v) { split(substr(v[k], 2), a, " "); c = n[k];
               printf fmt, substr(k, 1, index(k, " ") - 1), substr(k, index(k, " ") + 1), a[1], (c % 2 ? a[(c + 1) / 2] : (a[c / 2] + a[c / 2 + 1]) / 2), a[c] } }' |
    sort
}

# summarize FILE [UNIT]: UNIT (cycles/s unless given) by target and client
# count, min / median / max over the rounds.
summarize() {
  awk -v unit="${2:-cycles/s}" '{ for (i = 1; i <= NF; i++) if ($i == unit) print $1, $2, $(i-1) }' "$1" |
    spread 24 7.1f
}

# ratios FILE UNIT: for each target whose name ends in -auth and/or -tls,
# its UNIT over that of the same target without them, with the same client
# count, in the same round ("round N" lines), min / median / max.
ratios() {
  awk -v unit="$2" '$1 == "round" { r = $2; next }
       { for (i = 1; i <= NF; i++) if ($i == unit) v[r " " $1 " " $2] = $(i-1); names[$1 " " $2] = 1 }
       END { for (k in names) { split(k, f, " "); base = f[1]; sub(/-tls$/, "", base); sub(/-auth$/, "", base);
               if (base == f[1]) continue;
               for (rr = 1; rr <= r; rr++) { a = v[rr " " k]; b = v[rr " " base " " f[2]]; if (a != "" && b > 0) print f[1] "/" base, f[2], a / b } } }' "$1" |
    spread 40 5.3f
}

# over_peer FILE PEER [UNIT]: each coordinator target's UNIT (cycles/s
# unless given) over PEER's with the same client count in the same round
# ("round N" lines), min / median / max. PEER "baseline" divides each
# native-* target by the baseline-* of the same name.
over_peer() {
  awk -v peer="$2" -v unit="${3:-cycles/s}" '$1 == "round" { r = $2; next }
       { for (i = 1; i <= NF; i++) if ($i == unit) v[r " " $1 " " $2] = $(i-1);
         if ($1 ~ (peer == "baseline" ? "^native-" : "^(native|baseline)-")) names[$1 " " $2] = 1 }
       END { for (k in names) { split(k, f, " "); p = peer " " f[2]; if (peer == "baseline") { p = f[1]; sub(/^native-/, "baseline-", p); p = p " " f[2] }
               for (rr = 1; rr <= r; rr++) { a = v[rr " " k]; b = v[rr " " p]; if (a != "" && b > 0) print f[1] "/" (peer == "baseline" ? "baseline" : peer), f[2], a / b } } }' "$1" |
    spread 40 5.3f
}

# in_order ROUND UNIT...: the units in the order they run in round ROUND
# (from 1): rotated by two places a round and reversed in every other round,
# so that no unit always runs first, nor always right after another one.
in_order() {
  local round=$1
  shift
  local n=$# units=("$@") i k
  for ((i = 0; i < n; i++)); do
    k=$(((2 * (round - 1) + (round % 2 == 0 ? n - 1 - i : i)) % n))
    echo "${units[k]}"
  done
}

# run_unit UNIT ROUND: one target of the durable comparison, 1 then 8
# clients, on a fresh server (a peer's on its own).
run_unit() {
  case $1 in
  native-*)
    out/bin/bench-service -targets "$1" -rounds 1 -cycles "$CYCLES" -duration "$DURATION"
    ;;
  baseline-*)
    out/bin/bench-service -coordinator "$BASELINE" -targets "native-${1#baseline-}" -rounds 1 -cycles "$CYCLES" -duration "$DURATION" |
      sed 's/^native-/baseline-/'
    ;;
  *)
    # A peer that fails in a round (etcd times out its own requests when
    # the machine is overloaded) is reported and left out of that round.
    out/bin/peers -targets "$1" -cycles "$CYCLES" -duration "$DURATION" ||
      echo "bench-service: $1 failed in round $2; left out of it" >&2
    ;;
  esac
}

if [ "${NET_ONLY:-0}" != 1 ]; then
  echo "== durable, side by side: $ROUNDS rounds of $DURATION each ($(nproc) cores; $(uptime | sed 's/.*load/load/')) =="
  units=(native-durable native-durable-sess native-durable-raw)
  if [ -n "${BASELINE:-}" ]; then
    units+=(baseline-durable baseline-durable-sess baseline-durable-raw)
  fi
  units+=(redis-aof redis-lua-aof etcd)
  for round in $(seq 1 "$ROUNDS"); do
    echo "round $round" >>"$results"
    order=$(in_order "$round" "${units[@]}")
    echo "round $round:" $order
    for unit in $order; do
      run_unit "$unit" "$round" | tee -a "$results"
    done
  done
  echo
  echo "cycles/s over $ROUNDS rounds (min / median / max):"
  summarize "$results"
  echo
  echo "cycles/s over redis-lua-aof's in the same round (min / median / max):"
  over_peer "$results" redis-lua-aof
  if [ -n "${BASELINE:-}" ]; then
    for unit in cycles/s server-us/cycle; do
      echo
      echo "$unit over the baseline build's, same target, same round (min / median / max):"
      over_peer "$results" baseline "$unit"
    done
  fi
  for unit in server-us/cycle client-us/cycle server-switches/cycle; do
    echo
    echo "$unit over $ROUNDS rounds (min / median / max):"
    summarize "$results" "$unit"
  done
  echo
  echo "== p50 acquire at 100 and 100,000 existing leases ($(uptime | sed 's/.*load/load/')) =="
  out/bin/bench-service -latency 100,100000 -samples "$SAMPLES"
fi

if [ "${NET:-1}" = 1 ]; then
  NET_TARGETS=${NET_TARGETS:-native,native-auth,native-tls,native-auth-tls,native-raw,native-raw-auth,native-raw-tls,native-raw-auth-tls,native-durable,native-durable-auth-tls}
  NET_DURATION=${NET_DURATION:-4s}
  echo
  echo "== tokens and TLS against without: $ROUNDS rounds of $NET_DURATION per target, in 10 turns ($(uptime | sed 's/.*load/load/')) =="
  for round in $(seq 1 "$ROUNDS"); do
    echo "round $round" >>"$net_results"
    out/bin/bench-service -targets "$NET_TARGETS" -rounds 10 -cycles "$CYCLES" -duration "$NET_DURATION" | tee -a "$net_results"
  done
  for unit in cycles/s server-us/cycle client-us/cycle; do
    echo
    echo "$unit over $ROUNDS rounds (min / median / max):"
    summarize "$net_results" "$unit"
    echo
    echo "$unit over the same target's without tokens or TLS in the same round (min / median / max):"
    ratios "$net_results" "$unit"
  done
fi

if [ "${ALL:-0}" = 1 ]; then
  echo
  echo "== more targets ($(uptime | sed 's/.*load/load/')) =="
  out/bin/bench-service -targets native,native-raw -cycles "$CYCLES" -duration "$DURATION" -rounds "$ROUNDS"
  out/bin/bench-service -targets worker,worker-plain-js -cycles 4000 -duration "$DURATION" -rounds "$ROUNDS"
  out/bin/peers -targets redis,redis-lua -cycles "$CYCLES" -duration "$DURATION"
fi
echo "== done ($(uptime | sed 's/.*load/load/')) =="
