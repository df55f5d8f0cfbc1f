package collectives

import (
	"errors"
	"fmt"
	"math"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/shmcoll/shmcoll/shm"
)

// The first and last operators: associative and not commutative, so a
// result other than rank 0's (rank p-1's) element shows a reduction out
// of rank order.
var (
	opFirst = NewOp("first", func(dst, src []int32) {}, false)
	opLast  = NewOp("last", func(dst, src []int32) { copy(dst, src) }, false)
)

// singleReduceCalls runs allreduce, reduce (to the first and the last
// rank), reduce-scatter block and reduce-scatter (irregular counts, one of them 0 for p > 2) on c with
// vectors of n elements per rank, out of place and in place, with exact
// integer sums, the non-commutative first and last, and float64 sums whose
// bits every rank compares with every other's; want is the algorithm
// each must take (Auto: not checked).
func singleReduceCalls(c *Comm, n int, want Algorithm) error {
	p, r := c.Size(), c.Rank()
	took := func(what string) error {
		if want != Auto && c.LastAlgorithm() != want {
			return fmt.Errorf("rank %d: %s took %v, want %v", r, what, c.LastAlgorithm(), want)
		}
		return nil
	}
	in := func(q, i int) int32 { return int32((q*7919 + i*31) % 100003) }
	check := func(what string, got []int32, off int) error {
		for i, v := range got {
			w := int32(0)
			for q := range p {
				w += in(q, off+i)
			}
			if v != w {
				return fmt.Errorf("rank %d: %s n=%d: element %d = %d, want %d", r, what, n, off+i, v, w)
			}
		}
		return took(what)
	}
	fill := func(b []int32) []int32 {
		for i := range b {
			b[i] = in(r, i)
		}
		return b
	}
	for _, inPlace := range []bool{false, true} {
		recv := make([]int32, n)
		var send []int32
		if inPlace {
			fill(recv)
		} else {
			send = fill(make([]int32, n))
		}
		if err := Allreduce(bg, c, send, recv, Sum); err != nil {
			return err
		}
		if err := check(fmt.Sprintf("allreduce in place=%v", inPlace), recv, 0); err != nil {
			return err
		}

		// Block: n/p per rank (at least 1).
		b := max(n/p, 1)
		all := fill(make([]int32, b*p))
		out := make([]int32, b)
		if inPlace {
			err := ReduceScatterBlock(bg, c, nil, all, Sum)
			out = all[r*b : (r+1)*b]
			if err != nil {
				return err
			}
		} else if err := ReduceScatterBlock(bg, c, all, out, Sum); err != nil {
			return err
		}
		if err := check(fmt.Sprintf("reduce_scatter_block in place=%v", inPlace), out, r*b); err != nil {
			return err
		}

		counts := make([]int, p)
		total, off := 0, 0
		for j := range p {
			counts[j] = b + j%3 - 1
			if p > 2 && j == 1 || counts[j] < 0 {
				counts[j] = 0
			}
			if j < r {
				off += counts[j]
			}
			total += counts[j]
		}
		v := fill(make([]int32, total))
		vout := make([]int32, counts[r])
		if inPlace {
			err := ReduceScatter(bg, c, nil, v, counts, Sum)
			vout = v[off : off+counts[r]]
			if err != nil {
				return err
			}
		} else if err := ReduceScatter(bg, c, v, vout, counts, Sum); err != nil {
			return err
		}
		if err := check(fmt.Sprintf("reduce_scatter in place=%v", inPlace), vout, off); err != nil {
			return err
		}

		// Reduce to the first and the last rank; in place at the root.
		for _, root := range []int{0, p - 1} {
			var send, recv []int32
			if r == root {
				recv = make([]int32, n)
			}
			if inPlace && r == root {
				fill(recv)
			} else {
				send = fill(make([]int32, n))
			}
			if err := Reduce(bg, c, send, recv, Sum, root); err != nil {
				return err
			}
			if r == root {
				if err := check(fmt.Sprintf("reduce to %d in place=%v", root, inPlace), recv, 0); err != nil {
					return err
				}
			} else if err := took(fmt.Sprintf("reduce to %d", root)); err != nil {
				return err
			}
		}
	}

	// Rank order with operators that do not commute.
	for k, op := range []Op{opFirst, opLast} {
		want := []int{0, p - 1}[k]
		recv := make([]int32, n)
		if err := Allreduce(bg, c, fill(make([]int32, n)), recv, op); err != nil {
			return err
		}
		for i, v := range recv {
			if v != in(want, i) {
				return fmt.Errorf("rank %d: allreduce %v n=%d: element %d = %d, want rank %d's %d", r, op, n, i, v, want, in(want, i))
			}
		}
		if err := took(fmt.Sprintf("allreduce %v", op)); err != nil {
			return err
		}
		root := p - 1 - k
		var red []int32
		if r == root {
			red = make([]int32, n)
		}
		if err := Reduce(bg, c, fill(make([]int32, n)), red, op, root); err != nil {
			return err
		}
		for i, v := range red {
			if v != in(want, i) {
				return fmt.Errorf("rank %d: reduce %v to %d n=%d: element %d = %d, want rank %d's %d", r, op, root, n, i, v, want, in(want, i))
			}
		}
		if err := took(fmt.Sprintf("reduce %v", op)); err != nil {
			return err
		}
	}

	// Floating point: every rank holds the same bits.
	x := make([]float64, n)
	for i := range x {
		x[i] = math.Sqrt(float64(r*n+i+1)) / 3
	}
	y := make([]float64, n)
	if err := Allreduce(bg, c, x, y, Sum); err != nil {
		return err
	}
	if err := took("allreduce float64"); err != nil {
		return err
	}
	z := make([]float64, n)
	if err := Reduce(bg, c, x, z, Sum, 0); err != nil {
		return err
	}
	if r == 0 {
		for i := range z {
			if math.Float64bits(z[i]) != math.Float64bits(y[i]) {
				return fmt.Errorf("rank 0: float64 reduce n=%d: element %d is %v, the allreduce's %v", n, i, z[i], y[i])
			}
		}
	}
	bits := make([]uint64, n)
	for i, v := range y {
		bits[i] = math.Float64bits(v)
	}
	lo, hi := make([]uint64, n), make([]uint64, n)
	if err := Allreduce(bg, c, bits, lo, Min); err != nil {
		return err
	}
	if err := Allreduce(bg, c, bits, hi, Max); err != nil {
		return err
	}
	for i := range bits {
		if lo[i] != hi[i] {
			return fmt.Errorf("rank %d: float64 allreduce n=%d: element %d differs between ranks (%#x..%#x)", r, n, i, lo[i], hi[i])
		}
	}
	return nil
}

