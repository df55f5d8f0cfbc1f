// rooted_floor: the fewest cache-line handoffs of an np=2 bcast from rank 0
// or reduce (sum of float64) to rank 0 of n bytes through shared memory,
// timed the way shmbench compare times (a barrier, then the call; the
// slower rank's time per call, median). Two threads pinned to CPUs 0 and 1.
//
// The rank that sends (bcast: the root, reduce: the non-root) copies its
// vector into its cell behind a 16-byte header (a sequence word and the
// call's descriptor: collective, count, root), then stores the sequence
// word: the header shares its line with the first 48 bytes of data, so a
// call moves ceil((16 + n) / 64) lines from one cache to the other, the
// fewest any call of n bytes between private buffers can move. It asks
// for every line of the cell at once (PREFETCHW, as shmcoll's sender does
// at a call's entry), writes the lines after the first one, then the
// header's line last and at once. The rank
// that receives waits for the sequence word, compares the descriptor with
// its own, asks for the other lines of the cell at once (prefetch: all in
// flight, rather than as many as the copy's loads keep), then copies the
// vector out (bcast) or adds it to its own input into its result (reduce).
//
//   mode "eager": nothing else. The sender returns after its post: one
//     eager cell, data and header in one write (MPICH's eager messages).
//   mode "early": docs/DESIGN.md's mismatch rule under early return: the
//     receiver also posts its descriptor in its own line (a store that
//     nobody waits for in the call), and the sender compares it at the
//     entry of its next call, here the barrier, before it arrives there
//     (shmcoll's begin), so that a mismatch fails both ranks.
//   mode "waits": the rule without early return: the sender returns only
//     after it has read and compared the receiver's descriptor.
//   barrier "symmetric": each rank posts its arrival and waits for the
//     other's (shmcoll's flat barrier). The receiver of the last call
//     arrives last and so leaves first, a handoff before the sender;
//     "root-first": gather to rank 0 and release from it (rank 0 leaves a
//     handoff earlier; MPICH's order); "nonroot-first": gather to rank 1
//     and release from it. The time of a call counts from the barrier's
//     exit on each rank, so the order decides whether the sender's post
//     is on the receiver's clock.
//
// Before the calls it measures the one-way handoff of one line between
// the two CPUs (half a ping-pong round trip, median), which shmbench
// compare calls the placement probe: about 100 ns when the CPUs share an
// L3, several times that apart. Each call's value of element i % count
// changes, and the receiver checks it; the whole result is checked after
// the last call.
//
//   gcc -O2 -pthread -o /tmp/rooted_floor docs/floors/rooted_floor.c
//   for c in bcast reduce; do for m in eager early waits; do
//     for n in 8 64 256 1024 4096; do /tmp/rooted_floor $c $m symmetric $n; done    # [calls]: 100000
//   done; done
//
// small_compare.sh runs it beside shmbench compare's bcast and reduce;
// docs/PERFORMANCE.md ("Floors of the cells that miss") has the figures.
#include "floors.h"

#include <immintrin.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

enum { MAXB = 1 << 20, HDR = 16, PROBES = 20000 };

typedef struct {
	_Alignas(64) volatile uint64_t v[8]; // v[0] counter, v[1] descriptor
} line;

static int reduce, mode, first = -1; // mode: 0 eager, 1 early, 2 waits; first: the rank the barrier releases first
static size_t n, count; // bytes, float64 elements
static int iters = 100000; // calls, the fifth argument
static line *bar, *ack, *ping; // bar, ack: one line per rank; ping: two lines
static char *cell; // the sender's header and data
static double *in[2], *out[2]; // the ranks' private buffers
static uint64_t *dur[2], handoff;
static pthread_barrier_t start;

static void await(volatile uint64_t *w, uint64_t i) {
	while (__atomic_load_n(w, __ATOMIC_ACQUIRE) < i)
		_mm_pause();
}

static void barrier(int r, uint64_t i) {
	pair_barrier(&bar[r].v[0], &bar[1 - r].v[0], first < 0 ? 0 : r == first ? 1 : 2, i);
}

static uint64_t desc(void) { return (uint64_t)count << 16 | (uint64_t)reduce << 8 | 0; } // count, collective, root 0

static void mismatch(int r, uint64_t i, uint64_t got) {
	fprintf(stderr, "rank %d, call %lu: descriptor %#lx, want %#lx\n", r, (unsigned long)i, (unsigned long)got,
	        (unsigned long)desc());
	exit(1);
}

// probe measures the one-way handoff: rank 0 stores a value in its line,
// rank 1 echoes it in its own.
static void probe(int r) {
	static uint64_t rt[PROBES];
	for (uint64_t i = 1; i <= PROBES; i++) {
		if (r == 0) {
			uint64_t t0 = now();
			__atomic_store_n(&ping[0].v[0], i, __ATOMIC_RELEASE);
			await(&ping[1].v[0], i);
			rt[i - 1] = now() - t0;
		} else {
			await(&ping[0].v[0], i);
			__atomic_store_n(&ping[1].v[0], i, __ATOMIC_RELEASE);
		}
	}
	if (r == 0) {
		qsort(rt, PROBES, sizeof rt[0], cmp_u64);
		handoff = rt[PROBES / 2] / 2;
	}
}

