// allgather_cma_floor: the fewest bytes an np=2 allgather of private buffers
// can move, in C, with nothing else: two processes (CPUs 0 and 1) each copy
// their own block (B bytes of send) into their recv and the peer's block
// from the peer's send into their recv by cross-memory attach, as Open MPI's
// two-process allgather over its CMA transport does. Between calls a
// barrier; a call's time is the slower process's, the median over the
// calls is printed, in wall-clock time and in CPU time (the time each
// process ran: on a machine shared with other work, what its copies cost
// without the time it waited for a CPU).
//
//   gcc -O2 -o /tmp/allgather_cma_floor docs/floors/allgather_cma_floor.c
//   /tmp/allgather_cma_floor 512 own-read     # 512 KiB blocks: allgather of 1 MiB
//   /tmp/allgather_cma_floor 32768 read-own   # allgather of 64 MiB
//
// Variants (the second argument):
//   own-read    memcpy of the own block, then process_vm_readv of the peer's
//   read-own    the same, the read first
//   own-write   memcpy, then process_vm_writev of the own block into the peer's recv
//   chunk       own copy and read alternate in 256 KiB pieces
//   chunk-write own copy and process_vm_writev of the same piece (still in the
//               cache) into the peer's recv alternate in 256 KiB pieces: the
//               own block is read from memory once (shmcoll's single allgather)
//   chunk-write-nt  chunk-write with the own copy's stores non-temporal
//   nt-read     the own copy with non-temporal stores, then the read
//   copies      two memcpys of B per process, no system call: the two
//               copies at user-space memcpy speed (the membw bound)
//   read-only   only the read of the peer's block: what the kernel's copy costs
#include "floors.h"

#include <immintrin.h>
#include <string.h>

enum { CHUNK = 256 << 10 };

static size_t B;
static int iters;
static char *sendb, *recvb, *spare; // the same addresses in both processes (made before fork)
static volatile uint64_t *bar;      // bar[16*r]: rank r's barrier counter
static uint64_t *times;             // times[r*iters + i]: rank r's call i, ns
static uint64_t *cpu;               // the same in CPU time

static void rank(int r, pid_t peer, const char *v) {
	int q = 1 - r;
	pin(r);
	memset(sendb, r + 1, B);
	memset(recvb, 0, 2 * B);
	char *own = recvb + r * B, *theirs = recvb + q * B;
	for (int i = 1; i <= iters; i++) {
		bar[16 * r] = i; // the barrier: the peer's send is written and its previous call done
		while (bar[16 * q] < (uint64_t)i)
			_mm_pause();
		uint64_t t0 = now(), c0 = cputime();
		if (!strcmp(v, "own-read")) {
			memcpy(own, sendb, B);
			cma(peer, theirs, sendb, B, 0);
		} else if (!strcmp(v, "read-own")) {
			cma(peer, theirs, sendb, B, 0);
			memcpy(own, sendb, B);
		} else if (!strcmp(v, "own-write")) {
			memcpy(own, sendb, B);
			cma(peer, sendb, recvb + r * B, B, 1); // into the peer's recv, block r
		} else if (!strcmp(v, "chunk")) {
			for (size_t lo = 0; lo < B; lo += CHUNK) {
				size_t n = B - lo < CHUNK ? B - lo : CHUNK;
				memcpy(own + lo, sendb + lo, n);
				cma(peer, theirs + lo, sendb + lo, n, 0);
			}
		} else if (!strcmp(v, "chunk-write") || !strcmp(v, "chunk-write-nt")) {
			for (size_t lo = 0; lo < B; lo += CHUNK) {
				size_t n = B - lo < CHUNK ? B - lo : CHUNK;
				if (v[11])
					ntcopy(own + lo, sendb + lo, n);
				else
					memcpy(own + lo, sendb + lo, n);
				cma(peer, sendb + lo, recvb + r * B + lo, n, 1);
			}
		} else if (!strcmp(v, "nt-read")) {
			ntcopy(own, sendb, B);
			cma(peer, theirs, sendb, B, 0);
		} else if (!strcmp(v, "copies")) {
			memcpy(own, sendb, B);
			memcpy(theirs, spare, B);
		} else if (!strcmp(v, "read-only")) {
			cma(peer, theirs, sendb, B, 0);
		} else {
			fprintf(stderr, "unknown variant %s\n", v);
			exit(2);
		}
		// The peer may reuse its send only after this process read it: the
		// next barrier orders that.
		times[r * iters + i - 1] = now() - t0;
		cpu[r * iters + i - 1] = cputime() - c0;
	}
	bar[16 * r] = iters + 1;
	while (bar[16 * q] < (uint64_t)iters + 1)
		_mm_pause();
	// copies leaves the peer's block as it was, read-only the own block.
	int skip = !strcmp(v, "copies") ? q : !strcmp(v, "read-only") ? r : -1;
	for (size_t k = 0; k < 2 * B; k++) {
		int want = k / B == (size_t)skip ? 0 : (int)(k / B) + 1;
		if (recvb[k] != want) {
			fprintf(stderr, "rank %d: byte %zu of the result is %d\n", r, k, recvb[k]);
			exit(1);
		}
	}
}

int main(int argc, char **argv) {
	if (argc < 3 || atoi(argv[1]) <= 0) {
		fprintf(stderr, "usage: allgather_cma_floor KiB-per-block variant [calls]\n");
		return 2;
	}
	B = (size_t)atoi(argv[1]) << 10;
	iters = argc > 3 ? atoi(argv[3]) : (int)(((size_t)2 << 30) / (2 * B) + 20);
	if (iters > 2000)
		iters = 2000;
	bar = map_shared(4096);
	times = map_shared(sizeof(uint64_t) * 2 * iters);
	cpu = map_shared(sizeof(uint64_t) * 2 * iters);
	sendb = aligned_alloc(4096, B);
	recvb = aligned_alloc(4096, 2 * B);
	spare = aligned_alloc(4096, B);
	memset(spare, 0, B);
	if (run_pair(rank, argv[2]) != 0)
		return 1;
	uint64_t med = warm_median_slower(times, iters), cmed = warm_median_slower(cpu, iters);
	printf("%s %zu KiB blocks (allgather of %zu KiB): slower process median %.1f us, %.2f GB/s moved; CPU time %.1f us, "
	       "%.2f GB/s\n",
	       argv[2], B >> 10, B >> 9, med / 1e3, 4.0 * B / med, cmed / 1e3, 4.0 * B / cmed);
	return 0;
}
