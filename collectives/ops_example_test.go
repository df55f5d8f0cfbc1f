package collectives_test

import (
	"context"
	"fmt"

	"github.com/shmcoll/shmcoll/collectives"
)

// Rank r contributes r+1 values; the root gathers them packed in rank
// order.
func ExampleGatherv() {
	counts := []int{1, 2, 3}
	err := collectives.Run(3, collectives.Options{}, func(c *collectives.Comm) error {
		send := make([]int, counts[c.Rank()])
		for i := range send {
			send[i] = 10*c.Rank() + i
		}
		var recv []int
		if c.Rank() == 0 {
			recv = make([]int, 6)
		}
		if err := collectives.Gatherv(context.Background(), c, send, recv, counts, nil, 0); err != nil {
			return err
		}
		if c.Rank() == 0 {
			fmt.Println(recv)
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output: [0 10 11 20 21 22]
}

// Weight is a type defined on float32: it runs float32's kernels.
type Weight float32

// Avg averages over the ranks; every rank gets the same bits.
func ExampleAvg() {
	res := make([][]Weight, 4)
	err := collectives.Run(4, collectives.Options{}, func(c *collectives.Comm) error {
		res[c.Rank()] = []Weight{Weight(c.Rank()), 1}
		return collectives.Allreduce(context.Background(), c, nil, res[c.Rank()], collectives.Avg)
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res[0], res[3])
	// Output: [1.5 1] [1.5 1]
}
