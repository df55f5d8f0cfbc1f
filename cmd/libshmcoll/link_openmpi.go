//go:build mpi && !mpich

package main

// #cgo pkg-config: ompi-c
import "C"

// defaultBands for Open MPI (see allBands for the form). Open MPI moves
// larger messages with one copy (CMA) where shmcoll makes two, so data
// movement passes in the middle sizes; alltoallv passes (all or nothing).
const defaultBands = `
allreduce            *  1:inf
reduce_scatter_block *  1:8,2K:inf
reduce_scatter       *  1:16,4K:inf
allgather            *  1:2K
allgatherv           *  1:4K
bcast                *  1:4K,16M:inf
reduce               *  1:4K,2M:inf
barrier              *  0:inf
alltoall             *  1:2K
alltoallv            *  none
scatter              *  1:2K
gather               *  1:2K
scan                 *  1:inf
exscan               *  1:inf
`
