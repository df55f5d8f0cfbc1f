// Package libshmcoll holds the tests of cmd/libshmcoll, the LD_PRELOAD
// library that serves unmodified MPI programs' collectives with shmcoll.
// The tests are built under the mpi build tag (Open MPI) or mpi,mpich
// (MPICH); they build the library from this module, run MPI programs plain
// and with the library preloaded, and compare:
//
//   - TestMPICHSuite builds MPICH's collective tests (their location in
//     SHMCOLL_MPICH_TESTS) and checks that every test that passes plain
//     passes preloaded, and that shmcoll served calls;
//
//   - TestPrograms runs the C programs of testdata (every served datatype,
//     operator and collective, MPI_IN_PLACE, user operators, roots) at
//     np = 2 to 5 with exact results;
//
//   - TestFortran, TestMPI4Py, TestProgress, TestKill and TestAbort cover
//     Fortran, mpi4py, MPI progress inside a served call and the ends of a
//     job that loses a rank.
//
//     go test -tags mpi ./tests/libshmcoll          # Open MPI
//     go test -tags mpi,mpich ./tests/libshmcoll    # MPICH
//
// SHMCOLL_LIBSHMCOLL=/path/libshmcoll.so tests a library built elsewhere
// instead of building one; SHMCOLL_LONG=1 runs MPICH's whole test list.
package libshmcoll
