//go:build mpi && !mpich

package libshmcoll

var impl = mpiImpl{
	name:    "openmpi",
	tags:    "mpi",
	mpicc:   "mpicc.openmpi",
	mpifort: "mpif90.openmpi",
	mpirun:  "mpirun.openmpi",
}
