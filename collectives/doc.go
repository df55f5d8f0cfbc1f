// Package collectives runs MPI-style collective operations among the ranks
// of one node — processes or goroutines — through one shared-memory arena
// per communicator (package shm).
//
// # Communicators
//
// A [Comm] is one rank's handle. Get all ranks of an in-process
// communicator with [NewLocal] (or run a function on each with [Run]); in
// a process, join with [JoinEnv] (the environment shmrun or mpirun sets) or
// [Join] (explicit name, rank and size). [Comm.Split] and [Comm.Dup] make new
// communicators with arenas of their own, whose name the ranks agree on
// through the parent's arena; any number may be in use at once. Every rank
// must make the same collective calls on a communicator in the same order,
// as in MPI; one Comm is used by one goroutine at a time. [Comm.Close]
// releases the rank's share of the arena.
//
// # Calls
//
// The collectives are generic functions over the element types of
// [simd.Element]: [Allreduce], [ReduceScatterBlock], [ReduceScatter],
// [Allgather], [Allgatherv], [Bcast], [Reduce], [Scatter], [Gather], [Scan],
// [Exscan], [Barrier], [Alltoall], [Alltoallv], [Gatherv], [Scatterv]
// (the last two with the flat algorithm only). A nil send buffer means in
// place (the documentation of each function says where the input and the
// result are). Reductions take an [Op]: a built-in operator ([Sum] ...
// [MaxLoc]), the average [Avg] of the floating types (the sum divided by
// the number of operands, bitwise the same on every rank), or a
// user-defined one made by [NewOp], commutative or not.
// Every call takes a context; cancelling it aborts the communicator.
//
// The element types include int, uint and uintptr, as the sized integer of
// their size on the platform, and any type defined on a numeric type (type
// Weight float32): [simd.TypeOf] gives such a type the [simd.Type] of its
// kind and size, so it runs the kernels of that type and matches it in the
// call descriptors (a float32 on one rank and a Weight on another is the
// same call). [simd.BFloat16] and [simd.Float16] stay half-precision
// floats although their underlying type is uint16; [simd.Element] says how.
//
// # Nonblocking calls
//
// Every collective has a nonblocking form ([IAllreduce], [IBcast], ...,
// [IBarrier], [IGatherv], [IScatterv]) that queues the call and returns a
// [*Request] at once; [Request.Wait] blocks until it completes and returns
// its error, [Request.Test] reports without blocking. Several calls may be
// outstanding on one communicator. They run one after the other in the
// order they were made, on the communicator's progress goroutine (started
// by the first nonblocking call, stopped by Close), each exactly as its
// blocking form runs: the same checks, algorithms and results, and the
// same errors ([ErrMismatch], [ErrPeerDead], a cancelled context) reach
// Wait. A blocking call made while nonblocking ones are outstanding waits
// for them first, so a rank's calls keep program order whichever form
// each takes. The buffers, counts and displacements of a nonblocking call
// belong to it until Wait or Test reports completion. Close with calls
// outstanding aborts the communicator: the running call fails with
// [ErrAborted], the queued ones with [ErrClosed]. [Comm.Stats] and
// [Comm.LastAlgorithm] describe the last call run: read them when no
// request is outstanding.
//
// Overlap gains the communication's time only where a CPU is free for the
// progress goroutine. Shared-memory collectives move and reduce the data
// with the CPU (there is no network adapter or DMA engine doing it
// meanwhile), so where every CPU computes, the progress goroutine takes
// its time from the computation and the call's copies and reductions gain
// nothing over the blocking form; what is left to gain there is the time
// a rank would spend waiting for slower ranks to arrive (BenchmarkOverlap
// measures both cases).
//
// # Algorithms and selection
//
// Each [Algorithm] constant documents its family: Flat and Replicated
// read straight from the other ranks' slots in one or two
// synchronizations; Circulant, Nblock, the trees (Tree, DualRoot,
// ReduceBcast), the Rabenseifner family, Ring, MST, BDE and Bruck are the
// round-based algorithms of the literature; Direct reads buffers from
// [Alloc] in place; Single copies between the ranks' private buffers once,
// by cross-memory attach. Auto selection decides per call, from inputs
// equal on every rank: a pin (Options.Algorithms over
// SHMCOLL_ALGO_<COLL>, e.g. SHMCOLL_ALGO_ALLREDUCE=flat), Direct for arena
// buffers, Single where cross-memory attach is on ([Comm.CrossMemory]),
// the selection [Table] measured by shmbench tune (built in as
// [DefaultTable], or the file SHMCOLL_TUNE_FILE names, or Options.Table),
// else a heuristic. The
// ranks compare the table's hash when they join (a difference is
// [ErrTableMismatch] on every rank), and the choice is part of the call
// descriptor ([Comm.LastAlgorithm] reports it; [Select] and shmbench
// select explain it). docs/TUNING.md describes the table and the method.
//
// # Where things are
//
// Collectives: one generic entry point each in api.go ([Allreduce] ...
// [Alltoallv]); communicators in comm.go, [Comm.Split] and [Comm.Dup] in
// split.go, [Alloc] in arena.go, [Op] in op.go, errors in errors.go,
// [Stats] in stats.go, the names of collectives and algorithms and the
// registry of implementations in names.go.
//
// Algorithms, one file per family, each registering itself in init:
//   - Flat, Replicated: flat.go
//   - Circulant: circulant.go
//   - Nblock: nblock.go
//   - Tree, DualRoot, ReduceBcast: tree.go
//   - Rabenseifner, Rabenseifner21, RecDoubling, RabenseifnerOdd: rabenseifner.go,
//     with the two-rank loop they run at p = 2 in pair.go
//   - Ring: ring.go; MST: mst.go; BDE: bde.go; Bruck: bruck.go
//   - Direct: direct.go
//   - Single: single.go
//
// Machinery: selection in select.go (decide) and table.go ([Table];
// tune/default.txt as shmbench tune wrote it, tune/overrides.txt the
// hand-made entries with their reasons); the step protocol in step.go;
// the small-call path, its lean mode, in small.go; the read-schedule
// engine of Ring, MST, BDE, Bruck and the Rabenseifner family in
// schedule.go; cutting vectors into segments in segment.go; the store
// advice (non-temporal stores by placement) in advice.go; early return
// and its later check (settle) in early.go; the nonblocking queue in
// nonblocking.go.
//
// # Buffers in the arena
//
// With Options.HeapBytes each rank has a heap in the arena, and [Alloc]
// hands out buffers from it ([Free] returns them). Large calls whose
// buffers all come from Alloc on every rank take [Direct]: the ranks read
// each other's buffers in place, with no copy into the slots, bitwise as
// Flat would. Under shmrun, the launcher creates the arena: give it -heap.
//
// # Reduction order and reproducibility
//
// For a fixed p, algorithm, skip sequence and input, results are bitwise the
// same on every rank and in every run, because every element is combined
// by exactly one rank in a fixed order and then copied:
//   - flat, replicated: x_0 op x_1 op ... op x_{p-1}, left to right in
//     rank order (the k-way kernel combines up to 8 operands per pass;
//     bfloat16 and float16 are rounded once per pass). Correct for
//     non-commutative operators.
//   - circulant reduce-scatter and allreduce: block b is the expression
//     circulant.ReduceScatterExpr(p, b, skips) prints, with the local
//     partial result always the left operand. Needs a commutative operator.
//   - circulant reduce: at each node of the tree, own input op child
//     results in the reverse order of the broadcast rounds.
//   - trees (DualRoot, Tree, ReduceBcast) and MST reduce: x_0 op ... op
//     x_{p-1} in rank order, bracketed by the tree. Correct for
//     non-commutative operators.
//   - nblock reduce, reduce-scatter and allreduce: the local partial
//     result on the left, in schedule order. Needs a commutative operator.
//   - scan, exscan: flat, in rank order.
//
// Pin an algorithm (Options.Algorithms) to keep results fixed when the
// selection table changes; a non-commutative operator runs only on
// algorithms that keep rank order (auto never chooses otherwise; pinning
// circulant for one is [ErrNotCommutative]).
//
// # Protocol
//
// Every algorithm is a sequence of steps on the ranks' slots (step.go).
// In each step a rank publishes the call's descriptor (sequence number,
// collective, type, operator, counts, root, algorithm) beside its
// progress counter and compares the descriptor of every peer it waits
// for; a difference aborts the arena with a cause naming it, and every
// rank returns an [*Error] wrapping [ErrMismatch] and [ErrAborted]: no
// corruption, no hang. A rank whose part of a rooted call is done returns
// without waiting for the others (the bcast root, the reduce non-roots,
// early.go); it gets the call's error from its next call on the
// communicator, or its Close. A peer's death, a cancelled context on any rank or
// a panic in a user operator aborts the communicator the same way.
//
// Calls allocate nothing in steady state. [Comm.Stats] returns per-call
// counts of rounds and blocks sent, received and reduced.
package collectives
