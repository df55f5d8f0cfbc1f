//go:build mpi

// Command libshmcoll is a shared library that gives unmodified MPI programs
// shmcoll's collectives: loaded with LD_PRELOAD, its MPI_* entry points
// (entry.c) serve the collectives of communicators whose ranks share a
// node through a shmcoll arena, and hand everything else to the MPI
// through its profiling names (PMPI_*).
//
//	go build -buildmode=c-shared -tags mpi -o libshmcoll.so ./cmd/libshmcoll        # Open MPI
//	go build -buildmode=c-shared -tags mpi,mpich -o libshmcoll.so ./cmd/libshmcoll  # MPICH
//	mpirun -x LD_PRELOAD=$PWD/libshmcoll.so ./app                 # Open MPI
//	mpirun -genv LD_PRELOAD $PWD/libshmcoll.so ./app              # MPICH
//
// docs/LIBSHMCOLL.md describes the design: the rule that decides, the
// same way on every rank, which calls are served; communicators and their
// arenas; MPI progress while a rank waits; the Go runtime inside a C
// process; the environment variables.
package main

func main() {}
