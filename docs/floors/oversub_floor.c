// oversub_floor: the floor of a small collective (allreduce, bcast or
// barrier of 8 bytes) of 8 ranks on 2 CPUs. Each iteration is an all-to-all
// flag barrier through shared memory: every rank posts its own counter (its
// line) and waits until it has seen the counter of every other rank reach
// the iteration. A collective whose every rank depends on every other's
// arrival (allreduce, barrier) cannot take less; and a broadcast called in a
// loop needs every rank to run once per call as well.
//
// The ranks are processes (fork, one MAP_SHARED mapping), as shmcoll's and
// MPI's ranks are: a switch between processes changes the address space,
// which a switch between threads of one process does not, and the floor
// must pay what the ranks pay.
//
//   policy "yield": a rank that finds a counter short gives its CPU away
//     with sched_yield at once (Open MPI's mpi_yield_when_idle, and shmcoll
//     for processes that outnumber the CPUs): the rank it waits for most
//     likely needs that CPU.
//   policy "spinyield": PAUSE 64 times first, then sched_yield.
//   policy "futex": sched_yield up to 64 times, then sleep on the counter's
//     futex; a poster wakes only when the line's sleeper count says someone
//     sleeps.
//   placement "free": all ranks may run on CPUs 0 and 1, the scheduler
//     places them (as shmrun's -bind none leaves them); "spread": rank r is
//     pinned to CPU r % 2; "one": every rank is pinned to CPU 0, where the
//     scheduler's placement of free ranks can stack them (each call then
//     takes the turns of all eight one after the other).
//
// Every rank records when it leaves each barrier. An iteration's time is
// the longest of the ranks' times between leaving the previous barrier and
// leaving this one; the program prints the median and p99 of it, and the
// mean (the whole run over the iterations). Each rank checks, when it
// leaves barrier i, that every counter is i or i + 1.
//
// The timed iterations follow a warm-up of a given time (1 ms unless told):
// freshly started processes that the scheduler places itself ("free") take
// a while to be spread over the CPUs as they will stay, and a figure taken
// before that depends on when it was taken. Rank 0 ends the warm-up: before
// it posts barrier i it writes i to a shared word, which every rank reads
// when it leaves barrier i (it acquired rank 0's post).
//
//   gcc -O2 -pthread -o /tmp/oversub_floor docs/floors/oversub_floor.c
//   for p in yield spinyield futex; do
//     for pl in free spread one; do /tmp/oversub_floor $p $pl; done    # [iterations [warm-up ms]]: 20000 1
//   done
//
// oversub_compare.sh runs it beside shmbench's allreduce, bcast and barrier
// of 8 bytes, interleaved, with the same iterations and placements.
#include "floors.h"

#include <errno.h>
#include <immintrin.h>
#include <limits.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

enum { ranks = 8 };
enum { yield, spinyield, futex } policy;

static int iters = 20000;      // timed iterations: the third argument
static uint64_t warm_ns = 1e6; // the warm-up: the fourth argument, in ms

typedef struct {
	_Alignas(128) volatile uint32_t seq; // the rank's counter: the last barrier it arrived at
	_Alignas(64) volatile uint32_t sleepers; // ranks asleep on seq, in the second line
} line;

static line *flag;   // one per rank
static volatile uint32_t *warm_end; // the barrier that ends the warm-up (0: not yet)
static uint64_t *ts; // ts[r * (iters + 1) + i]: when rank r left the i-th barrier after the warm-up (0: its last)

static void futex_wait(volatile uint32_t *w, uint32_t v) {
	syscall(SYS_futex, w, FUTEX_WAIT, v, NULL, NULL, 0);
}

