// barrier_skew: how far apart the ranks leave a barrier. Each of N
// iterations writes 16 KiB (as a benchmark's bookkeeping between timed
// calls), enters the barrier and reads CLOCK_MONOTONIC, which is node-wide,
// on the way out. Rank 0 prints the median, 10th and 90th percentile of
// each rank's exit time minus rank 0's. A benchmark that times a call
// after a barrier and takes the slowest rank's time per iteration adds
// about that much to every iteration.
//
// With "pmpi" it calls PMPI_Barrier, the MPI's own even under libshmcoll;
// otherwise MPI_Barrier, which a preloaded libshmcoll serves.
//
//   mpicc.mpich -O2 -o /tmp/barrier_skew docs/barrier_skew.c
//   mpirun.mpich -np 2 -bind-to core /tmp/barrier_skew 20000 pmpi
//   mpirun.mpich -np 2 -bind-to core -genv LD_PRELOAD $PWD/libshmcoll.so /tmp/barrier_skew 20000
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int rank, size;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc < 2 || atoi(argv[1]) < 10) {
		if (rank == 0)
			fprintf(stderr, "usage: barrier_skew ITERATIONS [pmpi]\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	int n = atoi(argv[1]);
	int (*barrier)(MPI_Comm) = argc > 2 && !strcmp(argv[2], "pmpi") ? PMPI_Barrier : MPI_Barrier;
	enum { WORK = 16384 };
	char *work = malloc(WORK);
	double *out = malloc(n * sizeof *out), *all = NULL, *d = malloc(n * sizeof *d);
	for (int i = 0; i < n; i++) {
		memset(work, i, WORK);
		barrier(MPI_COMM_WORLD);
		out[i] = now_us();
	}
	if (rank == 0)
		all = malloc((size_t)n * size * sizeof *all);
	PMPI_Gather(out, n, MPI_DOUBLE, all, n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		for (int r = 1; r < size; r++) {
			for (int i = 0; i < n; i++)
				d[i] = all[(size_t)r * n + i] - all[i];
			qsort(d, n, sizeof *d, cmp);
			printf("rank %d leaves %s after rank 0 by %.2f us (median; p10 %.2f, p90 %.2f)\n", r,
			       barrier == PMPI_Barrier ? "PMPI_Barrier" : "MPI_Barrier", d[n / 2], d[n / 10],
			       d[n * 9 / 10]);
		}
	}
	free(work);
	free(out);
	free(all);
	free(d);
	MPI_Finalize();
	return 0;
}
