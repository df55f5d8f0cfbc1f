"""Collectives from mpi4py on numpy arrays, checked exactly: Allreduce (and
in place), Allgather, Bcast from a rank other than 0, Reduce_scatter_block
and Reduce_scatter, at a few elements and at a few hundred thousand. Rank 0
prints the thread level MPI granted and " No Errors"; a rank that found an
error exits 1."""

import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
errors = []


def check(what, got, want):
    if got.shape != want.shape or not np.array_equal(got, want):
        bad = np.flatnonzero(got.ravel() != want.ravel())
        i = int(bad[0]) if bad.size else -1
        errors.append(f"{what}: {bad.size} elements differ, first at {i}")


for n in (7, 300_001):
    idx = np.arange(n)
    ranks = np.arange(size).reshape(-1, 1)

    for dtype in (np.int32, np.int64, np.float64, np.float32):
        x = ((rank * 7 + idx) % 13).astype(dtype)
        want = ((ranks * 7 + idx) % 13).astype(dtype).sum(axis=0, dtype=dtype)
        y = np.empty_like(x)
        comm.Allreduce(x, y, op=MPI.SUM)
        check(f"Allreduce({np.dtype(dtype).name}, SUM, {n})", y, want)

    x = (rank * 31 + idx * 17) % 1001 - 500.0
    comm.Allreduce(MPI.IN_PLACE, x, op=MPI.MAX)
    check(f"Allreduce(IN_PLACE, float64, MAX, {n})", x,
          ((ranks * 31 + idx * 17) % 1001 - 500.0).max(axis=0))

    x = np.full(n, rank, dtype=np.int16) + idx.astype(np.int16)
    g = np.empty(n * size, dtype=np.int16)
    comm.Allgather(x, g)
    check(f"Allgather(int16, {n})", g,
          (ranks.astype(np.int16) + idx.astype(np.int16)).ravel())

    root = size - 1
    b = np.arange(n, dtype=np.float64) * 0.25 if rank == root else np.zeros(n)
    comm.Bcast(b, root=root)
    check(f"Bcast(float64, {n}, root {root})", b, np.arange(n) * 0.25)

    s = ((rank + np.arange(n * size)) % 11).astype(np.int64)
    r = np.empty(n, dtype=np.int64)
    comm.Reduce_scatter_block(s, r, op=MPI.SUM)
    full = ((ranks + np.arange(n * size)) % 11).sum(axis=0)
    check(f"Reduce_scatter_block(int64, SUM, {n})", r, full[rank * n:(rank + 1) * n])

    counts = [n + q for q in range(size)]
    total = sum(counts)
    s = ((rank * 3 + np.arange(total)) % 7).astype(np.float64)
    r = np.empty(counts[rank], dtype=np.float64)
    comm.Reduce_scatter(s, r, recvcounts=counts, op=MPI.SUM)
    full = ((ranks * 3 + np.arange(total)) % 7).astype(np.float64).sum(axis=0)
    off = sum(counts[:rank])
    check(f"Reduce_scatter(float64, SUM, {counts})", r, full[off:off + counts[rank]])

for e in errors[:10]:
    print(f"rank {rank}: {e}", file=sys.stderr)
# Rank 0 adds up the errors through point-to-point messages.
if rank == 0:
    total = len(errors) + sum(comm.recv(source=q, tag=9) for q in range(1, size))
    level = {MPI.THREAD_SINGLE: "single", MPI.THREAD_FUNNELED: "funneled",
             MPI.THREAD_SERIALIZED: "serialized", MPI.THREAD_MULTIPLE: "multiple"}
    print(f"thread level {level.get(MPI.Query_thread(), MPI.Query_thread())}")
    print(" No Errors" if total == 0 else f" Found {total} errors", flush=True)
else:
    comm.send(len(errors), dest=0, tag=9)
sys.exit(1 if errors else 0)
