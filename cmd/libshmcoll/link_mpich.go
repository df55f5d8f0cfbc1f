//go:build mpi && mpich

package main

// #cgo pkg-config: mpich
import "C"
