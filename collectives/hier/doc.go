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
// The other collectives use the same two shapes. [Bcast]: shared-memory
// broadcast on the root's node, MPI_Bcast across nodes (by the leaders, or
// block i along lane i), then shared-memory broadcast (or allgather of the
// blocks) on the other nodes. [Reduce]: the mirror image, ending with the
// result handed to the root on its node. [Allgather] and
// [ReduceScatterBlock] work on the vector in node order (each node's ranks'
// blocks form its segment; for nodes whose ranks are not consecutive the
// vector is permuted on the way): the leader shape gathers or reduces to the
// leader, runs MPI_Allgatherv or MPI_Reduce_scatter of the segments among
// the leaders and scatters or broadcasts in the node; the multi-lane shape
// cuts every segment into B sub-blocks and gives sub-block i of every node
// to lane i. A single node needs no MPI at all and calls the node-local
// collective directly.
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
// A failed call (a bad argument, an MPI error, a failed shared-memory
// stage) aborts the node's arena, so that the node's other ranks return
// too, and then aborts the MPI job, as MPI_ERRORS_ARE_FATAL does: ranks on
// other nodes may be waiting for this one inside MPI, where nothing else
// could reach them. [Options].ReturnErrors returns the error instead, for
// callers that end the job themselves. A rank that dies makes MPI end the
// job; the arena names are unlinked once every local rank has joined, so
// nothing is left in /dev/shm.
package hier
