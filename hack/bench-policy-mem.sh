#!/usr/bin/env bash
# bench-policy-mem.sh — issue 29's memory figure, on the CLI (`make bench`
# calls it): `hnsplan compile DIR --inventory INV -o OUT` of the policy
# benchmark's cluster (internal/synth/workload.Big: 2,000 policies, 30,000
# pods in 300 namespaces, 110 a node; its inventory a 13 MB JSON v1 List,
# as `kubectl get -o json` writes it), under /usr/bin/time: the highest
# peak RSS of BENCH_RUNS compiles (3), and the fastest wall and CPU time,
# with OK or OVER against 300 MiB (Felix's whole process peaked at 306 to
# 312 MiB for the same work). Each compile writes into a fresh directory,
# and the plans of two compiles are compared: they must be the same bytes.
#
# Usage: hack/bench-policy-mem.sh [HNSPLAN]   (default bin/hnsplan; needs go, GNU time)
set -euo pipefail

hnsplan=${1:-bin/hnsplan}
runs=${BENCH_RUNS:-3}
limit_mib=300
timecmd=/usr/bin/time
if [ ! -x "$timecmd" ]; then
	echo "bench-policy-mem: $timecmd (GNU time) is needed for wall time and peak RSS" >&2
	exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go run ./internal/synth/gen -workload big -inventory "$work/inventory.json" "$work/intent"

wall="" rss=0
for r in $(seq "$runs"); do
	out="$work/plans-$r"
	"$timecmd" -o "$work/time" -f '%e %U %S %M' "$hnsplan" compile "$work/intent" --inventory "$work/inventory.json" -o "$out" >/dev/null 2>"$work/err" ||
		{ cat "$work/err" >&2; echo "bench-policy-mem: compile failed" >&2; exit 1; }
	read -r rwall ruser rsys rrss <"$work/time"
	if [ -z "$wall" ] || awk "BEGIN {exit !($rwall < $wall)}"; then wall=$rwall; fi
	c=$(awk -v u="$ruser" -v s="$rsys" 'BEGIN {printf "%.2f", u+s}')
	if [ -z "${cpu:-}" ] || awk "BEGIN {exit !($c < $cpu)}"; then cpu=$c; fi
	[ "$rrss" -gt "$rss" ] && rss=$rrss
	if [ "$r" -gt 1 ] && ! diff -r -q "$work/plans-1" "$out" >/dev/null; then
		echo "bench-policy-mem: two compiles of the same intent wrote different plans" >&2
		exit 1
	fi
	[ "$r" -gt 1 ] && rm -rf "$out"
done
mib=$(awk -v k="$rss" 'BEGIN {printf "%.0f", k/1024}')
verdict=$(awk -v m="$mib" -v l="$limit_mib" 'BEGIN {print (m <= l) ? "OK" : "OVER"}')
printf 'policy cluster compile (2,000 policies, 30,000 pods): peak RSS %s MiB (<= %s MiB) %s, %ss wall, %ss cpu\n' \
	"$mib" "$limit_mib" "$verdict" "$wall" "$cpu"
