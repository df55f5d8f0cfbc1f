// allgather_cma_pieces: the ways an np=2 allgather of private buffers can
// move its blocks by cross-memory attach, in C, with nothing else, to find
// the fastest: two processes (CPUs 0 and 1), each with a block of B bytes
// in its send and 2B bytes of recv, copy their own block into their recv
// and the peer's block between the two processes, in pieces of P bytes:
//
//   method  read:   process_vm_readv of the peer's block from its send
//           write:  process_vm_writev of the own block into the peer's recv
//   order   first:  the whole own copy, then the pieces between processes
//           last:   the pieces between processes, then the own copy
//                   (Open MPI's two-process allgather: read, then memcpy)
//           inter:  own copy and cross copy alternate piece by piece (for
//                   write, each piece is written to the peer while it is
//                   in the cache after the own copy)
//   own     mem:    memcpy; nt: non-temporal stores
//   huge    1: MADV_HUGEPAGE on send and recv before they are first touched;
//           2: MADV_COLLAPSE on send and recv after (what a library can do
//           to its caller's buffers); 3: MADV_COLLAPSE on recv only
//
// P 0 means the whole block in one system call. Between calls a barrier; a
// call's time is the slower process's; the median over the calls after a
// warm-up is printed, in wall-clock time and CPU time (what the copies
// cost without the time a process waited for a CPU on a shared machine),
// and the tenth percentile of the wall-clock times (on a shared machine,
// the calls during which both processes ran undisturbed).
//
//   gcc -O2 -o /tmp/agp docs/floors/allgather_cma_pieces.c
//   /tmp/agp 32768 0 read last mem 0       # Open MPI's pattern, allgather of 64 MiB
//   /tmp/agp 32768 512 read last mem 0     # MPICH's pieces (process_vm_readv of 512 KiB)
//   /tmp/agp 8192 512 write inter mem 3    # shmcoll's Single allgather of 16 MiB
//   /tmp/agp 32768 512 write inter nt 3    # shmcoll's Single allgather of 64 MiB
//   /tmp/agp 32768 512 read inter nt 2     # reads, with the peers' sends collapsed
#include "floors.h"

#include <string.h>

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 // Linux 6.1
#endif

static size_t B, P;
static int iters, wr, order, nt, huge; // order: 0 first, 1 last, 2 inter
static char *sendb, *recvb;             // the same addresses in both processes (made before fork)
static volatile uint64_t *bar;          // bar[16*r]: rank r's barrier counter
static uint64_t *times, *cpu;           // times[r*iters + i]: rank r's call i, ns; cpu: in CPU time

static void own(char *dst, const char *src, size_t n) {
	if (nt)
		ntcopy(dst, src, n);
	else
		memcpy(dst, src, n);
}

// cross moves bytes [lo, lo+n) of the blocks between the processes: rank
// r's into the peer's recv (write), or the peer's into r's recv (read).
static void cross(int r, pid_t peer, size_t lo, size_t n) {
	if (wr)
		cma(peer, sendb + lo, recvb + r * B + lo, n, 1);
	else
		cma(peer, recvb + (1 - r) * B + lo, sendb + lo, n, 0);
}

static void rank(int r, pid_t peer, const char *v) {
	(void)v;
	int q = 1 - r;
	pin(r);
	memset(sendb, r + 1, B);
	memset(recvb, 0, 2 * B);
	if (huge >= 2) { // the pages exist: made huge in place, and again (a no-op) to time it
		for (int k = 0; k < 2; k++) {
			uint64_t t = now();
			if ((huge == 2 && madvise(sendb, B, MADV_COLLAPSE) != 0) || madvise(recvb, 2 * B, MADV_COLLAPSE) != 0) {
				perror("madvise(MADV_COLLAPSE)");
				exit(1);
			}
			if (r == 0)
				fprintf(stderr, "rank 0: MADV_COLLAPSE of send and recv %.1f us\n", (now() - t) / 1e3);
		}
	}
	char *mine = recvb + r * B;
	size_t step = P ? P : B;
	for (int i = 1; i <= iters; i++) {
		bar[16 * r] = i; // the barrier: the peer's send is written and its previous call done
		while (bar[16 * q] < (uint64_t)i)
			_mm_pause();
		uint64_t t0 = now(), c0 = cputime();
		if (order == 0)
			own(mine, sendb, B);
		for (size_t lo = 0; lo < B; lo += step) {
			size_t n = B - lo < step ? B - lo : step;
			if (order == 2)
				own(mine + lo, sendb + lo, n);
			cross(r, peer, lo, n);
		}
		if (order == 1)
			own(mine, sendb, B);
		times[r * iters + i - 1] = now() - t0;
		cpu[r * iters + i - 1] = cputime() - c0;
	}
	bar[16 * r] = iters + 1;
	while (bar[16 * q] < (uint64_t)iters + 1)
		_mm_pause();
	for (size_t k = 0; k < 2 * B; k++) {
		if (recvb[k] != (int)(k / B) + 1) {
			fprintf(stderr, "rank %d: byte %zu of the result is %d\n", r, k, recvb[k]);
			exit(1);
		}
	}
}

int main(int argc, char **argv) {
	if (argc < 6 || atoi(argv[1]) <= 0 || atoi(argv[2]) < 0) {
		fprintf(stderr, "usage: allgather_cma_pieces KiB-per-block KiB-per-piece read|write first|last|inter mem|nt [huge "
		                "[calls]]\n");
		return 2;
	}
	B = (size_t)atoi(argv[1]) << 10;
	P = (size_t)atoi(argv[2]) << 10;
	wr = !strcmp(argv[3], "write");
	order = !strcmp(argv[4], "first") ? 0 : !strcmp(argv[4], "last") ? 1 : 2;
	nt = !strcmp(argv[5], "nt");
	huge = argc > 6 ? atoi(argv[6]) : 0;
	iters = argc > 7 ? atoi(argv[7]) : (int)(((size_t)2 << 30) / (2 * B) + 20);
	if (iters > 2000)
		iters = 2000;
	bar = map_shared(4096);
	times = map_shared(sizeof(uint64_t) * 2 * iters);
	cpu = map_shared(sizeof(uint64_t) * 2 * iters);
	size_t al = 2 << 20;
	sendb = aligned_alloc(al, (B + al - 1) / al * al);
	recvb = aligned_alloc(al, (2 * B + al - 1) / al * al);
	if (huge == 1 && (madvise(sendb, B, MADV_HUGEPAGE) != 0 || madvise(recvb, 2 * B, MADV_HUGEPAGE) != 0)) {
		perror("madvise");
		return 1;
	}
	if (run_pair(rank, "") != 0)
		return 1;
	uint64_t med = warm_median_slower(times, iters), cmed = warm_median_slower(cpu, iters);
	int skip = iters / 4, n = iters - skip;
	uint64_t *s = sort_slower(times + skip, times + iters + skip, n);
	printf("%zu KiB blocks, pieces %zu KiB, %s %s %s huge %d: slower process median %.1f us, p10 %.1f us; CPU time %.1f us\n",
	       B >> 10, P >> 10, argv[3], argv[4], argv[5], huge, med / 1e3, s[n / 10] / 1e3, cmed / 1e3);
	return 0;
}
