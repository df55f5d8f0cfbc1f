// allgatherv_cma_split: an np=2 allgatherv of uneven blocks of private
// buffers by cross-memory attach, in C, with nothing else: rank 0's block
// has B0 bytes, rank 1's B1. Each process copies its own block into its
// recv and writes the first min(B, cap) bytes of it into the peer's recv
// (process_vm_writev); the peer reads the rest from its send
// (process_vm_readv). cap 0: every block read by the peer; cap at least
// the larger block: every block written whole. shmcoll's Single
// allgatherv writes up to halfway between the smaller and the mean block
// (collectives/single.go, singlePush). Between calls a barrier; a call's
// time is the slower process's, the median after the warm-up is printed,
// in wall-clock time and in CPU time (what the copies cost without the
// time a process waited for a CPU), with each process's wall-clock median.
//
//   gcc -O2 -o /tmp/allgatherv_cma_split docs/floors/allgatherv_cma_split.c
//   /tmp/allgatherv_cma_split 256 768 0      # allgatherv of 1 MiB, every block read
//   /tmp/allgatherv_cma_split 256 768 384    # written up to 384 KiB, as shmcoll
//   /tmp/allgatherv_cma_split 256 768 768    # every block written
#include "floors.h"

#include <string.h>

static size_t N[2], cap;
static int iters;
static char *sendb, *recvb; // the same addresses in both processes (made before fork)
static volatile uint64_t *bar; // bar[16*r]: rank r's barrier counter
static uint64_t *times, *cpu;  // times[r*iters + i]: rank r's call i, ns; cpu: the same in CPU time

static void rank(int r, pid_t peer, const char *v) {
	(void)v;
	int q = 1 - r;
	pin(r);
	memset(sendb, r + 1, N[r]);
	memset(recvb, 0, N[0] + N[1]);
	char *own = recvb + (r ? N[0] : 0), *theirs = recvb + (q ? N[0] : 0);
	size_t x = N[r] < cap ? N[r] : cap, y = N[q] < cap ? N[q] : cap; // the parts written
	for (int i = 1; i <= iters; i++) {
		bar[16 * r] = i; // the barrier: the peer's send is written and its previous call done
		while (bar[16 * q] < (uint64_t)i)
			_mm_pause();
		uint64_t t0 = now(), c0 = cputime();
		memcpy(own, sendb, x);
		if (x > 0)
			cma(peer, sendb, own, x, 1); // into the peer's recv, at this block's place
		if (N[q] > y)
			cma(peer, theirs + y, sendb + y, N[q] - y, 0);
		memcpy(own + x, sendb + x, N[r] - x);
		times[r * iters + i - 1] = now() - t0;
		cpu[r * iters + i - 1] = cputime() - c0;
	}
	bar[16 * r] = iters + 1;
	while (bar[16 * q] < (uint64_t)iters + 1)
		_mm_pause();
	for (size_t k = 0; k < N[0] + N[1]; k++) {
		if (recvb[k] != (k < N[0] ? 1 : 2)) {
			fprintf(stderr, "rank %d: byte %zu of the result is %d\n", r, k, recvb[k]);
			exit(1);
		}
	}
}

// median_after_warmup is the median of rank r's times after the first quarter.
static uint64_t median_after_warmup(uint64_t *t, int r) {
	uint64_t *s = t + (size_t)r * iters;
	int skip = iters / 4;
	qsort(s + skip, iters - skip, sizeof s[0], cmp_u64);
	return s[skip + (iters - skip) / 2];
}

int main(int argc, char **argv) {
	if (argc < 4 || atoi(argv[1]) <= 0 || atoi(argv[2]) <= 0 || atoi(argv[3]) < 0) {
		fprintf(stderr, "usage: allgatherv_cma_split KiB-of-block-0 KiB-of-block-1 KiB-written [calls]\n");
		return 2;
	}
	N[0] = (size_t)atoi(argv[1]) << 10;
	N[1] = (size_t)atoi(argv[2]) << 10;
	cap = (size_t)atoi(argv[3]) << 10;
	iters = argc > 4 ? atoi(argv[4]) : (int)(((size_t)2 << 30) / (N[0] + N[1]) + 20);
	if (iters > 2000)
		iters = 2000;
	bar = map_shared(4096);
	times = map_shared(sizeof(uint64_t) * 2 * iters);
	cpu = map_shared(sizeof(uint64_t) * 2 * iters);
	sendb = aligned_alloc(4096, N[0] > N[1] ? N[0] : N[1]);
	recvb = aligned_alloc(4096, N[0] + N[1]);
	if (run_pair(rank, "") != 0)
		return 1;
	uint64_t med = warm_median_slower(times, iters), cmed = warm_median_slower(cpu, iters);
	uint64_t m0 = median_after_warmup(times, 0), m1 = median_after_warmup(times, 1);
	printf("blocks %zu and %zu KiB, %zu KiB written: slower process median %.1f us; CPU time %.1f us; process 0 %.1f us, process 1 "
	       "%.1f us\n",
	       N[0] >> 10, N[1] >> 10, cap >> 10, med / 1e3, cmed / 1e3, m0 / 1e3, m1 / 1e3);
	return 0;
}
