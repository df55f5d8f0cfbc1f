//go:build mpi

package hier_test

import (
	"context"
	"fmt"
	"log"

	"github.com/shmcoll/shmcoll/collectives"
	"github.com/shmcoll/shmcoll/collectives/hier"
	"github.com/shmcoll/shmcoll/internal/mpi"
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
