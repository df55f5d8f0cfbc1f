//go:build mpi && !mpich

package main

// #cgo pkg-config: ompi-c
import "C"

// defaultBands for Open MPI (see allBands for the form). shmcoll copies
// private buffers once by cross-memory attach (the single algorithm), as
// Open MPI does, so data movement is served at every size but the
// largest alltoall blocks; reduce passes in the middle sizes, where Open
// MPI's pipelined tree is faster; alltoallv passes (all or nothing).
const defaultBands = `
allreduce            *  1:inf
reduce_scatter_block *  1:8,2K:inf
reduce_scatter       *  1:16,4K:inf
allgather            *  1:inf
allgatherv           *  1:inf
bcast                *  1:inf
reduce               *  1:4K,2M:inf
barrier              *  0:inf
alltoall             *  1:64K
alltoallv            *  none
scatter              *  1:inf
gather               *  1:inf
scan                 *  1:inf
exscan               *  1:inf
`
