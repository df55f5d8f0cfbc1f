// What the floor programs share: a monotonic clock in ns, pinning the calling
// thread to one CPU, the order of uint64_t for qsort, the medians of two ranks'
// times, the barrier of two ranks before each call, and a copy to or from the
// peer process by cross-memory attach.
#ifndef FLOORS_H
#define FLOORS_H

#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <immintrin.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static inline uint64_t now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000ull + t.tv_nsec;
}

static inline void pin(int cpu) {
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	if (sched_setaffinity(0, sizeof s, &s) != 0) {
		perror("sched_setaffinity");
		exit(1);
	}
}

static inline int cmp_u64(const void *a, const void *b) {
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

// sort_slower returns, sorted, the slower of the two ranks' times of each of
// n calls, and sorts each rank's times (for their medians).
static inline uint64_t *sort_slower(uint64_t *d0, uint64_t *d1, int n) {
	uint64_t *s = malloc(sizeof(uint64_t) * n);
	for (int i = 0; i < n; i++)
		s[i] = d0[i] > d1[i] ? d0[i] : d1[i];
	qsort(s, n, sizeof s[0], cmp_u64);
	qsort(d0, n, sizeof d0[0], cmp_u64);
	qsort(d1, n, sizeof d1[0], cmp_u64);
	return s;
}

// warm_median_slower returns the median, over the calls after the first
// quarter (the warm-up), of the slower of two processes' times: t[i] and
// t[n+i] are call i of each.
static inline uint64_t warm_median_slower(const uint64_t *t, int n) {
	uint64_t *s = malloc(sizeof(uint64_t) * n);
	for (int i = 0; i < n; i++)
		s[i] = t[i] > t[n + i] ? t[i] : t[n + i];
	int skip = n / 4;
	qsort(s + skip, n - skip, sizeof s[0], cmp_u64);
	uint64_t m = s[skip + (n - skip) / 2];
	free(s);
	return m;
}

// map_shared maps n zeroed bytes that the processes forked after it share,
// or exits.
static inline void *map_shared(size_t n) {
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	return p;
}

// run_pair forks a second process, runs rank(1, parent, v) there and
// rank(0, child, v) here, and returns 0 once both have finished well.
static inline int run_pair(void (*rank)(int, pid_t, const char *), const char *v) {
	pid_t parent = getpid(), child = fork();
	if (child < 0) {
		perror("fork");
		return 1;
	}
	if (child == 0) {
		rank(1, parent, v);
		_exit(0);
	}
	rank(0, child, v);
	int st;
	return waitpid(child, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0;
}

// pair_barrier is a barrier of two ranks on their counters self and other
// (call i posts i). order 0: symmetric, each posts and waits for the other
// (the last to arrive leaves first); 1: this rank is released first (it
// waits for the other's post, then posts); 2: this rank is released second
// (it posts, then waits for the other's).
static inline void pair_barrier(volatile uint64_t *self, volatile uint64_t *other, int order, uint64_t i) {
	if (order == 1)
		while (__atomic_load_n(other, __ATOMIC_ACQUIRE) < i)
			_mm_pause();
	__atomic_store_n(self, i, __ATOMIC_RELEASE);
	if (order != 1)
		while (__atomic_load_n(other, __ATOMIC_ACQUIRE) < i)
			_mm_pause();
}

// cma copies n bytes between local and the peer's remote by cross-memory
// attach (write: into the peer, process_vm_writev; else process_vm_readv),
// repeating the call for what a partial copy leaves.
static inline void cma(pid_t pid, void *local, void *remote, size_t n, int write) {
	char *l = local, *r = remote;
	while (n > 0) {
		struct iovec li = {l, n}, ri = {r, n};
		ssize_t k = write ? process_vm_writev(pid, &li, 1, &ri, 1, 0) : process_vm_readv(pid, &li, 1, &ri, 1, 0);
		if (k <= 0) {
			perror(write ? "process_vm_writev" : "process_vm_readv");
			exit(1);
		}
		l += k, r += k, n -= (size_t)k;
	}
}

// cputime is this process's CPU time in ns.
static inline uint64_t cputime(void) {
	struct timespec t;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return t.tv_sec * 1000000000ull + t.tv_nsec;
}

// ntcopy copies n bytes with non-temporal stores (the tail by memcpy).
static inline void ntcopy(char *dst, const char *src, size_t n) {
	size_t i = 0;
	for (; i + 64 <= n; i += 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)(src + i));
		__m128i b = _mm_loadu_si128((const __m128i *)(src + i + 16));
		__m128i c = _mm_loadu_si128((const __m128i *)(src + i + 32));
		__m128i d = _mm_loadu_si128((const __m128i *)(src + i + 48));
		_mm_stream_si128((__m128i *)(dst + i), a);
		_mm_stream_si128((__m128i *)(dst + i + 16), b);
		_mm_stream_si128((__m128i *)(dst + i + 32), c);
		_mm_stream_si128((__m128i *)(dst + i + 48), d);
	}
	_mm_sfence();
	memcpy(dst + i, src + i, n - i);
}

#endif
