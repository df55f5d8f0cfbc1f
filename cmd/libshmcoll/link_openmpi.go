//go:build mpi && !mpich

package main

// #cgo pkg-config: ompi-c
import "C"

import "github.com/shmcoll/shmcoll/collectives"

// barrierAlg: Open MPI's barrier of two ranks is symmetric, as shmcoll's
// own (auto).
const barrierAlg = collectives.Auto

// defaultBands for Open MPI (see allBands for the form). shmcoll copies
// private buffers once by cross-memory attach (the single algorithm), as
// Open MPI does, so data movement is served at every size but the largest
// alltoall blocks from 3 ranks (at p = 2 shmcoll's alltoall is ahead at
// every size) and, from 3 ranks, scatter's middle blocks; reduce passes in
// the middle sizes from 3 ranks, where Open MPI's pipelined tree is faster
// (at p = 2 shmcoll's reduce, through the slots, is ahead at every size);
// alltoallv passes (see bands.go). From 5 ranks (oversubscribed on small
// nodes) the smallest calls of allreduce, reduce_scatter_block, allgather,
// reduce and alltoall pass too, where Open MPI's own were faster at p = 8,
// and at p = 3 and 4 reduce_scatter below 4 KiB (at p = 4 a vector of a
// few elements reaches one or two ranks, whose Open MPI calls then return
// after an eager message or none). A near pair (two ranks that share a
// core or its cache) passes the small calls, where Open MPI's own take
// about as long as the call into Go that a served call pays.
const defaultBands = `
allreduce            *      1:inf
allreduce            5-inf  256:inf
reduce_scatter_block *      1:8,2K:inf
reduce_scatter_block 5-inf  2K:inf
reduce_scatter       *      1:16,4K:inf
reduce_scatter       3-4    4K:inf
allgather            *      1:inf
allgather            5-inf  64:inf
allgatherv           *      1:inf
bcast                *      1:inf
reduce               *      1:4K,2M:inf
reduce               2      1:inf
reduce               5-inf  2M:inf
barrier              *      0:inf
alltoall             *      1:64K
alltoall             2      1:inf
alltoall             5-inf  64:64K
alltoallv            *      none
scatter              *      1:128K,4M:inf
scatter              2      1:inf
gather               *      1:inf
scan                 *      1:inf
exscan               *      1:inf
allreduce            near   512:inf
reduce_scatter_block near   2K:inf
reduce_scatter       near   4K:inf
allgather            near   512:inf
allgatherv           near   2K:inf
bcast                near   512:inf
reduce               near   4K:inf
barrier              near   none
alltoall             near   512:inf
scatter              near   4K:inf
gather               near   4K:inf
`
