//go:build mpi && mpich

package mpi

// #cgo pkg-config: mpich
import "C"

const linked = MPICH
