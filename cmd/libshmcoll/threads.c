//go:build mpi

// The Go runtime's own threads run at the lowest priority, nice 19.
//
// Why. When a served call enters Go after the host thread has stayed in C
// long enough that every P went idle, the runtime's monitor thread (sysmon)
// is in its deep sleep, and the call wakes it (runtime.exitsyscallTryGetP).
// A thread woken at the host's priority preempts the caller on its CPU, or
// the peer rank on the other, before the call goes on: the first served
// call after every pause in the program's own work would pay a thread
// switch or two. At nice 19 the woken thread runs when a CPU has room
// instead. The runtime's threads do nothing the served calls wait for: the
// calls run on the host's thread, which keeps its priority; the runtime's
// threads sleep, collect garbage (the served calls do not allocate) and
// run the library's few background goroutines, which only sleep.
//
// How. A thread starts with its creator's nice value. Go's own constructor,
// which runs before this file's second one (the linker places the Go
// object's .init_array entry before those of the package's C files), starts
// the thread that initialises the runtime, and every later runtime thread
// is made by that thread or by the threads it made (a thread that enters Go
// from C has the runtime's template thread make new ones for it). So
// sc_threads_before notes the threads present before Go's constructor, and
// sc_threads_after lowers every thread that appeared since, listing them
// again until a listing finds no new one: a thread made by a runtime thread
// before its maker was lowered is found and lowered too, and any made later
// inherits nice 19. The host's threads are never touched. The library is
// meant to be loaded by LD_PRELOAD, before any host thread exists; a host
// thread that starts another thread during Go's constructor (a library
// loaded earlier with threads of its own) could have that thread lowered.
//
// SHMCOLL_MPI_NICE=N gives the runtime's threads nice N instead (0-19; a
// value at or below the host's leaves them as they are). Where /proc is not
// mounted nothing is lowered.

#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "shmcoll.h"

enum { SC_MAX_THREADS = 256 };

static pid_t sc_before[SC_MAX_THREADS];
static int sc_nbefore = -1; // -1: /proc/self/task could not be read
int sc_lowered;             // runtime threads lowered (SHMCOLL_MPI_DEBUG reports it)
int sc_lowered_nice;        // to this nice value
int sc_nice_bad;            // SHMCOLL_MPI_NICE is not a nice value from 0 to 19

static int sc_known(const pid_t *set, int n, pid_t t) {
	for (int i = 0; i < n; i++)
		if (set[i] == t)
			return 1;
	return 0;
}

// sc_list fills tids with the threads of this process, at most max; it
// returns how many, or -1 when /proc/self/task cannot be read.
static int sc_list(pid_t *tids, int max) {
	DIR *d = opendir("/proc/self/task");
	if (d == NULL)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL && n < max) {
		pid_t t = (pid_t)atoi(e->d_name);
		if (t > 0)
			tids[n++] = t;
	}
	closedir(d);
	return n;
}

__attribute__((constructor(101))) static void sc_threads_before(void) {
	sc_nbefore = sc_list(sc_before, SC_MAX_THREADS);
}

__attribute__((constructor)) static void sc_threads_after(void) {
	if (sc_nbefore < 0)
		return;
	int nice = 19;
	const char *env = getenv("SHMCOLL_MPI_NICE");
	if (env != NULL && *env != '\0') {
		char *end;
		long v = strtol(env, &end, 10);
		if (end == env || *end != '\0' || v < 0 || v > 19) {
			sc_nice_bad = 1; // shmcollStart reports it and passes every call
			return;
		}
		nice = (int)v;
	}
	errno = 0;
	int host = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
	if (errno != 0 || nice <= host)
		return;
	pid_t done[SC_MAX_THREADS];
	int ndone = 0;
	for (;;) {
		pid_t now[SC_MAX_THREADS];
		int n = sc_list(now, SC_MAX_THREADS), fresh = 0;
		for (int i = 0; i < n && ndone < SC_MAX_THREADS; i++) {
			pid_t t = now[i];
			if (sc_known(sc_before, sc_nbefore, t) || sc_known(done, ndone, t))
				continue;
			done[ndone++] = t;
			fresh++;
			// A thread that has exited meanwhile fails with ESRCH: nothing to do.
			if (setpriority(PRIO_PROCESS, (id_t)t, nice) == 0)
				sc_lowered++;
		}
		if (fresh == 0)
			break;
	}
	sc_lowered_nice = nice;
}
