// memo.c: libshmcoll's pass memo (a thread's repeat of a call it passed
// passes at once) must not outlive the communicator it was made on. Each
// round makes a communicator of one rank, whose calls pass, frees it, and
// duplicates MPI_COMM_WORLD, whose handle the MPI may hand out again, with
// calls of the same arguments, which are served. Then it broadcasts with a
// derived datatype that mixes types (passed), frees it, and broadcasts the
// same count with a derived datatype of doubles, which may get its handle
// and is served. Run by TestMemo of cmd/libshmcoll with
// SHMCOLL_MPI_BANDS=all; prints "No Errors" on rank 0.
//
// With -rs (run with reduce_scatter's band from 64 bytes) each round makes
// reduce_scatters of one int per rank, which pass, and of 64 per rank from
// the same counts array, which must be served: reduce_scatter's memo keys
// the counts' total, not the array (reduce_scatters, below).
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#define ROUNDS 20

static int reduce_scatter(int rank, int size, int n, int it, MPI_Comm comm) {
	int errs = 0, counts[64], in[64 * 64], out[64];
	for (int i = 0; i < size; i++) counts[i] = n;
	for (int i = 0; i < n * size; i++) in[i] = rank + i + it;
	MPI_Reduce_scatter(in, out, counts, MPI_INT, MPI_SUM, comm);
	for (int i = 0; i < n; i++) {
		int e = rank * n + i + it; // element e of the sum over ranks r of r + e
		if (out[i] != size * e + size * (size - 1) / 2) errs++;
	}
	return errs;
}

// reduce_scatters: per round two calls of one element per rank (passed),
// one of 64 (served), one on a communicator of one rank (passed: a pass
// decided before the counts are summed must not leave a memo of the
// served call's keys) and the one of 64 again (served).
static int reduce_scatters(int rank, int size) {
	int errs = 0;
	MPI_Comm one;
	MPI_Comm_split(MPI_COMM_WORLD, rank, 0, &one);
	for (int it = 0; it < ROUNDS; it++) {
		errs += reduce_scatter(rank, size, 1, it, MPI_COMM_WORLD);
		errs += reduce_scatter(rank, size, 1, it, MPI_COMM_WORLD);
		errs += reduce_scatter(rank, size, 64, it, MPI_COMM_WORLD);
		errs += reduce_scatter(0, 1, 1, it, one);
		errs += reduce_scatter(rank, size, 64, it, MPI_COMM_WORLD);
	}
	MPI_Comm_free(&one);
	return errs;
}

int main(int argc, char **argv) {
	int rank, size, errs = 0, reused = 0, treused = 0;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	int rs = argc > 1 && !strcmp(argv[1], "-rs");
	if (rs) errs = reduce_scatters(rank, size);
	for (int it = 0; it < ROUNDS && !rs; it++) {
		MPI_Comm one, dup;
		MPI_Comm_split(MPI_COMM_WORLD, rank, 0, &one);
		double x = rank, y = 0;
		for (int k = 0; k < 3; k++) MPI_Bcast(&x, 1, MPI_DOUBLE, 0, one);
		MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, one);
		if (x != rank || y != rank) {
			fprintf(stderr, "rank %d round %d: one rank's communicator: %g %g\n", rank, it, x, y);
			errs++;
		}
		MPI_Comm old = one;
		MPI_Comm_free(&one);
		MPI_Comm_dup(MPI_COMM_WORLD, &dup);
		reused += dup == old;
		x = rank == 0 ? 42 + it : -1;
		MPI_Bcast(&x, 1, MPI_DOUBLE, 0, dup);
		double v = 1, sum = 0;
		MPI_Allreduce(&v, &sum, 1, MPI_DOUBLE, MPI_SUM, dup);
		if (x != 42 + it || sum != size) {
			fprintf(stderr, "rank %d round %d: bcast %g allreduce %g, want %d and %d\n", rank, it, x, sum, 42 + it,
			        size);
			errs++;
		}
		MPI_Comm_free(&dup);

		struct {
			int i;
			double d;
		} mix[2];
		int bl[2] = {1, 1};
		MPI_Aint disp[2] = {0, (MPI_Aint)((char *)&mix[0].d - (char *)&mix[0])};
		MPI_Datatype parts[2] = {MPI_INT, MPI_DOUBLE}, mixed, st, doubles;
		MPI_Type_create_struct(2, bl, disp, parts, &st);
		MPI_Type_create_resized(st, 0, sizeof mix[0], &mixed);
		MPI_Type_free(&st);
		MPI_Type_commit(&mixed);
		for (int k = 0; k < 2; k++) {
			mix[k].i = rank == 0 ? it + k : -1;
			mix[k].d = rank == 0 ? 0.5 * (it + k) : -1;
		}
		for (int k = 0; k < 2; k++) MPI_Bcast(mix, 2, mixed, 0, MPI_COMM_WORLD);
		MPI_Datatype old_type = mixed;
		MPI_Type_free(&mixed);
		MPI_Type_contiguous(2, MPI_DOUBLE, &doubles);
		MPI_Type_commit(&doubles);
		treused += doubles == old_type;
		double dv[4];
		for (int k = 0; k < 2; k++) {
			for (int j = 0; j < 4; j++) dv[j] = rank == 0 ? it * 4 + j + k : -1;
			MPI_Bcast(dv, 2, doubles, 0, MPI_COMM_WORLD);
			for (int j = 0; j < 4; j++)
				if (dv[j] != it * 4 + j + k) errs++;
		}
		if (mix[1].i != it + 1 || mix[1].d != 0.5 * (it + 1)) errs++;
		MPI_Type_free(&doubles);
	}
	int all = 0;
	MPI_Allreduce(&errs, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0) {
		if (!rs) printf("handles reused in %d of %d rounds, datatype handles in %d\n", reused, ROUNDS, treused);
		if (all == 0) printf(" No Errors\n");
	}
	MPI_Finalize();
	return all != 0;
}
