#!/usr/bin/env bash
# Runs a command in a cpuacct cgroup of its own and prints its wall time and
# the CPU time of everything it started, detached children included
# (wrangler dev and workerd, Chromium, PostgreSQL), with the load average
# before and after: docs/benchmarks.md, "Test suite times". Needs root and
# the cgroup v1 cpuacct hierarchy at /sys/fs/cgroup/cpuacct.
#   scripts/cgroup-cpu.sh make test-web-pages
set -uo pipefail
cg=/sys/fs/cgroup/cpuacct/cgroup-cpu-$$
mkdir "$cg" || exit 1
echo $$ > "$cg/cgroup.procs"
l0=$(cut -d' ' -f1-3 /proc/loadavg)
s=$(date +%s.%N)
"$@"
rc=$?
e=$(date +%s.%N)
echo $$ > /sys/fs/cgroup/cpuacct/cgroup.procs
awk -v rc=$rc -v s="$s" -v e="$e" -v u="$(cat "$cg/cpuacct.usage")" -v us="$(cat "$cg/cpuacct.usage_user")" \
  -v sy="$(cat "$cg/cpuacct.usage_sys")" -v l0="$l0" -v l1="$(cut -d' ' -f1-3 /proc/loadavg)" -v left="$(wc -l < "$cg/cgroup.procs")" \
  'BEGIN { printf "cgroup-cpu: exit %d, wall %.1f s, CPU %.1f s (user %.1f s, system %.1f s), load %s to %s, %d processes left\n", rc, e - s, u / 1e9, us / 1e9, sy / 1e9, l0, l1, left }' >&2
rmdir "$cg" 2>/dev/null
exit $rc
