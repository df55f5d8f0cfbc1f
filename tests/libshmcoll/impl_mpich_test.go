//go:build mpi && mpich

package libshmcoll

var impl = mpiImpl{
	name:    "mpich",
	tags:    "mpi,mpich",
	mpicc:   "mpicc.mpich",
	mpifort: "mpif90.mpich",
	mpirun:  "mpirun.mpich",
}
