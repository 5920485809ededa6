#!/usr/bin/env bash
# Commits per second through gates/sqlfence, fenced next to unfenced, on
# SQLite and PostgreSQL with 1 and 8 writers of one holder on one resource
# (PostgreSQL also with Options.Exclusive): runs BenchmarkCommits (whose
# rounds interleave the configurations) and prints min/median/max per
# configuration, and of each round's time per commit over the unfenced
# transaction's in the same round (the slowdown); then BenchmarkFloorStatements (the one upsert that checks
# and raises the floor against the three statements it replaced, in one
# process, alternating in chunks of 20; three runs). Usage:
# scripts/bench-sqlfence.sh [commits per measurement] [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-300}
rounds=${2:-5}
echo "uptime: $(uptime)"
out=$(${GO:-go} test -run '^$' -bench '^BenchmarkCommits$' -benchtime "${n}x" ./gates/sqlfence/ -args -rounds "$rounds")
echo "$out" | grep '^Benchmark'
echo
echo "$out" | awk '
  /^BenchmarkCommits\// {
    name = $1; sub(/^BenchmarkCommits\//, "", name); sub(/(#[0-9]+)?-[0-9]+$/, "", name)
    if (!(name in v)) keys[++nk] = name
    for (i = 1; i <= NF; i++) if ($(i+1) == "commits/s") v[name] = v[name] " " $i
  }
  function stats(list, fmt,   m, i, j, t, med) {
    m = split(substr(list, 2), xs, " ")
    for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (xs[j] + 0 < xs[i] + 0) { t = xs[i]; xs[i] = xs[j]; xs[j] = t }
    med = (m % 2) ? xs[(m + 1) / 2] : (xs[m / 2] + xs[m / 2 + 1]) / 2
    return sprintf(fmt " " fmt " " fmt, xs[1], med, xs[m])
  }
  END {
    printf "%-32s %s\n", "commits/s", "min median max"
    for (k = 1; k <= nk; k++) printf "%-32s %s\n", keys[k], stats(v[keys[k]], "%.0f")
    print ""
    printf "%-32s %s\n", "time per commit / unfenced", "min median max (over rounds)"
    for (k = 1; k <= nk; k++) {
      if (keys[k] ~ /\/unfenced$/) continue
      peer = keys[k]; sub(/[a-z]+$/, "unfenced", peer)
      m = split(substr(v[keys[k]], 2), a, " "); split(substr(v[peer], 2), p, " ")
      r = ""
      for (i = 1; i <= m; i++) r = r " " (p[i] / a[i])
      printf "%-32s %s\n", keys[k], stats(r, "%.2fx")
    }
  }'
echo "uptime: $(uptime)"
${GO:-go} test -run '^$' -bench '^BenchmarkFloorStatements$' -benchtime 1500x -count 3 ./gates/sqlfence/ | grep '^Benchmark'
echo "uptime: $(uptime)"
