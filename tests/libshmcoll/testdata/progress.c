/*
 * MPI progress inside a served collective. Rank 0 starts nonblocking
 * operations, then enters MPI_Allreduce; the other ranks first complete
 * their side of those operations with blocking calls and only then enter
 * MPI_Allreduce. Their blocking calls can finish only if rank 0's MPI
 * makes progress while rank 0 waits in the allreduce: a synchronous send
 * of a message too large to go eagerly, and a nonblocking barrier. The
 * program is correct MPI (the progress rule); a library that waits without
 * letting the MPI progress deadlocks it.
 *
 * Usage: progress [BYTES]. Rank 0 prints " No Errors".
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    int rank, size, errs = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    size_t bytes = argc > 1 ? strtoull(argv[1], NULL, 10) : 4 << 20;
    MPI_Comm other;
    MPI_Comm_dup(MPI_COMM_WORLD, &other);
    /* One buffer per destination, each pending until the Waitall. */
    unsigned char *msg = malloc(bytes * (size < 32 ? size : 32));
    enum { N = 4096 };
    static long in[N], out[N];

    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++)
            in[i] = rank * 1000 + i + round;
        MPI_Request reqs[64];
        MPI_Status sts[64];
        int nreq = 0;
        if (rank == 0) {
            for (int q = 1; q < size && q < 32; q++) {
                memset(msg + q * bytes, q + round, bytes);
                MPI_Issend(msg + q * bytes, bytes, MPI_BYTE, q, round, MPI_COMM_WORLD, &reqs[nreq++]);
            }
            MPI_Ibarrier(other, &reqs[nreq++]);
        } else {
            MPI_Recv(msg, bytes, MPI_BYTE, 0, round, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            for (size_t i = 0; i < bytes; i += 4093)
                if (msg[i] != (unsigned char) (rank + round)) {
                    fprintf(stderr, "rank %d: byte %zu is %d\n", rank, i, msg[i]);
                    errs++;
                    break;
                }
            MPI_Request r;
            MPI_Ibarrier(other, &r);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
        }
        /* Rank 0 waits here for ranks that wait for rank 0's MPI. */
        MPI_Allreduce(in, out, N, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
        if (rank == 0)
            MPI_Waitall(nreq, reqs, sts);
        for (int i = 0; i < N; i++) {
            long want = 1000L * size * (size - 1) / 2 + (long) size * (i + round);
            if (out[i] != want) {
                fprintf(stderr, "rank %d: element %d is %ld, want %ld\n", rank, i, out[i], want);
                errs++;
                break;
            }
        }
    }

    if (rank == 0) {
        int total = errs;
        for (int q = 1; q < size; q++) {
            int e;
            MPI_Recv(&e, 1, MPI_INT, q, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            total += e;
        }
        printf(total ? " Found %d errors\n" : " No Errors\n", total);
    } else {
        MPI_Send(&errs, 1, MPI_INT, 0, 99, MPI_COMM_WORLD);
    }
    MPI_Comm_free(&other);
    free(msg);
    MPI_Finalize();
    return errs != 0;
}
