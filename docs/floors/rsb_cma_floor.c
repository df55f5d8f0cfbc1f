// rsb_cma_floor: what an np=2 reduce_scatter_block (float64 sum) of private
// buffers costs in C with nothing else: two processes (CPUs 0 and 1) each
// hold 2B bytes of input; each reads the peer's half r (B bytes) by
// cross-memory attach and adds it to its own half r into its recv (B
// bytes). Between calls a barrier; a call's time is the slower process's,
// the median over the calls is printed, in wall-clock and in CPU time (the
// time the process ran: on a shared machine, the cost without the waits for
// a CPU).
//
//   gcc -O2 -o /tmp/rsb_cma_floor docs/floors/rsb_cma_floor.c
//   /tmp/rsb_cma_floor 512 scratch 64     # 512 KiB blocks: rsb of 1 MiB, 64 KiB pieces
//   /tmp/rsb_cma_floor 8192 direct 256    # rsb of 16 MiB
//
// Variants (the second argument; the third is the piece in KiB, default 64):
//   scratch     per piece: process_vm_readv of the peer's piece into a scratch
//               buffer, then recv = own + scratch (shmcoll's single reduction)
//   scratch-nt  the same, recv stored non-temporally
//   direct      per piece: process_vm_readv into recv, then recv += own while
//               the piece is in the cache (no scratch)
//   allreduce   direct, then process_vm_writev of each reduced piece (in the
//               cache) into the peer's recv, at the peer's offset of the
//               piece: the result is in both recvs (as in an allreduce of 2B
//               bytes; the peer's half lies at recv+B, so recv holds 2B)
//   allreduce-read  direct, and after each piece the process posts it and
//               reads the peer's reduced piece from the peer's recv
//               (process_vm_readv) instead of writing its own
//   whole       one process_vm_readv of the whole block into recv, then
//               recv += own
//   read-only   only the reads of the peer's pieces into recv
//   sum-only    only recv = own + spare (a local buffer): the reduction alone
#pragma GCC target("avx2") // the sum and its non-temporal stores use AVX2
#include "floors.h"

#include <string.h>

static size_t B, C;
static int iters;
static double *sendb, *recvb, *scratch, *spare; // the same addresses in both processes (made before fork)
static volatile uint64_t *bar;                  // bar[16*r]: rank r's barrier counter
static uint64_t *times;                         // times[r*iters + i]: rank r's call i, ns
static uint64_t *cpu;                           // the same in CPU time


// cmaw writes n bytes of local into the peer's memory at remote.
static void cmaw(pid_t pid, void *local, void *remote, size_t n) { cma(pid, local, remote, n, 1); }

// sum computes d = a + b over n doubles; nt stores d non-temporally (d
// 32-byte aligned, n a multiple of 4).
static void sum(double *d, const double *a, const double *b, size_t n, int nt) {
	size_t i = 0;
	if (nt) {
		for (; i + 8 <= n; i += 8) {
			__m256d x = _mm256_add_pd(_mm256_loadu_pd(a + i), _mm256_loadu_pd(b + i));
			__m256d y = _mm256_add_pd(_mm256_loadu_pd(a + i + 4), _mm256_loadu_pd(b + i + 4));
			_mm256_stream_pd(d + i, x);
			_mm256_stream_pd(d + i + 4, y);
		}
		_mm_sfence();
	} else {
		for (; i + 8 <= n; i += 8) {
			__m256d x = _mm256_add_pd(_mm256_loadu_pd(a + i), _mm256_loadu_pd(b + i));
			__m256d y = _mm256_add_pd(_mm256_loadu_pd(a + i + 4), _mm256_loadu_pd(b + i + 4));
			_mm256_storeu_pd(d + i, x);
			_mm256_storeu_pd(d + i + 4, y);
		}
	}
	for (; i < n; i++)
		d[i] = a[i] + b[i];
}

