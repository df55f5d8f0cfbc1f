// collapse_cost: what madvise(MADV_COLLAPSE) costs, the call with which
// shmcoll's PreferHugePages (shm/huge.go) backs a buffer that peers copy
// with by huge pages, against a memcpy of the same bytes. Each repetition
// maps a fresh 2 MiB-aligned anonymous buffer of 4 KiB pages, writes every
// byte, collapses it, checks every byte, and times a copy of it into a
// buffer whose pages exist already.
//
//   gcc -O2 -o collapse_cost collapse_cost.c && ./collapse_cost MiB [reps]
//
// prints the median, least and most of the collapse and of the copy in
// microseconds; a kernel that refuses (before Linux 6.1, or no huge page to
// be had) prints the error instead.
#include "floors.h"
#include <errno.h>

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

#define HUGE (2u << 20)

int main(int argc, char **argv) {
	size_t n = argc > 1 ? (size_t)atoi(argv[1]) << 20 : 0;
	int reps = argc > 2 ? atoi(argv[2]) : 5;
	if (n == 0 || n % HUGE != 0 || reps < 1 || reps > 1000) {
		fprintf(stderr, "usage: collapse_cost MiB [reps] (MiB a positive even number, reps 1 to 1000)\n");
		return 2;
	}
	uint64_t *tc = calloc(reps, sizeof *tc), *tm = calloc(reps, sizeof *tm);
	unsigned char *dst = malloc(n);
	if (!tc || !tm || !dst) {
		perror("malloc");
		return 1;
	}
	memset(dst, 1, n);
	for (int r = 0; r < reps; r++) {
		unsigned char *m = mmap(NULL, n + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED) {
			perror("mmap");
			return 1;
		}
		unsigned char *b = (unsigned char *)(((uintptr_t)m + HUGE - 1) & ~(uintptr_t)(HUGE - 1));
		if (madvise(b, n, MADV_NOHUGEPAGE) != 0) { // 4 KiB pages until the collapse
			perror("madvise MADV_NOHUGEPAGE");
			return 1;
		}
		for (size_t i = 0; i < n; i++)
			b[i] = (unsigned char)(i * 7 + (i >> 12) + r);
		if (madvise(b, n, MADV_HUGEPAGE) != 0) {
			perror("madvise MADV_HUGEPAGE");
			return 1;
		}
		uint64_t t0 = now();
		if (madvise(b, n, MADV_COLLAPSE) != 0) {
			printf("MADV_COLLAPSE refused: %s\n", strerror(errno));
			return 0;
		}
		tc[r] = now() - t0;
		for (size_t i = 0; i < n; i++) {
			if (b[i] != (unsigned char)(i * 7 + (i >> 12) + r)) {
				fprintf(stderr, "byte %zu changed by the collapse\n", i);
				return 1;
			}
		}
		t0 = now();
		memcpy(dst, b, n);
		tm[r] = now() - t0;
		if (dst[n - 1] != b[n - 1]) {
			fprintf(stderr, "copy: last byte differs\n");
			return 1;
		}
		munmap(m, n + HUGE);
	}
	qsort(tc, reps, sizeof *tc, cmp_u64);
	qsort(tm, reps, sizeof *tm, cmp_u64);
	printf("%zu MiB: collapse median %.0f us (%.0f-%.0f), memcpy median %.0f us (%.0f-%.0f), %d reps\n", n >> 20,
	       tc[reps / 2] / 1e3, tc[0] / 1e3, tc[reps - 1] / 1e3, tm[reps / 2] / 1e3, tm[0] / 1e3, tm[reps - 1] / 1e3, reps);
	return 0;
}
