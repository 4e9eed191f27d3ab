#!/usr/bin/env bash
# bench-scale.sh — issue 16's compile figures, measured on the CLI as a user
# runs it (`make bench` calls it): `hnsplan compile` of synthetic clusters
# in the shape of internal/synth (a tenth as many Linux nodes as Windows
# ones, every Linux node with a block, 200 pools) at 1,100, 2,200, 4,400
# and 5,000 nodes, each into a fresh directory, under /usr/bin/time.
#
# For each size it prints the wall time, CPU time (user + system), peak
# RSS, the size of one plan, of all plans, of all files written and the
# largest file. Then, for 4,500 Windows + 500 Linux nodes, the issue's
# figures, each with OK or OVER:
#   compile ≤ 5 s wall and ≤ 1 GiB peak RSS; growth 1,100 → 5,000 nodes at
#   most 1.4× linear (t5000/t1100 ≤ 1.4 × 5000/1100); all files ≤ 100 MB;
#   every file ≤ 256 KiB; one Windows node joining makes at most 3 existing
#   files change besides its own plan (counted by modification time:
#   compile leaves a file that already holds its bytes as it is).
# Wall times depend on what else the machine runs: the CPU time beside
# them is the steadier figure.
#
# Usage: hack/bench-scale.sh [HNSPLAN]   (default bin/hnsplan; needs go, GNU time)
# Environment: BENCH_SIZES="W:L ..." overrides the sizes (Windows:Linux);
# the last one is the one the figures are checked on. Each size is
# compiled BENCH_RUNS times (3): the fastest run's wall and CPU time and
# the highest peak RSS are reported.
set -euo pipefail

hnsplan=${1:-bin/hnsplan}
sizes=${BENCH_SIZES:-"1000:100 2000:200 4000:400 4500:500"}
runs=${BENCH_RUNS:-3}
timecmd=/usr/bin/time
if [ ! -x "$timecmd" ]; then
	echo "bench-scale: $timecmd (GNU time) is needed for wall time and peak RSS" >&2
	exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/gen" ./internal/synth/gen

# bytes FILES... sums sizes; largest DIR prints "bytes name" of the largest file.
sumsize() { find "$@" -maxdepth 0 -type f -printf '%s\n' 2>/dev/null | awk '{s+=$1} END {print s+0}'; }
largest() { find "$1" -maxdepth 1 -type f -printf '%s %f\n' | sort -n | tail -1; }
mb() { awk -v b="$1" 'BEGIN {printf "%.1f MB", b/1e6}'; }
kb() { awk -v b="$1" 'BEGIN {printf "%.1f KB", b/1e3}'; }

