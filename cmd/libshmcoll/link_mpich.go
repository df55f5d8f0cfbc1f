//go:build mpi && mpich

package main

// #cgo pkg-config: mpich
import "C"

import "github.com/shmcoll/shmcoll/collectives"

// barrierAlg: MPICH's barrier releases rank 0 first (a gather and a
// release), so that a call rooted at rank 0 after it finds its root ahead;
// the served barrier keeps that order (collectives.ReduceBcast), or a
// passed bcast after it would wait a handoff more than after MPICH's own.
const barrierAlg = collectives.ReduceBcast

// defaultBands for MPICH (see allBands for the form). shmcoll copies
// private buffers once by cross-memory attach (the single algorithm), so
// data movement is served from small blocks up, but the largest alltoall
// blocks from 3 ranks (at p = 2 shmcoll's alltoall is ahead at every
// size); MPICH's bcast below 16 KiB (an eager message down a tree, which
// returns at the root at once) and its gather and scatter of small blocks
// (a single eager message) pass, but on two ranks, where a served barrier
// and a passed rooted call after it cost a handoff more between dies than
// both served (docs/PERFORMANCE.md), bcast is served up to 2 KiB and
// gather and scatter at every size; a reduce_scatter of at most
// 8 bytes on two ranks (one eager message each way at most) and one below
// 4 KiB from three ranks (a vector of a few elements reaches few ranks,
// and MPICH's other ranks return at once) pass; alltoallv
// passes (see bands.go). A near pair (two ranks that share a core or its
// cache) passes reduce_scatter below 512 bytes and scatter's blocks below
// 16 KiB, where MPICH's own are as fast as a served call with its call
// into Go.
const defaultBands = `
allreduce            *  1:inf
reduce_scatter_block *  1:inf
reduce_scatter       *  1:inf
reduce_scatter       2  9:inf
reduce_scatter       3-inf  4K:inf
allgather            *  1:inf
allgatherv           *  1:inf
bcast                *  16K:inf
bcast                2  1:2K,16K:inf
reduce               *  1:inf
barrier              *  0:inf
alltoall             *  1:64K
alltoall             2  1:inf
alltoallv            *  none
scatter              *  8K:inf
gather               *  8K:inf
gather               2  1:inf
scatter              2  1:inf
scan                 *  1:inf
exscan               *  1:inf
reduce_scatter       near  512:inf
scatter              near  16K:inf
`