static void futex_wake(volatile uint32_t *w) {
	syscall(SYS_futex, w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void post(int r, uint32_t i) {
	if (policy != futex) {
		__atomic_store_n(&flag[r].seq, i, __ATOMIC_RELEASE);
		return;
	}
	// Sequentially consistent, so that either the waiter sees the store
	// or the poster sees the waiter's sleeper count.
	__atomic_store_n(&flag[r].seq, i, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&flag[r].sleepers, __ATOMIC_SEQ_CST))
		futex_wake(&flag[r].seq);
}

static void await(int q, uint32_t i) {
	volatile uint32_t *w = &flag[q].seq;
	for (int n = 0; __atomic_load_n(w, __ATOMIC_ACQUIRE) < i; n++) {
		if (policy == spinyield && n < 64) {
			_mm_pause();
		} else if (policy != futex || n < 64) {
			sched_yield();
		} else {
			__atomic_fetch_add(&flag[q].sleepers, 1, __ATOMIC_SEQ_CST);
			uint32_t v = __atomic_load_n(w, __ATOMIC_SEQ_CST);
			if (v < i)
				futex_wait(w, v);
			__atomic_fetch_sub(&flag[q].sleepers, 1, __ATOMIC_SEQ_CST);
		}
	}
}

static int rank(int r) {
	uint64_t *mine = ts + (size_t)r * (iters + 1);
	uint64_t start = now();
	uint32_t first = 0; // the barrier that ended the warm-up
	for (uint32_t i = 1;; i++) {
		if (r == 0 && first == 0 && now() - start >= warm_ns)
			*warm_end = i; // released by the post
		post(r, i);
		for (int j = 1; j < ranks; j++)
			await((r + j) % ranks, i);
		uint64_t t = now();
		for (int q = 0; q < ranks; q++) {
			uint32_t s = __atomic_load_n(&flag[q].seq, __ATOMIC_ACQUIRE);
			if (s != i && s != i + 1) {
				fprintf(stderr, "rank %d left barrier %u seeing rank %d at %u\n", r, i, q, s);
				return 1;
			}
		}
		if (first == 0 && *warm_end == i)
			first = i;
		if (first != 0) {
			mine[i - first] = t;
			if (i - first == (uint32_t)iters)
				return 0;
		}
	}
}

int main(int argc, char **argv) {
	if (argc > 3)
		iters = atoi(argv[3]);
	if (argc > 4)
		warm_ns = (uint64_t)(atof(argv[4]) * 1e6);
	if (argc < 3 || argc > 5 || iters <= 0 || (argc > 4 && atof(argv[4]) < 0) ||
	    (strcmp(argv[1], "yield") && strcmp(argv[1], "spinyield") && strcmp(argv[1], "futex")) ||
	    (strcmp(argv[2], "free") && strcmp(argv[2], "spread") && strcmp(argv[2], "one"))) {
		fprintf(stderr, "usage: oversub_floor yield|spinyield|futex free|spread|one [iterations [warm-up ms]]\n");
		return 2;
	}
	policy = !strcmp(argv[1], "yield") ? yield : !strcmp(argv[1], "spinyield") ? spinyield : futex;
	int spread = !strcmp(argv[2], "spread"), one = !strcmp(argv[2], "one");
	size_t tsBytes = sizeof(uint64_t) * ranks * (size_t)(iters + 1);
	char *m = mmap(NULL, 4096 + tsBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	flag = (line *)m;
	warm_end = (volatile uint32_t *)(m + sizeof(line) * ranks);
	ts = (uint64_t *)(m + 4096);
	_Static_assert(sizeof(line) * ranks + sizeof(uint32_t) <= 4096, "flags fit the first page");
	cpu_set_t two;
	CPU_ZERO(&two);
	CPU_SET(0, &two);
	CPU_SET(1, &two);
	if (sched_setaffinity(0, sizeof two, &two) != 0) {
		perror("sched_setaffinity");
		return 1;
	}
	pid_t pid[ranks];
	for (int r = 0; r < ranks; r++) {
		if ((pid[r] = fork()) < 0) {
			perror("fork");
			return 1;
		}
		if (pid[r] == 0) {
			if (spread || one)
				pin(spread ? r % 2 : 0);
			_exit(rank(r));
		}
	}
	int failed = 0;
	for (int r = 0; r < ranks; r++) {
		int st;
		while (waitpid(pid[r], &st, 0) < 0 && errno == EINTR)
			;
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			failed = 1;
	}
	if (failed)
		return 1;
	int n = iters;
	uint64_t *it = malloc(sizeof(uint64_t) * n);
	for (int i = 1; i <= iters; i++) {
		uint64_t d = 0;
		for (int r = 0; r < ranks; r++) {
			uint64_t *t = ts + (size_t)r * (iters + 1);
			if (t[i] - t[i - 1] > d)
				d = t[i] - t[i - 1];
		}
		it[i - 1] = d;
	}
	uint64_t first = ts[0], last = ts[iters];
	for (int r = 1; r < ranks; r++) {
		uint64_t *t = ts + (size_t)r * (iters + 1);
		first = t[0] > first ? t[0] : first;
		last = t[iters] > last ? t[iters] : last;
	}
	qsort(it, n, sizeof it[0], cmp_u64);
	printf("%d processes on 2 CPUs, %-6s wait %-9s: iteration median %6.2f us, p99 %7.2f us, mean %6.2f us (%d iterations after %g ms)\n",
	       ranks, argv[2], argv[1], it[n / 2] / 1e3, it[(size_t)n * 99 / 100] / 1e3, (last - first) / 1e3 / n, n, warm_ns / 1e6);
	return 0;
}
