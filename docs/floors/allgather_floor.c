// allgather_floor: the fewest copies an np=2 allgather of Go buffers can make
// through shared memory, in C, with nothing else: each rank copies its block
// into its slot (publish), posts a counter, copies its block into its own
// result (own copy), waits for the peer's counter and copies the peer's block
// out of the peer's slot (copy-out), in segments of at most 512 KiB, as
// shmcoll's flat allgather does. Two threads pinned to CPUs 0 and 1; the
// segments' slots alternate between R buffers per rank, as shmcoll's slot
// halves do.
//
//   gcc -O2 -pthread -o /tmp/allgather_floor docs/floors/allgather_floor.c
//   /tmp/allgather_floor 512 2          # 512 KiB blocks (allgather of 1 MiB)
//   /tmp/allgather_floor 2048 2         # allgather of 4 MiB: 4 segments
//   /tmp/allgather_floor 512 16 unread  # the copy-out reads the rank's own slot
//
// "unread" isolates what the peer's reading costs the next publish: with it
// the publish runs at the speed of the own copy. A rank publishes a segment
// into a slot buffer only after the barrier or its wait for the peer's
// previous segment: with R >= 2 the peer has finished reading it then.
// docs/PERFORMANCE.md ("Floors of the cells that miss") has the figures at
// both placements.
#include "floors.h"

#include <immintrin.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

enum { ITERS = 400, SEG = 512 << 10 };

static size_t B, S; // block bytes, segments per block
static int R, unread;
static char *slot[2], *sendb[2], *recvb[2];
static volatile uint64_t *flag[2], *bar[2];
static double phase[2][4]; // publish, own copy, wait, copy-out: ns summed
static uint64_t *total[2];

static void *rank(void *arg) {
	int r = (int)(intptr_t)arg, q = 1 - r;
	pin(r);
	for (uint64_t i = 1; i <= ITERS; i++) {
		__atomic_store_n(bar[r], i, __ATOMIC_RELEASE); // barrier
		while (__atomic_load_n(bar[q], __ATOMIC_ACQUIRE) < i)
			_mm_pause();
		uint64_t start = now();
		for (size_t lo = 0; lo < B; lo += SEG) {
			size_t n = B - lo < SEG ? B - lo : SEG;
			uint64_t step = (i - 1) * S + lo / SEG + 1; // counts every segment
			uint64_t t0 = now();
			memcpy(slot[r] + (step % R) * SEG, sendb[r] + lo, n);
			uint64_t t1 = now();
			__atomic_store_n(flag[r], step, __ATOMIC_RELEASE);
			memcpy(recvb[r] + r * B + lo, sendb[r] + lo, n);
			uint64_t t2 = now();
			while (__atomic_load_n(flag[q], __ATOMIC_ACQUIRE) < step)
				_mm_pause();
			uint64_t t3 = now();
			const char *peer = unread ? slot[r] + ((step + 1) % R) * SEG : slot[q] + (step % R) * SEG;
			memcpy(recvb[r] + q * B + lo, peer, n);
			uint64_t t4 = now();
			if (i > ITERS / 4) {
				phase[r][0] += t1 - t0;
				phase[r][1] += t2 - t1;
				phase[r][2] += t3 - t2;
				phase[r][3] += t4 - t3;
			}
		}
		total[r][i - 1] = now() - start;
	}
	return NULL;
}

int main(int argc, char **argv) {
	if (argc < 3 || atoi(argv[1]) <= 0 || atoi(argv[2]) < 2) {
		fprintf(stderr, "usage: allgather_floor KiB-per-block slots(>=2) [unread]\n");
		return 2;
	}
	B = (size_t)atoi(argv[1]) << 10;
	R = atoi(argv[2]);
	S = (B + SEG - 1) / SEG;
	unread = argc > 3 && strcmp(argv[3], "unread") == 0;
	for (int r = 0; r < 2; r++) {
		slot[r] = mmap(NULL, (size_t)SEG * R, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		char *f = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (slot[r] == MAP_FAILED || f == MAP_FAILED) {
			perror("mmap");
			return 1;
		}
		memset(slot[r], 0, (size_t)SEG * R);
		flag[r] = (volatile uint64_t *)f;
		bar[r] = (volatile uint64_t *)(f + 128);
		sendb[r] = aligned_alloc(4096, B);
		recvb[r] = aligned_alloc(4096, 2 * B);
		total[r] = malloc(sizeof(uint64_t) * ITERS);
		memset(sendb[r], r + 1, B);
		memset(recvb[r], 0, 2 * B);
	}
	pthread_t t[2];
	for (int r = 0; r < 2; r++)
		pthread_create(&t[r], NULL, rank, (void *)(intptr_t)r);
	for (int r = 0; r < 2; r++)
		pthread_join(t[r], NULL);
	for (int r = 0; r < 2; r++) // the result (unread: the own block only)
		for (size_t k = 0; k < 2 * B; k++)
			if ((!unread || k / B == (size_t)r) && recvb[r][k] != (int)(k / B) + 1) {
				fprintf(stderr, "rank %d: byte %zu of the result is %d\n", r, k, recvb[r][k]);
				return 1;
			}
	static uint64_t slowest[ITERS];
	for (int i = 0; i < ITERS; i++)
		slowest[i] = total[0][i] > total[1][i] ? total[0][i] : total[1][i];
	qsort(slowest, ITERS, sizeof slowest[0], cmp_u64);
	double n = (ITERS - ITERS / 4) * 1e3;
	printf("%zu KiB blocks, %d slots%s: slowest rank median %.1f us\n", B >> 10, R,
	       unread ? ", copy-out from the own slot" : "", slowest[ITERS / 2] / 1e3);
	for (int r = 0; r < 2; r++)
		printf("  rank %d: publish %.1f, own copy %.1f, wait %.1f, copy-out %.1f us\n", r,
		       phase[r][0] / n, phase[r][1] / n, phase[r][2] / n, phase[r][3] / n);
	return 0;
}