printf '%-7s %-7s %7s %7s %9s %10s %10s %11s  %s\n' nodes windows wall cpu 'peak RSS' 'one plan' 'all plans' 'all files' 'largest file'
first_wall="" first_nodes="" last=""
for s in $sizes; do
	w=${s%:*} l=${s#*:} n=$((w + l))
	in="$work/intent-$n" out="$work/plans-$n"
	"$work/gen" -windows "$w" -linux "$l" "$in"
	# The best of RUNS compiles, each into a fresh directory: creating
	# thousands of files costs this kind of VM anywhere from 0.1 to 2 s of
	# system time from one run to the next, which is the disk, not hnsplan.
	wall="" rss=0
	for r in $(seq "$runs"); do
		rm -rf "$out"
		"$timecmd" -o "$work/time-$n" -f '%e %U %S %M' "$hnsplan" compile "$in" -o "$out" >/dev/null
		read -r rwall ruser rsys rrss <"$work/time-$n"
		if [ -z "$wall" ] || awk "BEGIN {exit !($rwall < $wall)}"; then wall=$rwall user=$ruser sys=$rsys; fi
		[ "$rrss" -gt "$rss" ] && rss=$rrss
	done
	cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN {printf "%.2f", u+s}')
	plans=$(sumsize "$out"/[!_]*.json)
	all=$(sumsize "$out"/*)
	read -r big bigname < <(largest "$out")
	one=$(stat -c %s "$out/win-0000.json")
	printf '%-7s %-7s %6ss %6ss %5.2f GiB %10s %10s %11s  %s (%s)\n' "$n" "$w" "$wall" "$cpu" \
		"$(awk -v k="$rss" 'BEGIN {print k/1048576}')" "$(kb "$one")" "$(mb "$plans")" "$(mb "$all")" "$(kb "$big")" "$bigname"
	if [ -z "$first_wall" ]; then first_wall=$wall first_nodes=$n first_cpu=$cpu; fi
	last="$w $l $n $wall $rss $all $big $bigname $cpu"
	rm -rf "$in"
	[ "$s" = "${sizes##* }" ] || rm -rf "$out"
done

read -r w l n wall rss all big bigname cpu <<<"$last"
out="$work/plans-$n"
# One node joins: compile the same shape with one more Windows node into
# the same directory and count the files whose modification time moved.
"$work/gen" -windows $((w + 1)) -linux "$l" "$work/intent-join"
touch "$work/mark"
sleep 1 # modification times in whole seconds on some file systems
"$timecmd" -o "$work/time-join" -f '%e %M' "$hnsplan" compile "$work/intent-join" -o "$out" >/dev/null
read -r jwall jrss <"$work/time-join"
newplan=$(printf 'win-%04d.json' "$w")
written=$(find "$out" -maxdepth 1 -type f -newer "$work/mark" -printf '%f\n' | sort)
existing=$(grep -vx "$newplan" <<<"$written" | wc -l)

verdict() { if awk "BEGIN {exit !($1)}"; then echo OK; else echo OVER; fi; }
echo
echo "figures at $w Windows + $l Linux nodes (issue 16):"
printf '  compile wall     %6ss  (<= 5 s)              %s   [cpu %ss]\n' "$wall" "$(verdict "$wall <= 5")" "$cpu"
printf '  compile peak RSS %6.0f MiB (<= 1024 MiB)     %s\n' "$(awk -v k="$rss" 'BEGIN {print k/1024}')" "$(verdict "$rss <= 1048576")"
ratio=$(awk -v a="$wall" -v b="$first_wall" 'BEGIN {printf "%.2f", a/b}')
limit=$(awk -v a="$n" -v b="$first_nodes" 'BEGIN {printf "%.2f", 1.4*a/b}')
cratio=$(awk -v a="$cpu" -v b="$first_cpu" 'BEGIN {printf "%.2f", a/b}')
printf '  growth %s -> %s t ratio %s (<= %s)  %s   [cpu ratio %s]\n' "$first_nodes" "$n" "$ratio" "$limit" "$(verdict "$ratio <= $limit")" "$cratio"
printf '  all files        %s (<= 100 MB)          %s\n' "$(mb "$all")" "$(verdict "$all <= 100000000")"
printf '  largest file     %s %s (<= 256 KiB)  %s\n' "$(kb "$big")" "$bigname" "$(verdict "$big <= 262144")"
printf '  one node joins   %s written, %s existing changed (<= 3), %ss wall  %s\n' "$newplan" "$existing" "$jwall" "$(verdict "$existing <= 3")"
printf '    changed: %s\n' "$(grep -vx "$newplan" <<<"$written" | tr '\n' ' ')"

# diff of two such compiles, the head with another VNI (every network
# replaced, every route's VSID changed), as CI runs it on a pull request:
# both sides compiled (concurrently) and compared, markdown out.
"$work/gen" -windows "$w" -linux "$l" "$work/base"
"$work/gen" -windows "$w" -linux "$l" "$work/head"
sed -i 's/vni: 4096/vni: 4097/' "$work/head/cluster.cue"
grep -q 'vni: 4097' "$work/head/cluster.cue" || { echo "bench-scale: no vni in the synthetic intent" >&2; exit 1; }
"$timecmd" -o "$work/time-base" -f '%e %U %S %M' "$hnsplan" compile "$work/base" -o "$work/base-out" >/dev/null
set +e
"$timecmd" -o "$work/time-diff" -f '%e %U %S %M' "$hnsplan" diff "$work/base" "$work/head" -o markdown >"$work/diff.md" 2>"$work/diff.err"
rc=$?
set -e
[ "$rc" -le 2 ] || { cat "$work/diff.err" >&2; echo "bench-scale: hnsplan diff exited $rc" >&2; exit 1; }
read -r bwall _ _ _ <"$work/time-base"
read -r dwall duser dsys drss <"$work/time-diff"
dratio=$(awk -v a="$dwall" -v b="$bwall" 'BEGIN {printf "%.2f", a/b}')
mdsize=$(stat -c %s "$work/diff.md")
printf '  diff (VNI change) %ss wall, %s x one compile (%ss) (<= 2.5)  %s   [cpu %ss, peak %.0f MiB]\n' "$dwall" "$dratio" "$bwall" \
	"$(verdict "$dratio <= 2.5")" "$(awk -v u="$duser" -v s="$dsys" 'BEGIN {printf "%.2f", u+s}')" "$(awk -v k="$drss" 'BEGIN {print k/1024}')"
printf '  diff markdown    %s characters (cap 65,000)  %s\n' "$mdsize" "$(verdict "$mdsize <= 65000")"
grep -m1 'the same change on' "$work/diff.md" | sed 's/^/    /' || true
# The cluster's VXLAN change, said once: its window at maxUnavailable 1.
grep -m1 -o 'VXLAN VNI 4096 -> 4097: [^*]*' "$work/diff.md" | sed 's/^/    /' || true
