#!/usr/bin/env bash
# Commits per second through gates/sqlfence, fenced next to unfenced, on
# SQLite and PostgreSQL with 1 and 8 writers: runs BenchmarkCommits (whose
# rounds interleave the configurations) and prints min/median/max per
# configuration; then BenchmarkFloorStatements (the one upsert that checks
# and raises the floor against the three statements it replaced, in one
# process, alternating in chunks of 20; three runs). Usage:
# scripts/bench-sqlfence.sh [commits per measurement]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-300}
echo "uptime: $(uptime)"
out=$(${GO:-go} test -run '^$' -bench '^BenchmarkCommits$' -benchtime "${n}x" ./gates/sqlfence/)
echo "$out" | grep '^Benchmark'
echo
echo "$out" | awk '
  /^BenchmarkCommits\// {
    name = $1; sub(/^BenchmarkCommits\//, "", name); sub(/(#[0-9]+)?-[0-9]+$/, "", name)
    if (!(name in v)) keys[++nk] = name
    for (i = 1; i <= NF; i++) if ($(i+1) == "commits/s") v[name] = v[name] " " $i
  }
  END {
    printf "%-28s %10s %10s %10s\n", "commits/s", "min", "median", "max"
    for (k = 1; k <= nk; k++) {
      m = split(substr(v[keys[k]], 2), xs, " ")
      for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (xs[j] + 0 < xs[i] + 0) { t = xs[i]; xs[i] = xs[j]; xs[j] = t }
      med = (m % 2) ? xs[(m + 1) / 2] : (xs[m / 2] + xs[m / 2 + 1]) / 2
      printf "%-28s %10.0f %10.0f %10.0f\n", keys[k], xs[1], med, xs[m]
    }
  }'
echo "uptime: $(uptime)"
${GO:-go} test -run '^$' -bench '^BenchmarkFloorStatements$' -benchtime 1500x -count 3 ./gates/sqlfence/ | grep '^Benchmark'
echo "uptime: $(uptime)"
