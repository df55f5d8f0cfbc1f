// idle_gap: what the first collective after a pause costs. Each of 300
// iterations computes for GAP microseconds (a busy loop, as a program's own
// work), meets the other ranks in PMPI_Barrier (the MPI's own, never
// served), then times two 8-byte MPI_Allreduce calls: the first after the
// pause, the second straight after it. Each rank prints the medians. Under
// libshmcoll the first call includes the C-to-Go call after a long stay in C
// (docs/LIBSHMCOLL.md, "The Go runtime inside a C process").
//
//   mpicc.openmpi -O2 -o /tmp/idle_gap docs/idle_gap.c
//   mpirun.openmpi -np 2 /tmp/idle_gap 2000
//   mpirun.openmpi -np 2 -x LD_PRELOAD=$PWD/libshmcoll.so /tmp/idle_gap 2000
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + 1e-9 * t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	enum { N = 300, WARM = 20 };
	static double first[N], second[N];
	int rank;
	double in = 1, out;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (argc != 2) {
		if (rank == 0)
			fprintf(stderr, "usage: idle_gap GAP-microseconds\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	double gap = atof(argv[1]) * 1e-6;
	for (int i = 0; i < N + WARM; i++) {
		double until = now() + gap;
		while (now() < until) {
		}
		PMPI_Barrier(MPI_COMM_WORLD);
		double t0 = now();
		MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		double t1 = now();
		MPI_Allreduce(&in, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		double t2 = now();
		if (i >= WARM) {
			first[i - WARM] = t1 - t0;
			second[i - WARM] = t2 - t1;
		}
	}
	qsort(first, N, sizeof first[0], cmp);
	qsort(second, N, sizeof second[0], cmp);
	printf("rank %d, gap %s us: first call %.2f us, second %.2f us (medians)\n", rank, argv[1],
	       first[N / 2] * 1e6, second[N / 2] * 1e6);
	MPI_Finalize();
	return 0;
}
