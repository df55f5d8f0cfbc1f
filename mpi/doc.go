// Package mpi is a thin cgo binding of the MPI calls shmcoll's inter-node stage
// needs, plus the launcher knowledge (which MPIs are installed, how to start
// ranks with them) that tests and shmbench share.
//
// # Build tags
//
// The binding is compiled only with the build tag mpi, so default builds need
// neither an MPI library nor cgo:
//
//	go build -tags mpi ./...        // Open MPI  (pkg-config module ompi-c)
//	go build -tags mpi,mpich ./...  // MPICH     (pkg-config module mpich)
//
// The choice is explicit rather than automatic: the two libraries are not ABI
// compatible, and a binary must be launched by the matching mpirun
// ([Installation.Command]). [Linked] names the library a binary was built
// against. Without the mpi tag only the launcher part ([Find], [Installation],
// [Datatype], [Op]) exists.
//
// # Handles
//
// MPI handles, constants, MPI_IN_PLACE, datatypes and operators stay on the C
// side: Open MPI's handles are pointers and MPICH's are integers, so the Go
// side holds a communicator as an opaque integer ([Comm]) and names datatypes
// and operators with its own enums ([Datatype], [Op]), which small static C
// helpers translate. bfloat16 and float16 have no MPI datatype; callers move
// them as bytes and reduce them with their own kernels.
//
// # Threads
//
// Goroutines move between OS threads, so [Init] runs MPI_Init_thread on a
// goroutine locked to its OS thread and asks for MPI_THREAD_MULTIPLE. When the
// library grants it, every call goes straight to MPI from whatever thread the
// caller runs on. Otherwise (or when forced with [Options].Funnel or
// SHMCOLL_MPI_FUNNEL=1) every MPI call is funnelled through that one locked
// goroutine, which makes the binding correct at MPI_THREAD_FUNNELED. In the
// funnelled mode calls are serialized: collectives issued concurrently on
// different communicators must be issued in the same order on every rank, as
// MPI_THREAD_SERIALIZED requires. [Finalize] always runs on the initializing
// thread.
//
// # Attach mode
//
// A library loaded into an MPI program that has initialized MPI itself
// (libshmcoll, an LD_PRELOAD interposer) calls [Attach] instead of [Init]:
// the package then calls the profiling names PMPI_*, so its calls are not
// intercepted again by the library's own MPI_* definitions; makes every
// call on the calling thread; and leaves the error handlers of the host's
// communicators as they are (only the communicators it creates return
// errors). [FromHandle] wraps a host's communicator, [Detach] ends the use.
//
// # Errors
//
// The world communicator's error handler is MPI_ERRORS_RETURN (inherited by
// every communicator derived from it), so MPI failures come back as *[Error]
// values carrying the MPI error class and message. Argument errors found on
// the Go side wrap [ErrArgument].
package mpi
