package collectives_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/shmcoll/shmcoll/collectives"
)

// Each example runs its ranks as goroutines with collectives.Run, keeps
// every rank's result in a slice indexed by rank and prints after all
// ranks returned, so that the output does not depend on scheduling.

// Three ranks add their vectors element-wise; every rank gets the sum.
func ExampleAllreduce() {
	got := make([][]float64, 3)
	err := collectives.Run(3, collectives.Options{}, func(c *collectives.Comm) error {
		r := float64(c.Rank())
		send := []float64{r, 10 * r, 0.5}
		got[c.Rank()] = make([]float64, 3)
		return collectives.Allreduce(context.Background(), c, send, got[c.Rank()], collectives.Sum)
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(got)
	// Output: [[3 30 1.5] [3 30 1.5] [3 30 1.5]]
}

// The maximum of three ranks' vectors, cut into blocks of two elements:
// rank r keeps block r.
func ExampleReduceScatterBlock() {
	got := make([][]int32, 3)
	err := collectives.Run(3, collectives.Options{}, func(c *collectives.Comm) error {
		send := make([]int32, 6)
		for i := range send {
			send[i] = int32((i + c.Rank()) % 4) // rank 0: 0 1 2 3 0 1
		}
		got[c.Rank()] = make([]int32, 2)
		return collectives.ReduceScatterBlock(context.Background(), c, send, got[c.Rank()], collectives.Max)
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(got)
	// Output: [[2 3] [3 3] [2 3]]
}

// Blocks of different lengths: rank 0 keeps 1 element of the sum, rank 1
// keeps 3.
func ExampleReduceScatter() {
	counts := []int{1, 3}
	got := make([][]int64, 2)
	err := collectives.Run(2, collectives.Options{}, func(c *collectives.Comm) error {
		send := []int64{1, 2, 3, 4}
		if c.Rank() == 1 {
			send = []int64{10, 20, 30, 40}
		}
		got[c.Rank()] = make([]int64, counts[c.Rank()])
		return collectives.ReduceScatter(context.Background(), c, send, got[c.Rank()], counts, collectives.Sum)
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(got)
	// Output: [[11] [22 33 44]]
}

// Every rank contributes two elements; every rank receives all of them in
// rank order.
func ExampleAllgather() {
	got := make([][]int, 3)
	err := collectives.Run(3, collectives.Options{}, func(c *collectives.Comm) error {
		send := []int16{int16(c.Rank()), int16(100 + c.Rank())}
		recv := make([]int16, 6)
		if err := collectives.Allgather(context.Background(), c, send, recv); err != nil {
			return err
		}
		for _, x := range recv {
			got[c.Rank()] = append(got[c.Rank()], int(x))
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(got[0])
	fmt.Println(got[2])
	// Output:
	// [0 100 1 101 2 102]
	// [0 100 1 101 2 102]
}

// Rank r contributes r+1 elements; the counts are the same on every rank,
// and nil displacements pack the blocks in rank order.
func ExampleAllgatherv() {
	counts := []int{1, 2, 3}
	got := make([][]uint8, 3)
	err := collectives.Run(3, collectives.Options{}, func(c *collectives.Comm) error {
		send := make([]uint8, counts[c.Rank()])
		for i := range send {
			send[i] = uint8(10*c.Rank() + i)
		}
		got[c.Rank()] = make([]uint8, 6)
		return collectives.Allgatherv(context.Background(), c, send, got[c.Rank()], counts, nil)
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(got[1])
	// Output: [0 10 11 20 21 22]
}

// Rank 2 broadcasts its buffer; the other ranks' buffers are overwritten.
func ExampleBcast() {
	got := make([][]float32, 4)
	err := collectives.Run(4, collectives.Options{}, func(c *collectives.Comm) error {
		buf := make([]float32, 3)
		if c.Rank() == 2 {
			copy(buf, []float32{1.5, -2, 3e6})
		}
		got[c.Rank()] = buf
		return collectives.Bcast(context.Background(), c, buf, 2)
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(got)
	// Output: [[1.5 -2 3e+06] [1.5 -2 3e+06] [1.5 -2 3e+06] [1.5 -2 3e+06]]
}

// The product of four ranks' values arrives at the root, rank 0; the other
// ranks pass no receive buffer.
func ExampleReduce() {
	var prod []int64
	err := collectives.Run(4, collectives.Options{}, func(c *collectives.Comm) error {
		send := []int64{int64(c.Rank() + 1), 2}
		var recv []int64
		if c.Rank() == 0 {
			recv = make([]int64, 2)
			prod = recv
		}
		return collectives.Reduce(context.Background(), c, send, recv, collectives.Prod, 0)
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(prod)
	// Output: [24 16]
}

// The root, rank 1, deals two elements to each rank, itself included.
func ExampleScatter() {
	got := make([][]string, 3)
	names := []string{"a", "b", "c", "d", "e", "f"}
	err := collectives.Run(3, collectives.Options{}, func(c *collectives.Comm) error {
		var send []uint32
		if c.Rank() == 1 {
			send = []uint32{0, 1, 2, 3, 4, 5}
		}
		recv := make([]uint32, 2)
		if err := collectives.Scatter(context.Background(), c, send, recv, 1); err != nil {
			return err
		}
		for _, i := range recv {
			got[c.Rank()] = append(got[c.Rank()], names[i])
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(got)
	// Output: [[a b] [c d] [e f]]
}

// Every rank sends one element to the root, rank 0, which receives them in
// rank order.
func ExampleGather() {
	var all []float64
	err := collectives.Run(4, collectives.Options{}, func(c *collectives.Comm) error {
		send := []float64{float64(c.Rank() * c.Rank())}
		var recv []float64
		if c.Rank() == 0 {
			recv = make([]float64, 4)
			all = recv
		}
		return collectives.Gather(context.Background(), c, send, recv, 0)
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(all)
	// Output: [0 1 4 9]
}

// The inclusive prefix sum: rank r gets the sum over ranks 0..r.
func ExampleScan() {
	got := make([]int32, 5)
	err := collectives.Run(5, collectives.Options{}, func(c *collectives.Comm) error {
		send := []int32{int32(c.Rank() + 1)}
		recv := make([]int32, 1)
		if err := collectives.Scan(context.Background(), c, send, recv, collectives.Sum); err != nil {
			return err
		}
		got[c.Rank()] = recv[0]
		return nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(got)
	// Output: [1 3 6 10 15]
}

// The exclusive prefix sum: rank r gets the sum over ranks 0..r-1. Rank
// 0's result is undefined, as in MPI, so it is not printed.
func ExampleExscan() {
	got := make([]int32, 5)
	err := collectives.Run(5, collectives.Options{}, func(c *collectives.Comm) error {
		send := []int32{int32(c.Rank() + 1)}
		recv := make([]int32, 1)
		if err := collectives.Exscan(context.Background(), c, send, recv, collectives.Sum); err != nil {
			return err
		}
		got[c.Rank()] = recv[0]
		return nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(got[1:])
	// Output: [1 3 6 10]
}

// No rank leaves the barrier before every rank has entered it: each rank
// writes its own entry before, and reads all entries after.
func ExampleBarrier() {
	entered := make([]bool, 4)
	seen := make([]int, 4)
	err := collectives.Run(4, collectives.Options{}, func(c *collectives.Comm) error {
		entered[c.Rank()] = true
		if err := collectives.Barrier(context.Background(), c); err != nil {
			return err
		}
		for _, e := range entered {
			if e {
				seen[c.Rank()]++
			}
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(seen)
	// Output: [4 4 4 4]
}

// Rank r sends element j of its vector to rank j, which stores it at
// position r: a transpose of the 3x3 matrix whose row r rank r holds.
func ExampleAlltoall() {
	got := make([][]int64, 3)
	err := collectives.Run(3, collectives.Options{}, func(c *collectives.Comm) error {
		r := int64(c.Rank())
		send := []int64{10*r + 0, 10*r + 1, 10*r + 2}
		got[c.Rank()] = make([]int64, 3)
		return collectives.Alltoall(context.Background(), c, send, got[c.Rank()])
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(got)
	// Output: [[0 10 20] [1 11 21] [2 12 22]]
}

// Rank r sends r+1 copies of its rank number to each other rank (and to
// itself); counts and displacements may differ on every rank, but what
// rank r sends to rank j is what rank j expects from r.
func ExampleAlltoallv() {
	const p = 3
	got := make([][]int32, p)
	err := collectives.Run(p, collectives.Options{}, func(c *collectives.Comm) error {
		r := c.Rank()
		scounts := make([]int, p)
		rcounts := make([]int, p)
		for j := range p {
			scounts[j] = r + 1 // to every rank
			rcounts[j] = j + 1 // from rank j
		}
		send := make([]int32, p*(r+1))
		for i := range send {
			send[i] = int32(r)
		}
		got[r] = make([]int32, 1+2+3)
		return collectives.Alltoallv(context.Background(), c, send, scounts, nil, got[r], rcounts, nil)
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(got[0])
	fmt.Println(got[2])
	// Output:
	// [0 1 1 2 2 2]
	// [0 1 1 2 2 2]
}

// Errors name the rank and the call, and wrap sentinels that errors.Is
// finds. Here the ranks disagree on the length of an allreduce: every rank
// returns an error wrapping ErrMismatch (and ErrAborted, as the
// communicator is now unusable). Then, on a new communicator, rank 1
// closes its communicator and leaves, as a process that died would: the
// ranks waiting for it return ErrPeerDead instead of hanging.
func Example_errors() {
	ctx := context.Background()
	mismatch := make([]error, 3)
	collectives.Run(3, collectives.Options{}, func(c *collectives.Comm) error {
		n := 4
		if c.Rank() == 2 {
			n = 5 // the odd one out
		}
		buf := make([]float64, n)
		mismatch[c.Rank()] = collectives.Allreduce(ctx, c, nil, buf, collectives.Sum)
		return mismatch[c.Rank()]
	})
	for r, err := range mismatch {
		var ce *collectives.Error
		if errors.As(err, &ce) {
			fmt.Printf("rank %d: %s call %d: mismatch %v, aborted %v\n",
				ce.Rank, ce.Coll, ce.Seq, errors.Is(err, collectives.ErrMismatch), errors.Is(err, collectives.ErrAborted))
		} else {
			fmt.Printf("rank %d: %v\n", r, err)
		}
	}

	dead := make([]error, 3)
	collectives.Run(3, collectives.Options{}, func(c *collectives.Comm) error {
		if c.Rank() == 1 {
			return c.Close() // gone before the call the others make
		}
		dead[c.Rank()] = collectives.Barrier(ctx, c)
		return dead[c.Rank()]
	})
	for _, r := range []int{0, 2} {
		fmt.Printf("rank %d: peer dead %v\n", r, errors.Is(dead[r], collectives.ErrPeerDead))
	}
	// Output:
	// rank 0: allreduce call 1: mismatch true, aborted true
	// rank 1: allreduce call 1: mismatch true, aborted true
	// rank 2: allreduce call 1: mismatch true, aborted true
	// rank 0: peer dead true
	// rank 2: peer dead true
}
