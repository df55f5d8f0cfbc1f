// a2avband.c: MPI_Alltoallv calls of which every other one has a block
// above the band that TestAlltoallvBand sets (alltoallv=1:4K: at most 4
// KiB sent by any rank): rank p-1 sends rank 0 8000 bytes more, which no
// other rank knows from its own counts. Every call must give exact
// results, whether served or passed; with MPI_IN_PLACE (symmetric counts)
// and with a derived datatype on rank 1 (pairs of ints) as well.
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int val(int from, int call, int to, int i) { return from * 1000000 + call * 10000 + to * 1000 + i % 1000; }

int main(int argc, char **argv) {
	int rank, p, errs = 0;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &p);
	MPI_Datatype pair;
	MPI_Type_contiguous(2, MPI_INT, &pair);
	MPI_Type_commit(&pair);
	int *sc = malloc(p * sizeof(int)), *sd = malloc(p * sizeof(int));
	int *rc = malloc(p * sizeof(int)), *rd = malloc(p * sizeof(int));
	int *pc = malloc(p * sizeof(int)), *pd = malloc(p * sizeof(int));
	for (int call = 0; call < 12; call++) {
		int big = call % 2 == 1, inplace = call % 6 >= 4, derived = call % 6 >= 2 && !inplace;
		// Counts in ints, all even (pairs for the derived type).
		int stot = 0, rtot = 0;
		for (int q = 0; q < p; q++) {
			sc[q] = 2 * (inplace ? q + rank + 1 : q + 1);
			rc[q] = 2 * (inplace ? q + rank + 1 : rank + 1);
			if (big && rank == p - 1 && q == 0) sc[q] += 2000;
			if (big && rank == 0 && q == p - 1) rc[q] += 2000;
			if (big && inplace && rank == 0 && q == p - 1) sc[q] += 2000;
			if (big && inplace && rank == p - 1 && q == 0) rc[q] += 2000;
			sd[q] = stot;
			rd[q] = rtot;
			stot += sc[q];
			rtot += rc[q];
		}
		int *s = malloc((stot + 1) * sizeof(int)), *r = malloc((rtot + 1) * sizeof(int));
		for (int q = 0; q < p; q++)
			for (int i = 0; i < sc[q]; i++) s[sd[q] + i] = val(rank, call, q, i);
		for (int i = 0; i < rtot; i++) r[i] = -1;
		if (inplace) {
			for (int q = 0; q < p; q++)
				for (int i = 0; i < rc[q]; i++) r[rd[q] + i] = val(rank, call, q, i);
			MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_INT, r, rc, rd, MPI_INT, MPI_COMM_WORLD);
		} else if (derived && rank == 1) {
			for (int q = 0; q < p; q++) {
				pc[q] = sc[q] / 2;
				pd[q] = sd[q] / 2;
			}
			MPI_Alltoallv(s, pc, pd, pair, r, rc, rd, MPI_INT, MPI_COMM_WORLD);
		} else {
			MPI_Alltoallv(s, sc, sd, MPI_INT, r, rc, rd, MPI_INT, MPI_COMM_WORLD);
		}
		for (int q = 0; q < p; q++)
			for (int i = 0; i < rc[q]; i++)
				if (r[rd[q] + i] != val(q, call, rank, i)) {
					if (errs++ < 5)
						fprintf(stderr, "rank %d call %d: element %d from %d is %d, want %d\n", rank, call, i, q,
						        r[rd[q] + i], val(q, call, rank, i));
				}
		free(s);
		free(r);
	}
	MPI_Type_free(&pair);
	int all = 0;
	MPI_Allreduce(&errs, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0 && all == 0) printf(" No Errors\n");
	MPI_Finalize();
	return all != 0;
}
