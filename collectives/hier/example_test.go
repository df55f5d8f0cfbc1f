//go:build mpi

package hier_test

import (
	"context"
	"fmt"
	"log"

	"github.com/shmcoll/shmcoll/collectives"
	"github.com/shmcoll/shmcoll/collectives/hier"
	"github.com/shmcoll/shmcoll/mpi"
)

// A program started by mpirun: shared memory inside each node, MPI between
// nodes. SHMCOLL_NODE_SIZE=2 in the environment makes nodes of 2 ranks on
// one machine.
func ExampleAllreduce() {
	if err := mpi.Init(mpi.Options{}); err != nil {
		log.Fatal(err)
	}
	defer mpi.Finalize()
	ctx := context.Background()
	c, err := hier.New(ctx, mpi.World(), hier.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	v := make([]float32, 1<<20)
	for i := range v {
		v[i] = float32(c.Rank())
	}
	if err := hier.Allreduce(ctx, c, nil, v, collectives.Sum); err != nil {
		log.Fatal(err)
	}
	node, nodes, local := c.Node()
	fmt.Printf("rank %d (node %d of %d, local rank %d): v[0] = %v\n", c.Rank(), node, nodes, local, v[0])
}

// A user operator and irregular counts: rank q receives counts[q] elements
// of the element-wise product over all ranks, combined in rank order (a
// non-commutative operator, made with commutative false, gets the same
// order when nodes are ranges of consecutive ranks).
func ExampleReduceScatter() {
	if err := mpi.Init(mpi.Options{}); err != nil {
		log.Fatal(err)
	}
	defer mpi.Finalize()
	ctx := context.Background()
	c, err := hier.New(ctx, mpi.World(), hier.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	mul := collectives.NewOp("cmul", func(dst, src []complex128) {
		for i := range dst {
			dst[i] *= src[i]
		}
	}, true)
	counts := make([]int, c.Size())
	total := 0
	for q := range counts {
		counts[q] = q + 1
		total += counts[q]
	}
	send := make([]complex128, total)
	for i := range send {
		send[i] = complex(1, float64(c.Rank()))
	}
	recv := make([]complex128, counts[c.Rank()])
	if err := hier.ReduceScatter(ctx, c, send, recv, counts, mul); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("rank %d: %d elements, the first %v\n", c.Rank(), len(recv), recv[0])
}
