// Package hier runs shmcoll's collectives across nodes under MPI: shared
// memory inside each node ([collectives.Comm] on a node-local arena), MPI
// calls between nodes. It is compiled only with the build tag mpi (Open MPI;
// add mpich for MPICH), see internal/mpi.
//
// # Forming the hierarchy
//
// [New] is collective over an MPI communicator. The node of a rank is its
// MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) group; SHMCOLL_NODE_SIZE (or
// [Options].NodeSizes) cuts each such group further into emulated nodes, so
// that multi-node behaviour runs on one machine: "2" makes nodes of 2
// consecutive ranks (the last may be smaller), "3,1,2" gives the sizes
// explicitly. Local rank 0 of each node creates the node's arena under a
// fresh name and broadcasts it over the node with MPI_Bcast; the other local
// ranks join it (the name is unlinked from /dev/shm as soon as all have
// joined). Lane i is the MPI communicator of local rank i of every node that
// has one, ordered by node; lane 0 is the leaders.
//
// # Allreduce
//
// Multi-lane ([MultiLane]): a shared-memory reduce-scatter cuts the vector
// into B blocks, B = the smallest node's size, so that block i is the same
// element range on every node and is held by local rank i; every lane i < B
// then reduces its block across nodes with one MPI_Allreduce, all lanes at
// once (all local ranks drive the network); a shared-memory allgather
// completes the vector. With uneven nodes the local ranks i >= B of the
// larger nodes hold empty blocks and sit the MPI stage out, so lanes always
// line up. Leader ([Leader]): shared-memory reduce to local rank 0, an
// MPI_Allreduce among the leaders, shared-memory broadcast. [Auto] takes
// Leader below 64 KiB (one small MPI call beats B of them) and MultiLane
// from there.
//
// Types and operators MPI lacks (bfloat16, float16, land, lor, minloc,
// maxloc on pairs) cross nodes as bytes: each lane member allgathers the
// lane's blocks and reduces them with shmcoll's own kernels in node order,
// so every member computes the same bits.
//
// Every rank ends with the same bits: inside a node the result of one rank
// is copied to the others, and across nodes MPI_Allreduce (or the byte path)
// hands every lane member the same block. Non-commutative operators are
// not offered: the operator is a built-in [simd.Op].
//
// # Failure
//
// An MPI error or a failed shared-memory call returns an error on the rank
// that saw it; shared-memory failures abort the node's arena so that the
// node's other ranks return too. A rank that dies makes MPI end the job
// (MPI's default); the arena name is already unlinked, so nothing is left in
// /dev/shm.
package hier