// singleReduceSizes are the vectors (elements of 4 bytes) of the tests:
// shorter than p, odd, several pieces (of the direct pieces at p = 2
// too).
func singleReduceSizes() []int { return []int{1, 3, 1001, 64<<10 + 3, 300<<10 + 5} }

// TestSingleReduceInProcess: goroutine ranks, Single pinned, with slots
// that hold a few pieces and with the default slots.
func TestSingleReduceInProcess(t *testing.T) {
	for p := 2; p <= 5; p++ {
		for _, n := range singleReduceSizes() {
			t.Run(fmt.Sprintf("p=%d/n=%d", p, n), func(t *testing.T) {
				for _, slot := range []int{4 << 10, 0} {
					o := singleOptions(true, false)
					o.SlotBytes = slot
					if err := Run(p, o, func(c *Comm) error { return singleReduceCalls(c, n, Single) }); err != nil {
						t.Fatalf("slot %d: %v", slot, err)
					}
				}
			})
		}
	}
}

// TestSingleReduceProcesses runs singleReduceCalls among processes,
// Single pinned.
func TestSingleReduceProcesses(t *testing.T) {
	if os.Getenv(shm.EnvArena) != "" {
		t.Skip("in a child")
	}
	for p := 2; p <= 5; p++ {
		t.Run(fmt.Sprintf("p=%d", p), func(t *testing.T) {
			runRanks(t, "TestSingleReduceChild", p, func(int) []string { return []string{"SHMCOLL_TEST_SINGLE_REDUCE=pin"} })
		})
	}
}

// TestSingleReduceChild is one rank of TestSingleReduceProcesses and
// TestSingleReducePeerDeath.
func TestSingleReduceChild(t *testing.T) {
	mode := os.Getenv("SHMCOLL_TEST_SINGLE_REDUCE")
	if os.Getenv(shm.EnvArena) == "" || mode == "" {
		t.Skip("run by TestSingleReduceProcesses")
	}
	c, err := JoinEnv(bg, singleOptions(true, false))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.CrossMemory(); err != nil {
		t.Fatal(err)
	}
	if mode == "kill" {
		singleReduceDie(t, c)
		return
	}
	for _, n := range singleReduceSizes() {
		if err := singleReduceCalls(c, n, Single); err != nil {
			t.Fatal(err)
		}
	}
}

// singleReduceDie: the last rank kills itself while the ranks run Single
// allreduces of 16 MiB, which spend nearly all their time reading the
// peers' inputs and writing their recvs; every other rank's call fails
// with ErrPeerDead.
func singleReduceDie(t *testing.T, c *Comm) {
	n := 4 << 20
	send, recv := make([]int32, n), make([]int32, n)
	if err := Barrier(bg, c); err != nil {
		t.Fatal(err)
	}
	if c.Rank() == c.Size()-1 {
		time.AfterFunc(30*time.Millisecond, func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) })
	}
	// Allreduces and reduces to rank 0 alternate until the peer dies.
	var err error
	for i := 0; err == nil; i++ {
		if i%2 == 0 {
			err = Allreduce(bg, c, send, recv, Sum)
		} else {
			err = Reduce(bg, c, send, recv, Sum, 0)
		}
	}
	if !errors.Is(err, ErrPeerDead) {
		t.Errorf("rank %d: an allreduce or reduce with a dead peer: %v, want ErrPeerDead", c.Rank(), err)
	}
	t.Logf("rank %d: %v", c.Rank(), err)
}

// TestSingleReducePeerDeath: a rank killed in a Single allreduce fails
// the others' calls without a hang, and nothing is left in /dev/shm.
func TestSingleReducePeerDeath(t *testing.T) {
	if os.Getenv(shm.EnvArena) != "" {
		t.Skip("in a child")
	}
	runRanksKilled(t, "TestSingleReduceChild", 3, 2, func(int) []string { return []string{"SHMCOLL_TEST_SINGLE_REDUCE=kill"} })
}
