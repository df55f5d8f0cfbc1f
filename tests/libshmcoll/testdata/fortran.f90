! Fortran collectives through `use mpi`, checked exactly: MPI_ALLREDUCE
! (in place too) on INTEGER, INTEGER*8, REAL, DOUBLE PRECISION and LOGICAL,
! MPI_REDUCE to a root other than 0, MPI_BCAST, MPI_ALLGATHER and
! MPI_REDUCE_SCATTER_BLOCK, a few elements and tens of thousands.
! Rank 0 prints " No Errors"; a rank that found an error stops with 1.
program fortran_colls
  use mpi
  implicit none
  integer, parameter :: nbig = 40000
  integer :: rank, nprocs, ierr, errs, total, q, k, n, root, e
  integer :: counts(2)
  integer, allocatable :: ia(:), ib(:), ig(:)
  integer(kind=8), allocatable :: la(:), lb(:)
  real, allocatable :: ra(:), rb(:)
  double precision, allocatable :: da(:), db(:)
  logical, allocatable :: ta(:), tb(:)
  integer :: status(MPI_STATUS_SIZE)

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, nprocs, ierr)
  errs = 0
  counts = (/ 5, nbig /)

  do k = 1, 2
    n = counts(k)
    allocate(ia(n), ib(n), la(n), lb(n), ra(n), rb(n), da(n), db(n), ta(n), tb(n))
    allocate(ig(n * nprocs))

    ! INTEGER sum: sum over ranks of (rank + i)
    ia = (/ (rank + q, q = 1, n) /)
    call MPI_ALLREDUCE(ia, ib, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    do q = 1, n
      if (ib(q) /= nprocs * q + nprocs * (nprocs - 1) / 2) then
        call fail('MPI_ALLREDUCE(MPI_INTEGER, MPI_SUM)', q)
        exit
      end if
    end do

    ! The same in place, with MPI_MAX
    ib = (/ (rank * 3 - q, q = 1, n) /)
    call MPI_ALLREDUCE(MPI_IN_PLACE, ib, n, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, ierr)
    do q = 1, n
      if (ib(q) /= (nprocs - 1) * 3 - q) then
        call fail('MPI_ALLREDUCE(MPI_IN_PLACE, MPI_INTEGER, MPI_MAX)', q)
        exit
      end if
    end do

    ! INTEGER*8 sum of values above 2**32
    la = (/ (int(rank, 8) * 4294967296_8 + q, q = 1, n) /)
    call MPI_ALLREDUCE(la, lb, n, MPI_INTEGER8, MPI_SUM, MPI_COMM_WORLD, ierr)
    do q = 1, n
      if (lb(q) /= int(nprocs * (nprocs - 1) / 2, 8) * 4294967296_8 + int(nprocs, 8) * q) then
        call fail('MPI_ALLREDUCE(MPI_INTEGER8, MPI_SUM)', q)
        exit
      end if
    end do

    ! REAL product of 1 and 2 (exact), DOUBLE PRECISION min
    ra = (/ (real(1 + mod(rank + q, 2)), q = 1, n) /)
    call MPI_ALLREDUCE(ra, rb, n, MPI_REAL, MPI_PROD, MPI_COMM_WORLD, ierr)
    do q = 1, n
      e = 0
      do root = 0, nprocs - 1
        e = e + mod(root + q, 2)
      end do
      if (rb(q) /= 2.0 ** e) then
        call fail('MPI_ALLREDUCE(MPI_REAL, MPI_PROD)', q)
        exit
      end if
    end do
    da = (/ (dble(mod(rank * 7 + q, 13)) / 4d0, q = 1, n) /)
    call MPI_ALLREDUCE(da, db, n, MPI_DOUBLE_PRECISION, MPI_MIN, MPI_COMM_WORLD, ierr)
    do q = 1, n
      if (db(q) /= minval((/ (dble(mod(e * 7 + q, 13)) / 4d0, e = 0, nprocs - 1) /))) then
        call fail('MPI_ALLREDUCE(MPI_DOUBLE_PRECISION, MPI_MIN)', q)
        exit
      end if
    end do

    ! LOGICAL and: true except on the rank q mod nprocs
    ta = (/ (mod(q, nprocs) /= rank .or. mod(q, 3) == 0, q = 1, n) /)
    call MPI_ALLREDUCE(ta, tb, n, MPI_LOGICAL, MPI_LAND, MPI_COMM_WORLD, ierr)
    do q = 1, n
      if (tb(q) .neqv. (mod(q, 3) == 0)) then
        call fail('MPI_ALLREDUCE(MPI_LOGICAL, MPI_LAND)', q)
        exit
      end if
    end do

    ! MPI_REDUCE of DOUBLE PRECISION sums to the last rank
    root = nprocs - 1
    da = (/ (dble(rank) + dble(q) / 2d0, q = 1, n) /)
    call MPI_REDUCE(da, db, n, MPI_DOUBLE_PRECISION, MPI_SUM, root, MPI_COMM_WORLD, ierr)
    if (rank == root) then
      do q = 1, n
        if (db(q) /= dble(nprocs * (nprocs - 1) / 2) + dble(nprocs) * dble(q) / 2d0) then
          call fail('MPI_REDUCE(MPI_DOUBLE_PRECISION, MPI_SUM, root nprocs-1)', q)
          exit
        end if
      end do
    end if

    ! MPI_BCAST from rank 1 (0 on one rank)
    root = min(1, nprocs - 1)
    if (rank == root) then
      ia = (/ (q * 11 + 5, q = 1, n) /)
    else
      ia = -1
    end if
    call MPI_BCAST(ia, n, MPI_INTEGER, root, MPI_COMM_WORLD, ierr)
    do q = 1, n
      if (ia(q) /= q * 11 + 5) then
        call fail('MPI_BCAST(MPI_INTEGER)', q)
        exit
      end if
    end do

    ! MPI_ALLGATHER of INTEGER blocks
    ia = (/ (rank * 100000 + q, q = 1, n) /)
    call MPI_ALLGATHER(ia, n, MPI_INTEGER, ig, n, MPI_INTEGER, MPI_COMM_WORLD, ierr)
    do e = 0, nprocs - 1
      do q = 1, n
        if (ig(e * n + q) /= e * 100000 + q) then
          call fail('MPI_ALLGATHER(MPI_INTEGER)', e * n + q)
          exit
        end if
      end do
    end do

    ! MPI_REDUCE_SCATTER_BLOCK: rank r gets the sums of block r
    ig = (/ (rank + q, q = 1, n * nprocs) /)
    call MPI_REDUCE_SCATTER_BLOCK(ig, ib, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    do q = 1, n
      if (ib(q) /= nprocs * (rank * n + q) + nprocs * (nprocs - 1) / 2) then
        call fail('MPI_REDUCE_SCATTER_BLOCK(MPI_INTEGER, MPI_SUM)', q)
        exit
      end if
    end do

    deallocate(ia, ib, la, lb, ra, rb, da, db, ta, tb, ig)
  end do

  ! Rank 0 adds up the errors through point-to-point messages.
  if (rank == 0) then
    total = errs
    do q = 1, nprocs - 1
      call MPI_RECV(e, 1, MPI_INTEGER, q, 9, MPI_COMM_WORLD, status, ierr)
      total = total + e
    end do
    if (total == 0) then
      print '(a)', ' No Errors'
    else
      print '(a,i0,a)', ' Found ', total, ' errors'
    end if
  else
    call MPI_SEND(errs, 1, MPI_INTEGER, 0, 9, MPI_COMM_WORLD, ierr)
  end if
  call MPI_FINALIZE(ierr)
  if (errs /= 0) stop 1

contains

  subroutine fail(what, i)
    character(len=*), intent(in) :: what
    integer, intent(in) :: i
    write (0, '(a,i0,a,a,a,i0,a,i0)') 'rank ', rank, ': ', what, ': element ', i, ' wrong, count ', n
    errs = errs + 1
  end subroutine fail

end program fortran_colls
