//go:build mpi

package cgocost

/*
#include <pthread.h>
#include <stdint.h>
#include <time.h>

extern int cgocostAdd1(int);

static uint64_t cc_now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static int cc_add1(int x) { return x + 1; }

// cc_loop makes n calls, into Go (go != 0) or into the C function of the
// same body, spinning gap nanoseconds before each, and returns the
// nanoseconds spent in the calls alone.
static uint64_t cc_loop(long n, int go, uint64_t gap) {
	uint64_t in = 0;
	volatile int x = 0;
	for (long i = 0; i < n; i++) {
		if (gap > 0) {
			uint64_t until = cc_now() + gap;
			while (cc_now() < until) {
			}
		}
		uint64_t t0 = cc_now();
		x = go ? cgocostAdd1(x) : cc_add1(x);
		in += cc_now() - t0;
	}
	return in;
}

struct cc_args { long n; int go; uint64_t gap, in; };

static void *cc_thread(void *p) {
	struct cc_args *a = p;
	a->in = cc_loop(a->n, a->go, a->gap);
	return 0;
}

// cc_loop_thread is cc_loop on a thread that C creates, as an MPI
// program's own threads are (0 when the thread cannot be made).
static uint64_t cc_loop_thread(long n, int go, uint64_t gap) {
	struct cc_args a = {n, go, gap, 0};
	pthread_t t;
	if (pthread_create(&t, 0, cc_thread, &a) != 0)
		return 0;
	pthread_join(t, 0);
	return a.in;
}
*/
import "C"

//export cgocostAdd1
func cgocostAdd1(x C.int) C.int { return x + 1 }

// Calls makes n calls from C, into Go when toGo, else into a C function of
// the same body, spinning gapNS nanoseconds in C before each, and returns
// the nanoseconds spent in the calls alone (two clock reads included). With
// cThread the calls come from a thread that C created (a host program's
// thread, as in libshmcoll), else from the calling goroutine's thread.
func Calls(n int, toGo, cThread bool, gapNS int) int64 {
	g := C.int(0)
	if toGo {
		g = 1
	}
	if cThread {
		return int64(C.cc_loop_thread(C.long(n), g, C.uint64_t(gapNS)))
	}
	return int64(C.cc_loop(C.long(n), g, C.uint64_t(gapNS)))
}
