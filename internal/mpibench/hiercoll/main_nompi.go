//go:build !mpi

// Command hiercoll needs the build tag mpi (see main.go); built without it,
// it only says so.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "hiercoll: built without MPI: build with -tags mpi (Open MPI) or -tags mpi,mpich (MPICH)")
	os.Exit(2)
}