static void rank(int r, pid_t peer, const char *v) {
	int q = 1 - r;
	size_t n = B / 8, c = C / 8;
	pin(r);
	for (size_t k = 0; k < 2 * n; k++)
		sendb[k] = (double)(k % 1000) + 1000 * r;
	memset(recvb, 0, 2 * B);
	memset(scratch, 0, C);
	memset(spare, 0, B);
	double *own = sendb + r * n, *theirs = sendb + r * n; // the peer's half r, at the same address
	for (int i = 1; i <= iters; i++) {
		bar[16 * r] = i;
		while (bar[16 * q] < (uint64_t)i)
			_mm_pause();
		uint64_t t0 = now(), c0 = cputime();
		if (!strcmp(v, "scratch") || !strcmp(v, "scratch-nt")) {
			for (size_t lo = 0; lo < n; lo += c) {
				size_t m = n - lo < c ? n - lo : c;
				cma(peer, scratch, theirs + lo, m * 8, 0);
				sum(recvb + lo, r ? scratch : own + lo, r ? own + lo : scratch, m, v[7] != 0);
			}
		} else if (!strcmp(v, "direct")) {
			for (size_t lo = 0; lo < n; lo += c) {
				size_t m = n - lo < c ? n - lo : c;
				cma(peer, recvb + lo, theirs + lo, m * 8, 0);
				sum(recvb + lo, recvb + lo, own + lo, m, 0);
			}
		} else if (!strcmp(v, "allreduce")) {
			for (size_t lo = 0; lo < n; lo += c) {
				size_t m = n - lo < c ? n - lo : c;
				cma(peer, recvb + lo, theirs + lo, m * 8, 0);
				sum(recvb + lo, recvb + lo, own + lo, m, 0);
				cmaw(peer, recvb + lo, recvb + n + lo, m * 8);
			}
		} else if (!strcmp(v, "allreduce-read")) {
			uint64_t k = 0;
			for (size_t lo = 0; lo < n; lo += c, k++) {
				size_t m = n - lo < c ? n - lo : c;
				cma(peer, recvb + lo, theirs + lo, m * 8, 0);
				sum(recvb + lo, recvb + lo, own + lo, m, 0);
				__atomic_store_n(&bar[16 * r + 8], (uint64_t)i << 32 | (k + 1), __ATOMIC_RELEASE);
				while (__atomic_load_n(&bar[16 * q + 8], __ATOMIC_ACQUIRE) < ((uint64_t)i << 32 | (k + 1)))
					_mm_pause();
				cma(peer, recvb + n + lo, recvb + lo, m * 8, 0);
			}
		} else if (!strcmp(v, "whole")) {
			cma(peer, recvb, theirs, B, 0);
			sum(recvb, recvb, own, n, 0);
		} else if (!strcmp(v, "read-only")) {
			for (size_t lo = 0; lo < n; lo += c) {
				size_t m = n - lo < c ? n - lo : c;
				cma(peer, recvb + lo, theirs + lo, m * 8, 0);
			}
		} else if (!strcmp(v, "sum-only")) {
			sum(recvb, own, spare, n, 0);
		} else {
			fprintf(stderr, "unknown variant %s\n", v);
			exit(2);
		}
		times[r * iters + i - 1] = now() - t0;
		cpu[r * iters + i - 1] = cputime() - c0;
	}
	bar[16 * r] = iters + 1;
	while (bar[16 * q] < (uint64_t)iters + 1)
		_mm_pause();
	if (strcmp(v, "read-only") && strcmp(v, "sum-only"))
		for (size_t k = 0; k < n; k++) {
			double want = 2 * (double)((r * n + k) % 1000) + 1000;
			if (recvb[k] != want) {
				fprintf(stderr, "rank %d: element %zu of the result is %g, want %g\n", r, k, recvb[k], want);
				exit(1);
			}
			if (!strncmp(v, "allreduce", 9) && recvb[n + k] != 2 * (double)((q * n + k) % 1000) + 1000) {
				fprintf(stderr, "rank %d: element %zu of the peer's result is %g\n", r, k, recvb[n + k]);
				exit(1);
			}
		}
}

int main(int argc, char **argv) {
	if (argc < 3 || atoi(argv[1]) <= 0) {
		fprintf(stderr, "usage: rsb_cma_floor KiB-per-block variant [KiB-per-piece [calls]]\n");
		return 2;
	}
	B = (size_t)atoi(argv[1]) << 10;
	C = argc > 3 ? (size_t)atoi(argv[3]) << 10 : 64 << 10;
	if (C > B)
		C = B;
	iters = argc > 4 ? atoi(argv[4]) : (int)(((size_t)2 << 30) / (2 * B) + 20);
	if (iters > 2000)
		iters = 2000;
	bar = map_shared(4096);
	times = map_shared(sizeof(uint64_t) * 2 * iters);
	cpu = map_shared(sizeof(uint64_t) * 2 * iters);
	sendb = aligned_alloc(4096, 2 * B);
	recvb = aligned_alloc(4096, 2 * B);
	scratch = aligned_alloc(4096, C);
	spare = aligned_alloc(4096, B);
	if (run_pair(rank, argv[2]) != 0)
		return 1;
	uint64_t med = warm_median_slower(times, iters), cmed = warm_median_slower(cpu, iters);
	printf("%-10s %6zu KiB blocks (rsb of %6zu KiB), %4zu KiB pieces: slower process median %8.1f us; CPU time %8.1f us\n", argv[2],
	       B >> 10, B >> 9, C >> 10, med / 1e3, cmed / 1e3);
	return 0;
}
