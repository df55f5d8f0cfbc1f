#!/bin/sh
# oversub_compare.sh: oversub_floor beside shmbench's allreduce, bcast and
# barrier of 8 bytes on 8 processes on CPUs 0 and 1, interleaved, so that
# both see the same load. Each round runs, per placement, the floor with the
# yield and futex policies and then each shmbench build, all with the same
# number of timed iterations; pinned is the floor's "spread" and shmbench's
# -bind core (rank r on CPU r % 2), free is "free" and -bind none. Every line
# gives the median and p99 of the iteration times in microseconds: the
# slowest rank's time from leaving the previous barrier to leaving this call.
# With -c N, N busy tasks from outside the job (shell loops, unbound) compete
# for the CPUs during every measurement: a wait policy must not hand them the
# ranks' CPU time (issue 28: within 1.5x of the floor, p99 at most 10x the
# median, also beside such a task).
#
# Freshly started ranks that the scheduler places itself (free) are spread
# over the CPUs as they will stay only after a while, and until then an
# iteration can take twice as long: so the floor and every shmbench case warm
# up for the same time first (-w ms, shmbench's -warmup), and the three
# calls, which one shmbench job runs one after the other, take turns at
# being the first: round r starts with the r-th of allreduce, bcast, barrier.
# Free ranks can also stay stacked on one CPU (where other sessions keep the
# other CPU busy, or until the scheduler spreads them), which takes each
# call twice the turns: -1 adds the placement "one", every rank on CPU 0
# (the floor's "one", shmbench under taskset -c 0), the floor of that state.
#
#   sh docs/floors/oversub_compare.sh [-r rounds] [-n iterations] [-w warm-up ms] [-c tasks] [-1] shmbench [shmbench ...]
#
# e.g. go build -o /tmp/shmbench ./cmd/shmbench &&
#      sh docs/floors/oversub_compare.sh -r 3 /tmp/shmbench /work/bin/shmbench-main
set -eu
rounds=3
iters=20000
warm=200
hogs=0
places="pinned free"
while getopts r:n:w:c:1 o; do
	case $o in
	1) places="pinned free one" ;;
	r) rounds=$OPTARG ;;
	n) iters=$OPTARG ;;
	w) warm=$OPTARG ;;
	c) hogs=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
if [ $# -eq 0 ]; then
	echo "usage: oversub_compare.sh [-r rounds] [-n iterations] [-w warm-up ms] [-c tasks] [-1] shmbench [shmbench ...]" >&2
	exit 2
fi
dir=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
pids=""
# hogs_start starts the competing tasks, hogs_stop ends them (by their ids).
hogs_start() {
	i=0
	while [ "$i" -lt "$hogs" ]; do
		sh -c 'while :; do :; done' &
		pids="$pids $!"
		i=$((i + 1))
	done
}
hogs_stop() {
	for p in $pids; do
		kill "$p" 2>/dev/null || :
		wait "$p" 2>/dev/null || :
	done
	pids=""
}
trap 'hogs_stop; rm -rf "$tmp"' EXIT
gcc -O2 -Wall -Werror -pthread -o "$tmp/oversub_floor" "$dir/oversub_floor.c"

if [ "$hogs" -gt 0 ]; then
	echo "# $hogs busy task(s) from outside the job compete during every measurement"
fi
printf '%-5s %-6s %-44s %-10s %10s %10s %8s\n' round place what call median_us p99_us p99/med
line() { # round place what call median p99
	awk -v r="$1" -v pl="$2" -v w="$3" -v c="$4" -v m="$5" -v p="$6" \
		'BEGIN { printf "%-5s %-6s %-44s %-10s %10.2f %10.2f %8.1f\n", r, pl, w, c, m, p, p / m }'
}
r=1
while [ "$r" -le "$rounds" ]; do
	case $(((r - 1) % 3)) in
	0) colls=allreduce,bcast,barrier ;;
	1) colls=bcast,barrier,allreduce ;;
	*) colls=barrier,allreduce,bcast ;;
	esac
	for place in $places; do
		cpus=0,1
		case $place in
		pinned) fp=spread bind=core ;;
		free) fp=free bind=none ;;
		*) fp=one bind=none cpus=0 ;;
		esac
		for pol in yield futex; do
			hogs_start
			out=$("$tmp/oversub_floor" "$pol" "$fp" "$iters" "$warm")
			hogs_stop
			m=$(echo "$out" | sed -n 's/.*median *\([0-9.]*\) us.*/\1/p')
			p=$(echo "$out" | sed -n 's/.*p99 *\([0-9.]*\) us.*/\1/p')
			line "$r" "$place" "floor $pol" barrier "$m" "$p"
		done
		for b in "$@"; do
			hogs_start
			if ! taskset -c "$cpus" "$b" run -np 8 -bind "$bind" -coll "$colls" -sizes 8 -iters "$iters" -warmup "${warm}ms" -format csv >"$tmp/csv" 2>"$tmp/err"; then
				cat "$tmp/err" >&2
				exit 1
			fi
			hogs_stop
			# coll,algo,np,dtype,op,bytes,iters,min_us,median_us,mean_us,max_us,p99_us,...
			grep -v '^#' "$tmp/csv" | tail -n +2 | while IFS=, read -r coll _ _ _ _ _ _ _ med _ _ p99 _; do
				line "$r" "$place" "$b" "$coll" "$med" "$p99"
			done
		done
	done
	r=$((r + 1))
done
