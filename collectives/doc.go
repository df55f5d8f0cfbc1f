// Package collectives runs MPI-style collective operations among the ranks
// of one node — processes or goroutines — through one shared-memory arena
// per communicator (package shm). docs/DESIGN.md describes the design.
//
// # Communicators
//
// A [Comm] is one rank's handle. Get all ranks of an in-process
// communicator with [NewLocal] (or run a function on each with [Run]); in
// a process, join with [JoinEnv] (the environment shmrun or mpirun sets) or
// [Join] (explicit name, rank and size). [Comm.Split] and [Comm.Dup] make new
// communicators with arenas of their own; any number may be in use at once.
// Every rank must make the same collective calls on a communicator in the
// same order, as in MPI; one Comm is used by one goroutine at a time.
// [Comm.Close] releases the rank's share of the arena.
//
// # Calls
//
// The collectives are generic functions over the element types of
// [simd.Element]: [Allreduce], [ReduceScatterBlock], [ReduceScatter],
// [Allgather], [Allgatherv], [Bcast], [Reduce], [Scatter], [Gather], [Scan],
// [Exscan], [Barrier], [Alltoall], [Alltoallv], [Gatherv], [Scatterv]. A
// nil send buffer means in place (the documentation of each function says
// where the input and the result are). Reductions take an [Op]: a built-in
// operator ([Sum] ... [MaxLoc]), the average [Avg] of the floating types,
// or a user-defined one made by [NewOp], commutative or not. Every call
// takes a context; cancelling it aborts the communicator.
//
// The element types include int, uint and uintptr, as the sized integer of
// their size, and any type defined on a numeric type (type Weight
// float32), which runs the kernels of its kind and size and matches them
// in the call descriptors ([simd.TypeOf]); [simd.BFloat16] and
// [simd.Float16] stay half-precision floats.
//
// # Nonblocking calls
//
// Every collective has a nonblocking form ([IAllreduce], [IBcast], ...,
// [IBarrier], [IGatherv], [IScatterv]) that queues the call and returns a
// [*Request] at once; [Request.Wait] blocks until it completes and returns
// its error, [Request.Test] reports without blocking. The queued calls run
// in program order on the communicator's progress goroutine, each exactly
// as its blocking form runs; a blocking call waits for them first. The
// buffers, counts and displacements of a nonblocking call belong to it
// until Wait or Test reports completion. Overlap gains time only where a
// CPU is free for the progress goroutine (BenchmarkOverlap).
//
// # Algorithms and selection
//
// Each [Algorithm] constant documents its family. Auto selection decides
// per call, from inputs equal on every rank: a pin (Options.Algorithms over
// SHMCOLL_ALGO_<COLL>, e.g. SHMCOLL_ALGO_ALLREDUCE=flat), [Direct] for
// arena buffers, [Single] where cross-memory attach is on
// ([Comm.CrossMemory]), the selection [Table] ([DefaultTable], the file
// SHMCOLL_TUNE_FILE names, or Options.Table), else [HeuristicAlgorithm].
// The choice is part of the call descriptor; [Comm.LastAlgorithm] reports
// it, [Select] and shmbench select explain it.
// docs/TUNING.md describes the table and how it is measured.
//
// # Where things are
//
// Collectives: one generic entry point each in api.go ([Allreduce] ...
// [Alltoallv]), [Gatherv] and [Scatterv] in vector_rooted.go, the
// nonblocking forms in nonblocking.go; communicators in comm.go,
// [Comm.Split] and [Comm.Dup] in split.go, [Alloc] in arena.go, [Op] in
// op.go and [Avg] in avg.go, errors in errors.go, [Stats] in stats.go, the
// names of collectives and algorithms and the registry of implementations
// in names.go.
//
// Algorithms, one file per family, each registering itself in init:
//   - Flat, Replicated: flat.go
//   - Circulant: circulant.go
//   - Nblock: nblock.go
//   - Tree, DualRoot, ReduceBcast: tree.go
//   - Rabenseifner, Rabenseifner21, RecDoubling, RabenseifnerOdd:
//     rabenseifner.go (the pair loop they run at p = 2: pair.go)
//   - Ring: ring.go; MST: mst.go; BDE: bde.go; Bruck: bruck.go
//   - Direct: direct.go; Single: single.go (its allreduce and
//     reduce-scatters: singlereduce.go)
//   - Alltoallv's Flat and Single, one algorithm whose senders choose
//     between the slot and cross-memory attach: alltoallv.go
//
// Machinery: selection in select.go (decide) and table.go ([Table];
// tune/default.txt as shmbench tune wrote it, tune/overrides.txt the
// hand-made entries with their reasons); the step protocol in step.go and
// the early return of rooted calls and its later check (settle) in
// early.go; the small-call path, its lean mode, in small.go; the
// read-schedule engine of Ring, MST, BDE, Bruck and the Rabenseifner
// family in schedule.go; cutting vectors into segments in segment.go; the
// store advice (non-temporal stores by placement) in advice.go.
//
// # Buffers in the arena
//
// With Options.HeapBytes each rank has a heap in the arena, and [Alloc]
// hands out buffers from it ([Free] returns them). Large calls whose
// buffers all come from Alloc on every rank take [Direct]: the ranks read
// each other's buffers in place, bitwise as Flat would. Under shmrun, the
// launcher creates the arena: give it -heap.
//
// # Reduction order and reproducibility
//
// For a fixed p, algorithm, skip sequence and input, results are bitwise the
// same on every rank and in every run, because every element is combined
// by exactly one rank in a fixed order and then copied:
//   - flat, replicated, scan, exscan, the trees and MST reduce: x_0 op ...
//     op x_{p-1} in rank order (bracketed by the tree; the k-way kernel
//     combines up to 8 operands per pass, bfloat16 and float16 rounded
//     once per pass). Correct for non-commutative operators.
//   - circulant reduce-scatter and allreduce: block b is the expression
//     circulant.ReduceScatterExpr(p, b, skips) prints; circulant reduce:
//     own input op child results in the reverse order of the broadcast
//     rounds; nblock: the local partial result on the left, in schedule
//     order. These need a commutative operator.
//
// Pin an algorithm (Options.Algorithms) to keep results fixed when the
// selection table changes. Auto never gives a non-commutative operator an
// algorithm that reorders; a pin that does is [ErrNotCommutative].
//
// # Failures
//
// The ranks compare every call's descriptor (collective, type, operator,
// counts, root, algorithm) in its steps: a difference, a peer's death, a
// cancelled context on any rank or a panic in a user operator aborts the
// communicator, and every rank returns an [*Error] wrapping [ErrAborted]
// (and [ErrMismatch] or [ErrPeerDead] as they apply): no corruption, no
// hang. A rank whose part of a rooted call is done may return early and
// gets the call's error from its next call or its Close (see [Bcast]).
// Calls allocate nothing in steady state; [Comm.Stats] counts their rounds
// and blocks.
package collectives
