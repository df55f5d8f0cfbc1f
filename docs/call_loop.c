// call_loop: what one collective call costs back to back, with nothing
// between the calls: the fixed cost of libshmcoll's entry points shows
// here, on calls the MPI itself answers in a few tens of nanoseconds. Each
// rank runs ITERS calls of COLL (allreduce, bcast or barrier) of BYTES
// bytes (doubles, sum, root 0) three times and rank 0 prints the mean time
// per call of the last pass. Run plain and preloaded one after the other,
// several times: a pair of ranks near each other passes these calls under
// Open MPI (docs/LIBSHMCOLL.md, "Near pairs"), so the preloaded time less
// the plain one is the cost of a passed call.
//
//   mpicc.openmpi -O2 -o /tmp/call_loop docs/call_loop.c
//   mpirun.openmpi -np 2 /tmp/call_loop bcast 8 200000
//   mpirun.openmpi -np 2 -x LD_PRELOAD=$PWD/libshmcoll.so /tmp/call_loop bcast 8 200000
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + 1e-9 * t.tv_nsec;
}

int main(int argc, char **argv)
{
	int rank;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (argc != 4) {
		if (rank == 0) fprintf(stderr, "usage: call_loop allreduce|bcast|barrier BYTES ITERS\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	const char *coll = argv[1];
	int n = atoi(argv[2]) / 8;
	long iters = atol(argv[3]);
	double *a = calloc(n + 1, sizeof(double)), *b = calloc(n + 1, sizeof(double));
	double t = 0;
	for (int pass = 0; pass < 3; pass++) {
		PMPI_Barrier(MPI_COMM_WORLD);
		double t0 = now();
		for (long i = 0; i < iters; i++) {
			if (!strcmp(coll, "bcast"))
				MPI_Bcast(a, n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
			else if (!strcmp(coll, "allreduce"))
				MPI_Allreduce(a, b, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
			else
				MPI_Barrier(MPI_COMM_WORLD);
		}
		t = (now() - t0) / iters;
	}
	if (rank == 0) printf("%s %d bytes: %.3f us per call\n", coll, 8 * n, t * 1e6);
	free(a);
	free(b);
	MPI_Finalize();
	return 0;
}
