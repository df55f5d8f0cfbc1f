// Package libshmcoll holds the tests of cmd/libshmcoll, the LD_PRELOAD
// library that serves unmodified MPI programs' collectives with shmcoll.
// The tests are built under the mpi build tag (Open MPI) or mpi,mpich
// (MPICH):
//
//	go test -tags mpi ./tests/libshmcoll          # Open MPI
//	go test -tags mpi,mpich ./tests/libshmcoll    # MPICH
//
// They build the library from this module, run MPI programs plain and with
// the library preloaded, and compare:
//
//   - TestMPICHSuite builds MPICH's collective tests (their location in
//     SHMCOLL_MPICH_TESTS) and checks that every test that passes plain
//     passes preloaded, and that shmcoll served calls.
//   - TestPrograms runs testdata/colls.c (every served datatype, operator
//     and collective, MPI_IN_PLACE, user operators, roots) at np = 2 to 5
//     with exact results.
//   - TestFortran, TestMPI4Py, TestProgress, TestKill and TestAbort cover
//     Fortran, mpi4py, MPI progress inside a served call and the end of a
//     job that loses a rank.
//
// SHMCOLL_LIBSHMCOLL=/path/libshmcoll.so tests a library built elsewhere
// instead of building one. Without SHMCOLL_LONG=1, MPICH's list is cut to
// what fits CI (see ciEntries); with it, the whole list runs, and the C
// programs run plain at every np and with the shipped size bands too.
package libshmcoll
