//go:build mpi && !mpich

package mpi

// #cgo pkg-config: ompi-c
import "C"

const linked = OpenMPI
