#!/usr/bin/env bash
# bench-vet-cue.sh — issue 29's vet figure, on the CLI (`make bench` calls
# it): the CPU time (user + system) of `hnsplan vet` against CUE's own
# `cue export` of the same intent with the schema (schema/cluster.cue in
# the intent's package, #Intent embedded: what hnsplan's load does before
# its own checks), at 1,100 and 5,000 nodes (internal/synth: 1,000 + 100
# and 4,500 + 500). Each ratio is printed with OK or OVER against 1.5×.
#
# cue is the module's tool dependency (go tool cue), built once here.
# CPU rather than wall time: the machine may be busy. A measurement is
# the CPU of BENCH_LOOPS runs in a row (5: one run at 1,100 nodes takes
# a fifth of a second, and GNU time counts in hundredths), divided by
# them; each is measured BENCH_RUNS times (3) and the least is compared,
# which is the steadiest figure on a shared machine.
#
# Usage: hack/bench-vet-cue.sh [HNSPLAN]   (default bin/hnsplan; needs go, GNU time)
# Environment: BENCH_SIZES="W:L ..." overrides the sizes (Windows:Linux).
set -euo pipefail

hnsplan=${1:-bin/hnsplan}
sizes=${BENCH_SIZES:-"1000:100 4500:500"}
runs=${BENCH_RUNS:-3}
loops=${BENCH_LOOPS:-5}
limit=1.5
timecmd=/usr/bin/time
if [ ! -x "$timecmd" ]; then
	echo "bench-vet-cue: $timecmd (GNU time) is needed for CPU time" >&2
	exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/gen" ./internal/synth/gen
go build -o "$work/cue" cuelang.org/go/cmd/cue
schema=$(cd "$(dirname "$0")/.." && pwd)/schema/cluster.cue

# mincpu CMD... runs CMD (in the current directory) $loops times in a row,
# $runs times, and prints the least user + system seconds of one run.
mincpu() {
	local best="" t
	for _ in $(seq "$runs"); do
		"$timecmd" -o "$work/time" -f '%U %S' sh -c 'for i in $(seq '"$loops"'); do "$@" >/dev/null || exit 1; done' sh "$@"
		t=$(awk -v n="$loops" '{printf "%.3f", ($1 + $2) / n}' "$work/time")
		if [ -z "$best" ] || awk "BEGIN {exit !($t < $best)}"; then best=$t; fi
	done
	echo "$best"
}

verdict() { if awk "BEGIN {exit !($1)}"; then echo OK; else echo OVER; fi; }

printf '%-7s %10s %11s %7s\n' nodes 'vet cpu' 'cue export' ratio
for s in $sizes; do
	w=${s%:*} l=${s#*:} n=$((w + l))
	in="$work/intent-$n" cuedir="$work/cue-$n"
	"$work/gen" -windows "$w" -linux "$l" "$in"
	# The same files, with the schema in their package and #Intent
	# embedded: cue export then unifies, validates and exports the
	# intent as hnsplan's loader does (intent.ExportCUE).
	cp -r "$in" "$cuedir"
	pkg=$(awk '/^package /{print $2; exit}' "$in/cluster.cue")
	sed "s/^package schema\$/package $pkg/" "$schema" >"$cuedir/zz_schema.cue"
	printf 'package %s\n\n#Intent\n' "$pkg" >"$cuedir/zz_intent.cue"
	(cd "$cuedir" && "$work/cue" export . >/dev/null) || { echo "bench-vet-cue: cue export failed" >&2; exit 1; }
	vet=$(mincpu "$hnsplan" vet --severity warning "$in")
	cue=$(cd "$cuedir" && mincpu "$work/cue" export .)
	ratio=$(awk -v a="$vet" -v b="$cue" 'BEGIN {printf "%.2f", a/b}')
	printf '%-7s %9ss %10ss %6sx  (<= %sx) %s\n' "$n" "$vet" "$cue" "$ratio" "$limit" "$(verdict "$ratio <= $limit")"
done
