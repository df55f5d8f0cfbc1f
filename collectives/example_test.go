package collectives_test

import (
	"context"
	"fmt"
	"os"

	"github.com/shmcoll/shmcoll/collectives"
)

// Four goroutine ranks sum their vectors.
func ExampleRun() {
	res := make([][]int64, 4)
	err := collectives.Run(4, collectives.Options{}, func(c *collectives.Comm) error {
		send := []int64{int64(c.Rank()), 10}
		res[c.Rank()] = make([]int64, 2)
		return collectives.Allreduce(context.Background(), c, send, res[c.Rank()], collectives.Sum)
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res[0], res[3])
	// Output: [6 40] [6 40]
}

// Buffers from Alloc live in the arena: from 1 MiB up, an allreduce of
// them reads the other ranks' buffers in place, with no copy into the
// arena (the direct algorithm).
func ExampleAlloc() {
	const n = 1 << 17 // 1 MiB of float64
	opt := collectives.Options{HeapBytes: 2 * 8 * n}
	err := collectives.Run(2, opt, func(c *collectives.Comm) error {
		send, err := collectives.Alloc[float64](c, n)
		if err != nil {
			return err
		}
		defer collectives.Free(c, send)
		recv, err := collectives.Alloc[float64](c, n)
		if err != nil {
			return err
		}
		defer collectives.Free(c, recv)
		for i := range send {
			send[i] = float64(c.Rank() + 1) // the program computes its data in place
		}
		if err := collectives.Allreduce(context.Background(), c, send, recv, collectives.Sum); err != nil {
			return err
		}
		if c.Rank() == 0 {
			fmt.Println(recv[0], recv[n-1], c.LastAlgorithm())
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output: 3 3 direct
}

// A user-defined operator, and a reduction to rank 2.
func ExampleNewOp() {
	absMax := collectives.NewOp("absmax", func(dst, src []float64) {
		for i, x := range src {
			if max(x, -x) > max(dst[i], -dst[i]) {
				dst[i] = x
			}
		}
	}, true)
	err := collectives.Run(3, collectives.Options{}, func(c *collectives.Comm) error {
		send := []float64{float64(c.Rank()) - 1.5}
		var recv []float64
		if c.Rank() == 2 {
			recv = make([]float64, 1)
		}
		if err := collectives.Reduce(context.Background(), c, send, recv, absMax, 2); err != nil {
			return err
		}
		if recv != nil {
			fmt.Println(recv[0])
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output: -1.5
}

// In a process started by shmrun (or mpirun), join the node's arena from the
// environment and take part in a broadcast from rank 0.
func ExampleJoinEnv() {
	c, err := collectives.JoinEnv(context.Background(), collectives.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "not started by shmrun:", err)
		return
	}
	defer c.Close()
	buf := make([]float32, 1024)
	if c.Rank() == 0 {
		for i := range buf {
			buf[i] = float32(i)
		}
	}
	if err := collectives.Bcast(context.Background(), c, buf, 0); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}

// Split a communicator by parity; each half sums among itself.
func ExampleComm_Split() {
	sums := make([]int32, 6)
	err := collectives.Run(6, collectives.Options{}, func(c *collectives.Comm) error {
		half, err := c.Split(context.Background(), c.Rank()%2, c.Rank())
		if err != nil {
			return err
		}
		defer half.Close()
		v := []int32{int32(c.Rank())}
		if err := collectives.Allreduce(context.Background(), half, nil, v, collectives.Sum); err != nil {
			return err
		}
		sums[c.Rank()] = v[0]
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	fmt.Println(sums)
	// Output: [6 9 6 9 6 9]
}
