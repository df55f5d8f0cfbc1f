package collectives_test

import (
	"context"
	"fmt"

	"github.com/shmcoll/shmcoll/collectives"
)

// Backpropagation yields the gradients bucket by bucket, last layer
// first. Each bucket's allreduce starts as soon as the bucket is computed
// and runs on the communicator's progress goroutine while the next bucket
// is computed; the buckets are not touched again until their requests
// complete. Avg averages the gradients over the ranks.
func ExampleIAllreduce() {
	const buckets, n = 4, 1000
	ctx := context.Background()
	err := collectives.Run(4, collectives.Options{}, func(c *collectives.Comm) error {
		grads := make([][]float32, buckets)
		reqs := make([]*collectives.Request, buckets)
		for b := range buckets {
			grads[b] = make([]float32, n)
			for i := range grads[b] { // the computation the allreduces overlap
				grads[b][i] = float32(c.Rank()+1) * float32(b+1)
			}
			reqs[b] = collectives.IAllreduce(ctx, c, nil, grads[b], collectives.Avg)
		}
		for _, r := range reqs {
			if err := r.Wait(); err != nil {
				return err
			}
		}
		if c.Rank() == 0 {
			for b := range buckets {
				fmt.Println("bucket", b, grads[b][0], grads[b][n-1])
			}
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// bucket 0 2.5 2.5
	// bucket 1 5 5
	// bucket 2 7.5 7.5
	// bucket 3 10 10
}
