//go:build mpi && mpich

package main

// #cgo pkg-config: mpich
import "C"

// defaultBands for MPICH (see allBands for the form). MPICH moves larger
// messages with one copy where shmcoll makes two, so data movement passes
// in the middle sizes, and its bcast of a few bytes returns at the root at
// once; alltoallv passes (all or nothing).
const defaultBands = `
allreduce            *  1:inf
reduce_scatter_block *  1:inf
reduce_scatter       *  1:inf
allgather            *  1:16K
allgatherv           *  1:32K
bcast                *  512:4K,16M:inf
reduce               *  1:inf
barrier              *  0:inf
alltoall             *  1:16K
alltoallv            *  none
scatter              *  1:2K
gather               *  1:2K
scan                 *  1:inf
exscan               *  1:inf
`
