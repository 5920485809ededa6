#!/usr/bin/env bash
# Fails when a Go package with tests is in no `go test` of the targets named
# on the command line (make's TESTS: `make lint` runs it), so that a new
# package's tests cannot be left out of `make test` unnoticed.
#
#   scripts/check-test-targets.sh test-core-race test-gates ...
#
# How: `make -n` prints each target's recipe with GO set to a stand-in go;
# every `go test` line is then run with the stand-in recording the packages
# it names (resolved by the real `go list`, under the line's own GOOS and
# build tags) instead of testing them. A `go test -run '^$'` (a fuzz run
# only) runs no test and covers nothing. Packages with tests are those of
# `go list ./...` natively and under GOOS=js GOARCH=wasm; scripts/peers, a
# module of its own, has none.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
real_go=$(command -v "$GO")

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
shim=$tmp/go
covered=$tmp/covered
: > "$covered"
: > "$tmp/recorded"

cat > "$shim" <<'EOF'
#!/usr/bin/env bash
# The stand-in go: `go test` records its packages, anything else is the
# real go.
set -euo pipefail
[ "${1:-}" = test ] && [ -n "${CHECK_RECORD:-}" ] || exec "$CHECK_REAL_GO" "$@"
shift
pkgs=() tags= norun=
while [ $# -gt 0 ]; do
  case $1 in
    -args) break ;;
    -run) norun=$([ "$2" = '^$' ] && echo 1 || true); shift 2 ;;
    -run=*) [ "${1#-run=}" = '^$' ] && norun=1; shift ;;
    -tags) tags=$2; shift 2 ;;
    -tags=*) tags=${1#-tags=}; shift ;;
    -timeout|-fuzz|-fuzztime|-fuzzminimizetime|-count|-bench|-benchtime|-cpu|-p|-parallel|-skip|-o|-exec|-coverprofile|-coverpkg|-covermode)
      shift 2 ;;
    -*) shift ;;
    *) pkgs+=("$1"); shift ;;
  esac
done
# A line of GOOS, GOARCH, -tags and the packages, resolved all at once below.
[ -n "$norun" ] || [ ${#pkgs[@]} -eq 0 ] || echo "${GOOS:--} ${GOARCH:--} ${tags:--} ${pkgs[*]}" >> "$CHECK_RECORD"
EOF
chmod +x "$shim"

# The recipes, each line joined with its continuations; only the lines
# that run go test are run.
export CHECK_REAL_GO=$real_go
unset MAKEFLAGS MFLAGS MAKELEVEL
make -n -B --no-print-directory GO="$shim" "$@" > "$tmp/recipes"
sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$tmp/recipes" | grep -F -- "$shim test" > "$tmp/lines" || true
while IFS= read -r line; do
  CHECK_RECORD=$tmp/recorded bash -euo pipefail -c "$line" || { echo "check-test-targets: could not read: $line" >&2; exit 1; }
done < "$tmp/lines"
# One `go list` for each GOOS, GOARCH and -tags ("-": none given).
while read -r goos goarch tags; do
  awk -v k="$goos $goarch $tags" '$1" "$2" "$3 == k { for (i = 4; i <= NF; i++) print $i }' "$tmp/recorded" | sort -u > "$tmp/pkgs"
  env=()
  [ "$goos" = - ] || env+=(GOOS="$goos")
  [ "$goarch" = - ] || env+=(GOARCH="$goarch")
  env "${env[@]}" xargs "$GO" list -tags "${tags#-}" < "$tmp/pkgs" >> "$covered"
done < <(cut -d' ' -f1-3 "$tmp/recorded" | sort -u)

list='{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}'
{ "$GO" list -f "$list" ./...; GOOS=js GOARCH=wasm "$GO" list -f "$list" ./...; } | sort -u > "$tmp/tested"
sort -u "$covered" > "$tmp/covered.sorted"
missing=$(comm -23 "$tmp/tested" "$tmp/covered.sorted")
if [ -n "$missing" ]; then
  echo "check-test-targets: Go packages with tests that no make test target runs:" >&2
  echo "$missing" >&2
  exit 1
fi
echo "check-test-targets: $(wc -l < "$tmp/tested") Go packages with tests, each run by a make test target"
