/*
 * A long loop of served collectives, for the tests of a job that loses a
 * rank. Every rank writes its pid to DIR/rank<N>.pid; rank 0 prints
 * "looping" once every rank has made ITERS calls, then all go on.
 *
 * Usage: loop DIR abort|wait [ITERS]
 *   abort: after ITERS more calls, rank 1 calls MPI_Abort(MPI_COMM_WORLD, 3)
 *   wait:  the loop runs until the job is killed from outside
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 3) {
        if (rank == 0)
            fprintf(stderr, "usage: loop DIR abort|wait [ITERS]\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int abort_mode = strcmp(argv[2], "abort") == 0;
    long iters = argc > 3 ? atol(argv[3]) : 200;

    char path[4096];
    snprintf(path, sizeof path, "%s/rank%d.pid", argv[1], rank);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    fprintf(f, "%d\n", (int) getpid());
    fclose(f);

    enum { N = 8192 };
    static double in[N], out[N];
    for (int i = 0; i < N; i++)
        in[i] = rank + i;
    for (long k = 0;; k++) {
        if (k == iters && rank == 0) {
            printf("looping\n");
            fflush(stdout);
        }
        if (abort_mode && k == 2 * iters && rank == 1)
            MPI_Abort(MPI_COMM_WORLD, 3);
        MPI_Allreduce(in, out, N, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        MPI_Bcast(out, 64, MPI_DOUBLE, k % size, MPI_COMM_WORLD);
        double want = (double) size * (size - 1) / 2 + (double) size * 7;
        if (out[7] != want) {
            fprintf(stderr, "rank %d: call %ld: %g, want %g\n", rank, k, out[7], want);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
}
