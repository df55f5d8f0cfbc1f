// progress.c: rank 0 starts a large MPI_Isend to rank 1 and enters an
// MPI_Allreduce; rank 1 enters the allreduce only after its MPI_Recv has
// completed. Legal MPI: the send must progress while rank 0 waits inside
// the collective, which a served allreduce does by calling the MPI now and
// then. Also an MPI_Ibarrier pending across a served MPI_Bcast.
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
	int rank, size, errs = 0;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	const int n = 4 << 20; // past every eager limit
	char *buf = malloc(n);
	double x = rank, sum = 0;
	MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); // sets up the arena
	for (int round = 0; round < 3; round++) {
		if (rank == 0) {
			MPI_Request rq;
			for (int i = 0; i < n; i++) buf[i] = (char)(i + round);
			MPI_Isend(buf, n, MPI_CHAR, 1, 7, MPI_COMM_WORLD, &rq);
			MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
			MPI_Wait(&rq, MPI_STATUS_IGNORE);
		} else {
			if (rank == 1) {
				MPI_Recv(buf, n, MPI_CHAR, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				for (int i = 0; i < n; i++)
					if (buf[i] != (char)(i + round)) errs++;
			}
			MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		}
		if (sum != size * (size - 1) / 2.0) errs++;
	}
	// A nonblocking barrier pending across a served bcast.
	MPI_Request rq;
	int v = rank == 0 ? 5 : 0;
	MPI_Ibarrier(MPI_COMM_WORLD, &rq);
	MPI_Bcast(&v, 1, MPI_INT, 0, MPI_COMM_WORLD);
	MPI_Wait(&rq, MPI_STATUS_IGNORE);
	if (v != 5) errs++;
	int all = 0;
	MPI_Reduce(&errs, &all, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0 && all == 0) printf("No Errors\n");
	free(buf);
	MPI_Finalize();
	return all != 0;
}
