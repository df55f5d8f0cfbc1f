#!/bin/sh
# small_compare.sh: rooted_floor beside shmbench compare's np=2 bcast and
# reduce of 8 bytes to 4 KiB (Open MPI, MPICH, shmcoll), interleaved round by
# round so that both see the same machine. Each round runs rooted_floor for
# both collectives at every size, eager (MPICH's eager cell) and early (the
# mismatch rule under early return), after the symmetric barrier (shmcoll's)
# and after the one that releases the sending rank first (bcast: the root,
# reduce: the non-root), then one round of shmbench compare. It prints a
# line per round and cell (ns), then a table of the medians over the rounds
# (µs) with the target, 0.8x the faster MPI, and what keeps a cell from it:
#   any copy       below the eager floor with the sender released first:
#                  no call that moves the lines through shared memory reaches it
#   the rule       below the floor of the mismatch rule under early return
#                  with the sender released first, not below the eager one,
#                  where the first is more than 5% above the second
#   barrier order  below the early floor after the symmetric barrier only:
#                  reachable only if the barrier before the call releases
#                  the sending rank first (after a symmetric barrier the
#                  receiving rank, which arrived last, leaves first)
#   -              above every floor
# "(within 5%)": the target and the floor that decided are within 5% of
# each other, which the rounds' spread can turn either way.
#
#   sh docs/floors/small_compare.sh [-r rounds] [-n calls] [-s "sizes"] shmbench
#
# e.g. go build -o /tmp/shmbench ./cmd/shmbench &&
#      sh docs/floors/small_compare.sh -r 5 /tmp/shmbench
set -eu
rounds=5
calls=50000
sizes="8 64 256 1024 4096"
while getopts r:n:s: o; do
	case $o in
	r) rounds=$OPTARG ;;
	n) calls=$OPTARG ;;
	s) sizes=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
if [ $# -ne 1 ]; then
	echo "usage: small_compare.sh [-r rounds] [-n calls] [-s \"sizes\"] shmbench" >&2
	exit 2
fi
bench=$1
dir=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gcc -O2 -Wall -Werror -pthread -o "$tmp/rooted_floor" "$dir/rooted_floor.c"
csizes=$(echo $sizes | tr ' ' ',')

# $tmp/all: round coll bytes what ns, one line per figure.
: >"$tmp/all"
printf '%-5s %-6s %6s %-22s %8s %10s\n' round coll bytes what ns handoff_ns
r=1
while [ "$r" -le "$rounds" ]; do
	for coll in bcast reduce; do
		if [ "$coll" = bcast ]; then sf=root-first; else sf=nonroot-first; fi
		for n in $sizes; do
			for mode in eager early; do
				for b in symmetric "$sf"; do
					out=$("$tmp/rooted_floor" "$coll" "$mode" "$b" "$n" "$calls")
					ns=$(echo "$out" | sed -n 's/.*slower rank *\([0-9]*\) ns.*/\1/p')
					h=$(echo "$out" | sed -n 's/.*handoff *\([0-9]*\) ns.*/\1/p')
					if [ "$b" = symmetric ]; then w="$mode,symmetric"; else w="$mode,sender-first"; fi
					printf '%-5s %-6s %6s %-22s %8s %10s\n' "$r" "$coll" "$n" "floor $w" "$ns" "$h"
					echo "$r $coll $n $w $ns" >>"$tmp/all"
				done
			done
		done
	done
	if ! "$bench" compare -np 2 -impls openmpi,mpich,shmcoll -coll bcast,reduce -sizes "$csizes" -rounds 1 -format json >"$tmp/json" 2>"$tmp/err"; then
		cat "$tmp/err" >&2
		exit 1
	fi
	# {"type":"compare","coll":"bcast",...,"bytes":8,...,"median_us":{"mpich":0.27,"openmpi":0.58,"shmcoll":0.25},...}
	probe=$(grep '"type":"block"' "$tmp/json" | sed -n 's/.*"probe_ns":\([0-9.]*\).*/\1/p' | sort -n |
		awk '{ v[NR] = $1 } END { if (NR) printf "%.0f", v[int((NR + 1) / 2)] }')
	grep '"type":"compare"' "$tmp/json" | while read -r l; do
		coll=$(echo "$l" | sed -n 's/.*"coll":"\([a-z_]*\)".*/\1/p')
		n=$(echo "$l" | sed -n 's/.*"bytes":\([0-9]*\).*/\1/p')
		for impl in shmcoll mpich openmpi; do
			us=$(echo "$l" | sed -n 's/.*"median_us":{[^}]*"'$impl'":\([0-9.e+-]*\).*/\1/p')
			[ -n "$us" ] || continue # an MPI that is absent
			ns=$(awk -v u="$us" 'BEGIN { printf "%.0f", u * 1000 }')
			printf '%-5s %-6s %6s %-22s %8s %10s\n' "$r" "$coll" "$n" "$impl" "$ns" "$probe"
			echo "$r $coll $n $impl $ns" >>"$tmp/all"
		done
	done
	r=$((r + 1))
done

echo
echo "np=2, medians over $rounds rounds, µs; floors: rooted_floor, $calls calls each"
echo
echo "| collective | bytes | floor eager, sender first | floor early, sender first | floor early, symmetric | shmcoll | MPICH | Open MPI | 0.8x faster MPI | below the target's reach |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
awk '
{ k = $2 " " $3 " " $4; n[k]++; v[k, n[k]] = $5; if (!($2 " " $3 in seen)) { seen[$2 " " $3] = 1; order[++cells] = $2 " " $3 } }
function med(k,   m, i, j, t, a) {
	m = n[k]
	if (!m) return -1
	for (i = 1; i <= m; i++) a[i] = v[k, i]
	for (i = 2; i <= m; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
	return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
}
END {
	for (c = 1; c <= cells; c++) {
		split(order[c], cb, " ")
		fe = med(order[c] " eager,sender-first"); fr = med(order[c] " early,sender-first")
		fs = med(order[c] " early,symmetric"); s = med(order[c] " shmcoll")
		mp = med(order[c] " mpich"); om = med(order[c] " openmpi")
		best = mp < 0 || (om >= 0 && om < mp) ? om : mp
		t = 0.8 * best
		# The rule decides only where it costs more than 5% over eager.
		rule = fr > 1.05 * fe
		why = t < fe || (t < fr && !rule) ? "any copy" : t < fr ? "the rule" : t < fs ? "barrier order" : "-"
		f = t < fe ? fe : t < fr ? fr : fs # the floor that decided, or the nearest above
		if (t > 0.95 * f && t < 1.05 * f) why = why " (within 5%)"
		printf "| %s | %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %s |\n", cb[1], cb[2], fe / 1e3, fr / 1e3, fs / 1e3, s / 1e3, mp / 1e3, om / 1e3, t / 1e3, why
	}
}' "$tmp/all"
