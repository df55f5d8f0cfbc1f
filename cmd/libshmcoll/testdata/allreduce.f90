! allreduce.f90: MPI_ALLREDUCE from Fortran (use mpi) on INTEGER, REAL and
! DOUBLE PRECISION, exact results; prints "No Errors" on rank 0.
program allreduce
  use mpi
  implicit none
  integer :: ierr, rank, nprocs, i, errs, allerrs
  integer :: iv(100), ir(100)
  real :: rv(100), rr(100)
  double precision :: dv(1000), dr(1000)
  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, nprocs, ierr)
  errs = 0
  do i = 1, 100
    iv(i) = rank + i
    rv(i) = real(rank * i)
  end do
  do i = 1, 1000
    dv(i) = dble(rank) + dble(i) / 4d0
  end do
  call MPI_ALLREDUCE(iv, ir, 100, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  call MPI_ALLREDUCE(rv, rr, 100, MPI_REAL, MPI_MAX, MPI_COMM_WORLD, ierr)
  call MPI_ALLREDUCE(dv, dr, 1000, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  do i = 1, 100
    if (ir(i) /= nprocs * (nprocs - 1) / 2 + nprocs * i) errs = errs + 1
    if (rr(i) /= real((nprocs - 1) * i)) errs = errs + 1
  end do
  do i = 1, 1000
    if (dr(i) /= dble(nprocs * (nprocs - 1) / 2) + dble(nprocs) * dble(i) / 4d0) errs = errs + 1
  end do
  call MPI_ALLREDUCE(errs, allerrs, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0 .and. allerrs == 0) print '(a)', 'No Errors'
  call MPI_FINALIZE(ierr)
end program allreduce
