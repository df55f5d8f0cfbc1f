// Package hier runs shmcoll's collectives across nodes under MPI: shared
// memory inside each node ([collectives.Comm] on a node-local arena), MPI
// calls between nodes. It is compiled only with the build tag mpi (Open MPI;
// add mpich for MPICH), see package mpi.
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
// result handed to the root on its node.
//
// [Allgather], [Allgatherv], [ReduceScatterBlock] and [ReduceScatter]
// work on the vector in node order: each node's ranks' blocks, in local
// rank order, form its segment, and segments follow by node index (for
// nodes whose ranks are not consecutive the blocks are permuted on the way
// in or out). The multi-lane shape cuts every node's segment into B
// sub-blocks by elements, not by rank blocks, and gives sub-block i of
// every node to lane i: with irregular counts (even counts of 0) the lanes
// carry equal shares and still line up, so the irregular collectives keep
// both shapes. Allgatherv: shared-memory allgatherv of the node segment,
// then MPI_Allgatherv among the leaders (Leader; a shared-memory broadcast
// of the whole vector follows) or of sub-block i along lane i (MultiLane;
// a shared-memory allgatherv of the lanes' sub-blocks of each other node
// follows). ReduceScatter: shared-memory reduce to the leader,
// MPI_Reduce_scatter of the node segments among the leaders, then a
// shared-memory scatter (equal counts on the node) or a broadcast of the
// segment (irregular counts; node-local collectives have no scatterv)
// (Leader); or the vector rearranged so that lane i's sub-blocks of every
// segment are adjacent, a shared-memory reduce-scatter, MPI_Reduce_scatter
// along lane i and a shared-memory allgatherv of the node segment
// (MultiLane). Allgather and ReduceScatterBlock are the same with equal
// counts. A single node needs no MPI at all and calls the node-local
// collective directly.
//
// # Operators
//
// The operator is a [collectives.Op]: a built-in one or a user-defined one
// made by [collectives.NewOp], commutative or not. Built-in operators on
// types MPI has cross nodes as MPI reductions. The others (bfloat16,
// float16, land, lor, minloc and maxloc on pairs, and every user operator:
// the binding creates no MPI_Op) cross nodes as bytes: each lane member
// allgathers the lane's blocks over MPI and combines them left to right
// in node order, with shmcoll's kernels or the operator's function, so
// every member computes the same bits.
//
// A reducing collective combines operands in rank order, so a
// non-commutative operator gets send_0 op send_1 op ... op send_{p-1}:
// inside a node the node-local collectives choose an order-preserving
// algorithm for it (see [collectives]), and across nodes the byte path
// combines the nodes' results in node order. That is rank order when every
// node is a range of consecutive ranks, as SHMCOLL_NODE_SIZE and
// [Options].NodeSizes make them. With [Options].NodeOf nodes may not be
// (for example r%2): a non-commutative operator is then refused with an
// error wrapping [collectives.ErrNotCommutative], on every rank alike,
// before any communication. Permuting instead would need the whole vector
// of every rank in rank order somewhere, which is what the hierarchy is
// there to avoid.
//
// Every rank ends with the same bits: inside a node the result of one rank
// is copied to the others, and across nodes MPI_Allreduce (or the byte path)
// hands every lane member the same block.
//
// # Waiting
//
// A node's arena sees only its own ranks, but on one machine every rank of
// the shared-memory group competes for the CPUs, and most of a small
// collective is waiting: the node's other ranks wait for the leader's MPI
// stage. When the machine's MPI ranks outnumber its CPUs, the node arenas
// do not spin but yield at once (as shm does for arenas whose own ranks
// outnumber the CPUs), unless [Options].Collectives sets the waits. np=4
// on 2 CPUs in 2 nodes, Open MPI, BenchmarkRankAllreduce (medians of 4
// alternating runs of each build, load 8-14): allreduce 8 B leader 37 ->
// 16 µs, multi-lane 46 -> 16 µs; 1 KiB leader 38 -> 16 µs; 64 KiB leader
// 74 -> 46 µs; Open MPI's MPI_Allreduce 13, 16 and 104-137 µs in the same
// runs.
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
