// bcast_rule: what docs/DESIGN.md's mismatch rule costs an np=2 broadcast of 8 bytes
// from rank 0, timed the way shmbench compare times it (a barrier, then the
// broadcast; the slower rank's time counts). Two threads pinned to CPUs 0 and 1.
//
//   mode "returns": the root writes the data and its descriptor in one line,
//     posts it and returns (MPICH's eager broadcast);
//   mode "waits": the receiver posts its descriptor as well, and the root
//     returns only after it has read it, so that a mismatch fails on both
//     ranks in the same call (shmcoll).
//   barrier "symmetric": each rank posts its arrival and waits for the other's
//     (the last to arrive leaves at once); "root-first": gather to rank 0 and
//     release from it (MPICH's order: rank 0 leaves a handoff earlier);
//     "receiver-first": gather to rank 1 and release from it.
//
//   gcc -O2 -pthread -o /tmp/bcast_rule docs/floors/bcast_rule.c   # [calls]: 200000
//   for b in symmetric root-first receiver-first; do
//     for m in returns waits; do /tmp/bcast_rule $m $b; done
//   done
//
// docs/PERFORMANCE.md ("Floors of the cells that miss") has the figures.
#include "floors.h"

#include <immintrin.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

static int iters = 200000; // calls, the third argument

typedef struct {
	_Alignas(64) volatile uint64_t v[8]; // v[0] counter, v[1] data, v[2] descriptor
} line;

static line *bar, *post; // one line per rank each
static int waits, first = -1; // first: the rank the barrier releases first, or -1
static uint64_t *dur[2];

static void await(volatile uint64_t *w, uint64_t i) {
	while (__atomic_load_n(w, __ATOMIC_ACQUIRE) < i)
		_mm_pause();
}

static void barrier(int r, uint64_t i) {
	pair_barrier(&bar[r].v[0], &bar[1 - r].v[0], first < 0 ? 0 : r == first ? 1 : 2, i);
}

static void *rank(void *arg) {
	int r = (int)(intptr_t)arg;
	uint64_t sum = 0;
	pin(r);
	for (uint64_t i = 1; i <= (uint64_t)iters; i++) {
		barrier(r, i);
		uint64_t t0 = now();
		if (r == 0) {
			post[0].v[1] = i * 7;
			post[0].v[2] = 8;
			__atomic_store_n(&post[0].v[0], i, __ATOMIC_RELEASE);
			if (waits) {
				await(&post[1].v[0], i);
				if (post[1].v[2] != 8)
					abort();
			}
		} else {
			if (waits) {
				post[1].v[2] = 8;
				__atomic_store_n(&post[1].v[0], i, __ATOMIC_RELEASE);
			}
			await(&post[0].v[0], i);
			if (post[0].v[2] != 8 || post[0].v[1] != i * 7)
				abort();
			sum += post[0].v[1];
		}
		dur[r][i - 1] = now() - t0;
	}
	return (void *)(uintptr_t)sum;
}

int main(int argc, char **argv) {
	if (argc > 3)
		iters = atoi(argv[3]);
	if (argc < 3 || argc > 4 || iters < 1 || (strcmp(argv[1], "returns") && strcmp(argv[1], "waits")) ||
	    (strcmp(argv[2], "symmetric") && strcmp(argv[2], "root-first") && strcmp(argv[2], "receiver-first"))) {
		fprintf(stderr, "usage: bcast_rule returns|waits symmetric|root-first|receiver-first [calls]\n");
		return 2;
	}
	waits = strcmp(argv[1], "waits") == 0;
	if (strcmp(argv[2], "root-first") == 0)
		first = 0;
	else if (strcmp(argv[2], "receiver-first") == 0)
		first = 1;
	char *m = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	bar = (line *)m;
	post = (line *)(m + 4096);
	for (int r = 0; r < 2; r++)
		dur[r] = malloc(sizeof(uint64_t) * iters);
	pthread_t t[2];
	for (int r = 0; r < 2; r++)
		pthread_create(&t[r], NULL, rank, (void *)(intptr_t)r);
	for (int r = 0; r < 2; r++)
		pthread_join(t[r], NULL);
	uint64_t *slowest = sort_slower(dur[0], dur[1], iters);
	printf("%-14s barrier, root %-7s: slower rank %4lu ns (median); root %4lu, receiver %4lu\n",
	       argv[2], argv[1], (unsigned long)slowest[iters / 2], (unsigned long)dur[0][iters / 2],
	       (unsigned long)dur[1][iters / 2]);
	return 0;
}