static void *rank(void *arg) {
	int r = (int)(intptr_t)arg;
	int sender = reduce ? 1 : 0; // the rank that writes the cell
	uint64_t *hdr = (uint64_t *)cell;
	double *me = reduce ? in[r] : out[r]; // bcast: the root's buffer is its out
	pin(r);
	pthread_barrier_wait(&start);
	probe(r);
	for (uint64_t i = 1; i <= (uint64_t)iters; i++) {
		size_t j = i % count;
		if (r == sender)
			me[j] = (double)i; // what this call's value changes (before the barrier, as shmbench's touch)
		if (r == sender && mode == 1 && i > 1) { // the skipped check of the last call
			await(&ack[1 - r].v[0], i - 1);
			if (ack[1 - r].v[1] != desc())
				mismatch(r, i - 1, ack[1 - r].v[1]);
		}
		barrier(r, i);
		uint64_t t0 = now();
		if (r == sender) {
			// The lines after the header's first, then the header's line
			// in one go: the receiver polls that line, and every store
			// to it would have to take it back.
			size_t h = n < 64 - HDR ? n : 64 - HDR;
			for (size_t k = 0; k < HDR + n; k += 64) // every line asked for at once, before any store
				__asm__ volatile("prefetchw (%0)" ::"r"(cell + k));
			memcpy(cell + 64, (char *)me + h, n - h);
			hdr[1] = desc();
			memcpy(cell + HDR, me, h);
			__atomic_store_n(&hdr[0], i, __ATOMIC_RELEASE);
			if (mode == 2) {
				await(&ack[1 - r].v[0], i);
				if (ack[1 - r].v[1] != desc())
					mismatch(r, i, ack[1 - r].v[1]);
			}
		} else {
			if (mode != 0) {
				ack[r].v[1] = desc();
				__atomic_store_n(&ack[r].v[0], i, __ATOMIC_RELEASE);
			}
			await(&hdr[0], i);
			if (hdr[1] != desc())
				mismatch(r, i, hdr[1]);
			const double *src = (const double *)(cell + HDR);
			for (size_t k = 64; k < HDR + n; k += 64) // every line in flight at once
				_mm_prefetch(cell + k, _MM_HINT_T0);
			if (reduce) {
				double *restrict o = out[r];
				const double *restrict a = in[r], *restrict b = src;
				for (size_t k = 0; k < count; k++)
					o[k] = a[k] + b[k]; // rank 0's operand on the left
			} else {
				memcpy(out[r], src, n);
			}
		}
		dur[r][i - 1] = now() - t0;
		if (r != sender) {
			double want = reduce ? in[r][j] + (double)i : (double)i;
			if (out[r][j] != want) {
				fprintf(stderr, "rank %d, call %lu: element %zu is %g, want %g\n", r, (unsigned long)i, j, out[r][j], want);
				exit(1);
			}
		}
	}
	return NULL;
}

int main(int argc, char **argv) {
	static const char *modes[] = {"eager", "early", "waits"};
	mode = -1;
	for (int k = 0; argc > 2 && k < 3; k++)
		if (strcmp(argv[2], modes[k]) == 0)
			mode = k;
	if (argc > 4)
		n = (size_t)atol(argv[4]);
	if (argc > 5)
		iters = atoi(argv[5]);
	if (argc < 5 || argc > 6 || (strcmp(argv[1], "bcast") && strcmp(argv[1], "reduce")) || mode < 0 ||
	    (strcmp(argv[3], "symmetric") && strcmp(argv[3], "root-first") && strcmp(argv[3], "nonroot-first")) ||
	    n < 8 || n > MAXB || n % 8 || iters < 1) {
		fprintf(stderr, "usage: rooted_floor bcast|reduce eager|early|waits symmetric|root-first|nonroot-first "
		                "bytes(multiple of 8, at most 1 MiB) [calls]\n");
		return 2;
	}
	reduce = strcmp(argv[1], "reduce") == 0;
	count = n / 8;
	if (strcmp(argv[3], "root-first") == 0)
		first = 0;
	else if (strcmp(argv[3], "nonroot-first") == 0)
		first = 1;
	char *m = mmap(NULL, 4 * 4096 + HDR + MAXB, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	bar = (line *)m; // each group of lines on its own page
	ack = (line *)(m + 4096);
	ping = (line *)(m + 2 * 4096);
	cell = m + 4 * 4096;
	for (int r = 0; r < 2; r++) {
		in[r] = aligned_alloc(64, n);
		out[r] = aligned_alloc(64, n);
		dur[r] = malloc(sizeof(uint64_t) * iters);
		for (size_t k = 0; k < count; k++)
			in[r][k] = out[r][k] = (double)(r + 1) * (double)(k + 1);
	}
	pthread_barrier_init(&start, NULL, 2);
	pthread_t t[2];
	for (int r = 0; r < 2; r++)
		pthread_create(&t[r], NULL, rank, (void *)(intptr_t)r);
	for (int r = 0; r < 2; r++)
		pthread_join(t[r], NULL);
	// The result of the last call: the receiver's vector, element by element.
	int recv = reduce ? 0 : 1;
	for (size_t k = 0; k < count; k++) {
		double s = reduce ? in[1][k] : out[0][k];
		double want = reduce ? in[0][k] + s : s;
		if (out[recv][k] != want) {
			fprintf(stderr, "rank %d: element %zu of the result is %g, want %g\n", recv, k, out[recv][k], want);
			return 1;
		}
	}
	uint64_t *slowest = sort_slower(dur[0], dur[1], iters);
	printf("%-6s %-5s %-13s %5zu B: slower rank %5lu ns (median); root %5lu, non-root %5lu; handoff %4lu ns\n",
	       argv[1], argv[2], argv[3], n, (unsigned long)slowest[iters / 2], (unsigned long)dur[0][iters / 2],
	       (unsigned long)dur[1][iters / 2], (unsigned long)handoff);
	return 0;
}
