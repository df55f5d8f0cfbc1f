package mpibench_test

import (
	"context"
	"fmt"
	"time"

	"github.com/shmcoll/shmcoll/internal/mpibench"
)

// Say what is missing, then time MPI_Allreduce with every installed MPI.
func ExampleRun() {
	ctx := context.Background()
	for _, in := range mpibench.Find() {
		if err := in.Err(); err != nil {
			fmt.Println(err) // e.g. "mpi: mpich is not usable: missing mpicc.mpich (Debian package libmpich-dev), ..."
			continue
		}
		rep, err := mpibench.Run(ctx, in.Impl, mpibench.Options{
			NP:    2,
			Colls: []string{"allreduce"},
			Sizes: []int64{8, 1 << 20},
			Time:  100 * time.Millisecond,
		})
		if err != nil {
			fmt.Println(err)
			continue
		}
		for _, r := range rep.Results {
			fmt.Printf("%s %s %d B: median %.2f us, span %.2f us, %s\n", rep.Header.Impl, r.Coll, r.Bytes, r.MedianUS, r.SpanUS, r.Check)
		}
	}
}
