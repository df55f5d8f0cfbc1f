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
# up first (-w ms, 500 unless told; shmbench's -warmup, which runs doubling
# batches until one lasts that long), and the three
# calls, which one shmbench job runs one after the other, take turns at
# being the first: round r starts with the r-th of allreduce, bcast, barrier.
# Free ranks can also stay stacked on one CPU (where other work keeps the
# other CPU busy, or until the scheduler spreads them), which takes each
# call twice the turns: -1 adds the placement "one", every rank on CPU 0
# (the floor's "one", shmbench under taskset -c 0), the floor of that state.
#
# With -p, every line ends with the CPUs of the job's ranks, sampled every
# 100 ms while it runs ("5/3x4": the threads that ran longest since the
# previous sample, of 5 ranks, last ran on CPU 0 and of 3 on CPU 1, in 4
# samples running; the job's
# calls in the order they ran, each after its warm-up): which state a figure
# was taken in. The sampling takes a little CPU time from the job.
#
#   sh docs/floors/oversub_compare.sh [-r rounds] [-n iterations] [-w warm-up ms] [-c tasks] [-1] [-p] shmbench [shmbench ...]
#
# e.g. go build -o /tmp/shmbench ./cmd/shmbench &&
#      sh docs/floors/oversub_compare.sh -r 3 /tmp/shmbench /work/bin/shmbench-main
set -eu
rounds=3
iters=20000
warm=500
hogs=0
places="pinned free"
probe=0
while getopts r:n:w:c:1p o; do
	case $o in
	1) places="pinned free one" ;;
	p) probe=1 ;;
	r) rounds=$OPTARG ;;
	n) iters=$OPTARG ;;
	w) warm=$OPTARG ;;
	c) hogs=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
if [ $# -eq 0 ]; then
	echo "usage: oversub_compare.sh [-r rounds] [-n iterations] [-w warm-up ms] [-c tasks] [-1] [-p] shmbench [shmbench ...]" >&2
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
line() { # round place what call median p99 [cpus]
	awk -v r="$1" -v pl="$2" -v w="$3" -v c="$4" -v m="$5" -v p="$6" -v s="${7:-}" \
		'BEGIN { printf "%-5s %-6s %-44s %-10s %10.2f %10.2f %8.1f%s\n", r, pl, w, c, m, p, p / m, s == "" ? "" : "  " s }'
}
# run runs a command in the background and waits for it; with -p it samples
# the CPUs of the command's children meanwhile into $tmp/cpus.
run() {
	"$@" &
	job=$!
	: >"$tmp/cpus"
	: >"$tmp/last"
	while [ "$probe" = 1 ] && kill -0 "$job" 2>/dev/null; do
		sleep 0.1
		# Per rank, the CPU of the thread that ran longest since the last
		# sample (schedstat: nanoseconds on a CPU): a Go rank's work moves
		# between its threads, so the one with the most time in all need
		# not be the one running it now.
		grep -Hs '' /proc/[0-9]*/task/*/schedstat /proc/[0-9]*/task/*/stat | awk -v p="$job" -v last="$tmp/last" -v nxt="$tmp/next" '
			BEGIN { while ((getline l < last) > 0) { split(l, a, " "); was[a[1]] = a[2] } }
			{ split($1, f, "/") }
			f[6] ~ /^schedstat:/ { sub(/^schedstat:/, "", f[6]); ran[f[5]] = f[6] + 0; next }
			$4 == p { t = ran[f[5]]; print f[5], t > nxt
				d = t - was[f[5]]
				if (!(f[3] in busy) || d > busy[f[3]]) { busy[f[3]] = d; cpu[f[3]] = $39 } }
			END { for (r in cpu) { n[cpu[r]]++; k++ } if (k) printf "%d/%d\n", n[0], n[1] }' >>"$tmp/cpus"
		mv "$tmp/next" "$tmp/last" 2>/dev/null || :
	done
	wait "$job"
}
placed() { # the samples of the last run, runs of equal ones counted
	if [ "$probe" = 1 ]; then
		awk '$0 != l { if (n) printf "%s%sx%d", o++ ? "," : "", l, n; l = $0; n = 0 } { n++ }
			END { if (n) printf "%s%sx%d", o ? "," : "", l, n }' "$tmp/cpus"
	fi
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
			run "$tmp/oversub_floor" "$pol" "$fp" "$iters" "$warm" >"$tmp/out"
			hogs_stop
			m=$(sed -n 's/.*median *\([0-9.]*\) us.*/\1/p' "$tmp/out")
			p=$(sed -n 's/.*p99 *\([0-9.]*\) us.*/\1/p' "$tmp/out")
			line "$r" "$place" "floor $pol" barrier "$m" "$p" "$(placed)"
		done
		for b in "$@"; do
			hogs_start
			if ! run taskset -c "$cpus" "$b" run -np 8 -bind "$bind" -coll "$colls" -sizes 8 -iters "$iters" -warmup "${warm}ms" -format csv >"$tmp/csv" 2>"$tmp/err"; then
				cat "$tmp/err" >&2
				exit 1
			fi
			hogs_stop
			# coll,algo,np,dtype,op,bytes,iters,min_us,median_us,mean_us,max_us,p99_us,...
			c=$(placed)
			grep -v '^#' "$tmp/csv" | tail -n +2 | while IFS=, read -r coll _ _ _ _ _ _ _ med _ _ p99 _; do
				line "$r" "$place" "$b" "$coll" "$med" "$p99" "$c"
			done
		done
	done
	r=$((r + 1))
done
