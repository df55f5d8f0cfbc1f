// threads.c: the priorities of this process's threads once the library
// serves. The host's nice value is read first thing in main; after
// MPI_Init (which may start the MPI's own threads) and a served
// MPI_Allreduce (which has the Go runtime start what it needs), each rank
// counts its threads by nice value and prints one line:
//
//   rank R: host nice H, main thread nice M, T threads: A at the host's nice, B at 19, C other
//
// Under libshmcoll the main thread and the MPI's threads keep the host's
// value and the Go runtime's threads run at 19 (threads.c of the library).
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

static int nice_of(int tid) {
	errno = 0;
	int n = getpriority(PRIO_PROCESS, (id_t)tid);
	return errno ? -100 : n;
}

int main(int argc, char **argv) {
	int main_tid = (int)syscall(SYS_gettid);
	int host = nice_of(main_tid);
	int rank, size;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	double x = rank, sum = 0;
	MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	int errs = sum != size * (size - 1) / 2.0;
	int total = 0, at_host = 0, at19 = 0, other = 0;
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	while (d != NULL && (e = readdir(d)) != NULL) {
		int t = atoi(e->d_name);
		if (t <= 0)
			continue;
		int n = nice_of(t);
		if (n == -100)
			continue; // exited meanwhile
		total++;
		if (n == host)
			at_host++;
		else if (n == 19)
			at19++;
		else
			other++;
	}
	if (d != NULL)
		closedir(d);
	printf("rank %d: host nice %d, main thread nice %d, %d threads: %d at the host's nice, %d at 19, %d other\n",
	       rank, host, nice_of(main_tid), total, at_host, at19, other);
	MPI_Allreduce(MPI_IN_PLACE, &errs, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0 && errs == 0)
		printf("No Errors\n");
	MPI_Finalize();
	return 0;
}
