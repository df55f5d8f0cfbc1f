package collectives

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"unsafe"

	"github.com/shmcoll/shmcoll/shm"
	"github.com/shmcoll/shmcoll/simd"
)

// TestHeapAlloc: Alloc hands out zeroed, line-aligned, disjoint buffers of
// the rank's heap, Free returns them and merges free neighbours, and every
// misuse is an error that names it.
func TestHeapAlloc(t *testing.T) {
	page := os.Getpagesize()
	cs, err := NewLocal(2, Options{SlotBytes: 4096, HeapBytes: 16 * page})
	if err != nil {
		t.Fatal(err)
	}
	c := cs[1]
	heap := c.ep.Heap(1)
	var bufs [][]int32
	for i := range 16 {
		b, err := Alloc[int32](c, page/4-i) // the rounding leaves a line or two free per page
		if err != nil {
			t.Fatalf("alloc %d: %v", i, err)
		}
		if uintptr(unsafe.Pointer(&b[0]))%lineBytes != 0 || !c.heapOrEmpty(simd.AsBytes(b)) || len(b) != page/4-i {
			t.Fatalf("alloc %d: %d elements at %p, not a line-aligned buffer of the heap", i, len(b), &b[0])
		}
		for j := range b {
			if b[j] != 0 {
				t.Fatalf("alloc %d: element %d is %d, not zero", i, j, b[j])
			}
			b[j] = int32(i + 1)
		}
		bufs = append(bufs, b)
	}
	for i, b := range bufs {
		for j := range b {
			if b[j] != int32(i+1) {
				t.Fatalf("buffer %d element %d is %d: buffers overlap", i, j, b[j])
			}
		}
	}
	if _, err := Alloc[int32](c, page/4); !errors.Is(err, ErrHeapFull) || !strings.Contains(err.Error(), "largest free span") {
		t.Fatalf("alloc beyond the heap: %v", err)
	}
	if _, err := Alloc[int64](c, len(heap)); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "HeapBytes") {
		t.Fatalf("alloc larger than the heap: %v", err)
	}
	if _, err := Alloc[int64](c, -1); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("alloc of -1: %v", err)
	}
	// Free in an order that leaves holes to merge on both sides.
	for _, i := range []int{3, 5, 4, 0, 15, 1, 2, 14, 6, 8, 7, 10, 12, 11, 9, 13} {
		if err := Free(c, bufs[i]); err != nil {
			t.Fatalf("free %d: %v", i, err)
		}
	}
	if len(c.heap.free) != 1 || c.heap.free[0] != (heapSpan{0, len(heap)}) || len(c.heap.used) != 0 {
		t.Fatalf("after freeing everything: free %v, used %v", c.heap.free, c.heap.used)
	}
	if err := Free(c, bufs[3]); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("double free: %v", err)
	}
	if err := Free(c, make([]int32, 8)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("free of Go memory: %v", err)
	}
	all, err := Alloc[byte](c, len(heap))
	if err != nil {
		t.Fatalf("the whole heap after freeing: %v", err)
	}
	for j := range all {
		if all[j] != 0 {
			t.Fatalf("reused byte %d is %d, not zero", j, all[j])
		}
	}
	if err := Free(c, all[lineBytes:]); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("free inside a buffer: %v", err)
	}
	if err := Free(c, all[:1]); err != nil {
		t.Fatalf("free of a shortened buffer: %v", err)
	}
	if z, err := Alloc[float64](c, 0); err != nil || len(z) != 0 {
		t.Fatalf("alloc of 0: %v", err)
	}
	for _, c := range cs {
		c.Close()
	}
	if _, err := Alloc[int32](c, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("alloc after Close: %v", err)
	}
	none, err := NewLocal(2, Options{SlotBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range none {
			c.Close()
		}
	}()
	if _, err := Alloc[int32](none[0], 1); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "HeapBytes") {
		t.Fatalf("alloc without a heap: %v", err)
	}
}

// directCase is one call of the Direct tests.
type directCase struct {
	coll    Collective
	inPlace bool
	n       int // elements per block (allreduce, bcast: of the vector)
}

func directCases(p int, sizes []int) []directCase {
	var cs []directCase
	for _, coll := range []Collective{CollAllreduce, CollReduceScatterBlock, CollReduceScatter, CollAllgather, CollAllgatherv, CollBcast} {
		for _, n := range sizes {
			for _, ip := range []bool{false, true} {
				if coll == CollBcast && ip {
					continue
				}
				cs = append(cs, directCase{coll, ip, n})
			}
		}
	}
	return cs
}

// runDirect runs case dc on c with buffers from alloc and checks the
// result exactly against the inputs of iteration it; it returns the
// algorithm the call took.
func runDirect[T simd.Element](c *Comm, dc directCase, it int, alloc func(n int) []T, free func([]T)) (Algorithm, error) {
	p, r, n := c.Size(), c.Rank(), dc.n
	in := func(q, i int) T { return input[T](q+it, i, 50) }
	fill := func(b []T, q, from int) {
		for i := range b {
			b[i] = in(q, from+i)
		}
	}
	sum := func(i int) T {
		xs := make([][]T, p)
		for q := range p {
			xs[q] = []T{in(q, i)}
		}
		out, err := reduceRef(Sum, xs)
		if err != nil {
			panic(err)
		}
		return out[0]
	}
	counts := make([]int, p)
	displs := make([]int, p)
	total := 0
	for q := range p {
		counts[q] = n
		if dc.coll == CollReduceScatter || dc.coll == CollAllgatherv {
			counts[q] = n + (q*5+3)%7 - 3*(q%2)
			counts[q] = max(counts[q], 0)
		}
		displs[q] = total
		if dc.coll == CollAllgatherv {
			displs[q] += (r + 1) * (q + 1) // gaps that differ between ranks
		}
		total += counts[q]
	}
	end := displs[p-1] + counts[p-1]
	var err error
	var check func() error
	mismatch := func(what string, i int, got, want T) error {
		return fmt.Errorf("%v n=%d in place=%v iteration %d: %s element %d = %v, want %v", dc.coll, n, dc.inPlace, it, what, i, got, want)
	}
	var send, recv []T
	switch dc.coll {
	case CollAllreduce:
		recv = alloc(n)
		if dc.inPlace {
			fill(recv, r, 0)
		} else {
			send = alloc(n)
			fill(send, r, 0)
		}
		err = Allreduce(bg, c, send, recv, Sum)
		check = func() error {
			for i, x := range recv {
				if w := sum(i); x != w {
					return mismatch("result", i, x, w)
				}
			}
			return nil
		}
	case CollReduceScatterBlock, CollReduceScatter:
		if dc.inPlace {
			recv = alloc(total)
			fill(recv, r, 0)
		} else {
			send, recv = alloc(total), alloc(counts[r])
			fill(send, r, 0)
		}
		if dc.coll == CollReduceScatterBlock {
			err = ReduceScatterBlock(bg, c, send, recv, Sum)
		} else {
			err = ReduceScatter(bg, c, send, recv, counts, Sum)
		}
		check = func() error {
			got := recv
			if dc.inPlace {
				got = recv[displs[r] : displs[r]+counts[r]]
			}
			for i, x := range got {
				if w := sum(displs[r] + i); x != w {
					return mismatch("result", i, x, w)
				}
			}
			return nil
		}
	case CollAllgather, CollAllgatherv:
		recv = alloc(end)
		mine := recv[displs[r] : displs[r]+counts[r]]
		if dc.inPlace {
			fill(mine, r, 0)
		} else {
			send = alloc(counts[r])
			fill(send, r, 0)
		}
		if dc.coll == CollAllgather {
			err = Allgather(bg, c, send, recv)
		} else {
			err = Allgatherv(bg, c, send, recv, counts, displs)
		}
		check = func() error {
			for q := range p {
				for i, x := range recv[displs[q] : displs[q]+counts[q]] {
					if w := in(q, i); x != w {
						return mismatch(fmt.Sprintf("block %d", q), i, x, w)
					}
				}
			}
			return nil
		}
	case CollBcast:
		recv = alloc(n)
		if r == p-1 {
			fill(recv, r, 0)
		}
		err = Bcast(bg, c, recv, p-1)
		check = func() error {
			for i, x := range recv {
				if w := in(p-1, i); x != w {
					return mismatch("result", i, x, w)
				}
			}
			return nil
		}
	}
	alg := c.desc.alg()
	if err == nil {
		err = check()
	}
	// The caller owns its buffers again: scribble over them at once, as
	// the next iteration's data would be written.
	var junk T
	for _, b := range [][]T{send, recv} {
		for i := range b {
			b[i] = junk
		}
		if b != nil {
			free(b)
		}
	}
	return alg, err
}

// directCalls runs every Direct case on c for three iterations (buffers
// rewritten as soon as a call returns, so that a rank that returned while
// a peer still read its buffers breaks a peer's result) and checks which
// algorithm each call took: Direct from directMin bytes up or when pinned,
// for arena buffers; never for Go buffers.
func directCalls[T simd.Element](c *Comm, sizes []int, pinned bool) error {
	esz := simd.TypeOf[T]().Size()
	alloc := func(n int) []T {
		b, err := Alloc[T](c, n)
		if err != nil {
			panic(err)
		}
		return b
	}
	free := func(b []T) {
		if err := Free(c, b); err != nil {
			panic(err)
		}
	}
	goAlloc := func(n int) []T { return make([]T, n) }
	for _, dc := range directCases(c.Size(), sizes) {
		for it := range 3 {
			alg, err := runDirect(c, dc, it, alloc, free)
			if err != nil {
				return err
			}
			bytes := dc.n * esz
			if dc.coll != CollAllreduce && dc.coll != CollBcast {
				bytes *= c.Size() // at least: the blocks of allgatherv and reduce_scatter differ a little
			}
			min := directMin(dc.coll, c.ep.Oversubscribed())
			if want := pinned || bytes >= min+c.Size()*8*esz; want && alg != Direct || bytes < min-c.Size()*8*esz && !pinned && alg == Direct {
				return fmt.Errorf("%v of %d elements took %v", dc.coll, dc.n, alg)
			}
		}
		if pinned {
			continue
		}
		alg, err := runDirect(c, dc, 0, goAlloc, func([]T) {})
		if err != nil {
			return err
		}
		if alg == Direct {
			return fmt.Errorf("%v of %d elements in Go memory took Direct", dc.coll, dc.n)
		}
	}
	return nil
}

// TestDirect: every collective of the Direct algorithm gives exact results
// for 2, 3 and 5 ranks, in place and not, for vectors that fill several
// in-place chunks; Auto takes it for arena buffers from directMin up.
func TestDirect(t *testing.T) {
	for _, p := range []int{2, 3, 5} {
		t.Run(fmt.Sprintf("p=%d", p), func(t *testing.T) {
			// A 4 KiB slot: the in-place reductions run in 2 KiB chunks.
			small := []int{0, 1, 300}
			large := []int{1<<20/8 + 13}
			if testing.Short() {
				large = nil
			}
			err := Run(p, Options{SlotBytes: 4096, HeapBytes: 8 << 20}, func(c *Comm) error {
				if err := directCalls[int64](c, large, false); err != nil {
					return err
				}
				if err := directCalls[int32](c, small, false); err != nil {
					return err
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			err = Run(p, Options{SlotBytes: 4096, HeapBytes: 8 << 20, Algorithms: map[Collective]Algorithm{
				CollAllreduce: Direct, CollReduceScatterBlock: Direct, CollReduceScatter: Direct,
				CollAllgather: Direct, CollAllgatherv: Direct, CollBcast: Direct,
			}}, func(c *Comm) error {
				if err := directCalls[uint8](c, small, true); err != nil {
					return err
				}
				return directCalls[simd.BFloat16](c, small, true)
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestDirectBitwise: Direct reduces each element in rank order with the
// same kernel pass as Flat, so float64 sums are bitwise Flat's on every
// rank, in place or not, and when two ranks each reduce both blocks (as
// they do when they ask for non-temporal stores).
func TestDirectBitwise(t *testing.T) {
	for _, p := range []int{2, 3, 6} {
		n := 64<<10/8*2 + 5
		rng := rand.New(rand.NewPCG(uint64(p), 9))
		in := make([][]float64, p)
		for r := range in {
			in[r] = make([]float64, n)
			for i := range in[r] {
				in[r][i] = rng.NormFloat64() * math.Pow(10, float64(rng.IntN(12)-6))
			}
		}
		res := make([][]float64, p)
		err := Run(p, Options{SlotBytes: 4096, HeapBytes: 4 << 20}, func(c *Comm) error {
			r := c.Rank()
			flat := make([]float64, n)
			setPin(c, CollAllreduce, Flat)
			if err := Allreduce(bg, c, in[r], flat, Sum); err != nil {
				return err
			}
			setPin(c, CollAllreduce, Direct) // below directMin
			for _, ip := range []bool{false, true, false} {
				solo := ip == false && res[r] != nil
				if solo {
					// The ranks ask for non-temporal stores, as on
					// different dies: two ranks not in place each reduce
					// both blocks.
					c.adv.ep.Hint(r).Store(math.MaxUint64)
					defer c.adv.ep.Hint(r).Store(0)
				}
				recv, _ := Alloc[float64](c, n)
				var send []float64
				if ip {
					copy(recv, in[r])
				} else {
					send, _ = Alloc[float64](c, n)
					copy(send, in[r])
				}
				if err := Allreduce(bg, c, send, recv, Sum); err != nil {
					return err
				}
				if c.desc.alg() != Direct {
					return fmt.Errorf("took %v", c.desc.alg())
				}
				want := uint64(p - 1)
				if solo && p == 2 {
					want = 2
				}
				if c.last.Reduced != want {
					return fmt.Errorf("in place %v, asked for non-temporal stores %v: %d blocks reduced, want %d", ip, solo, c.last.Reduced, want)
				}
				for i := range flat {
					if math.Float64bits(recv[i]) != math.Float64bits(flat[i]) {
						return fmt.Errorf("in place %v: element %d = %v, Flat gives %v", ip, i, recv[i], flat[i])
					}
				}
				res[r] = append([]float64(nil), recv...)
				Free(c, recv)
				if send != nil {
					Free(c, send)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("p=%d: %v", p, err)
		}
		for r := range p {
			if i, ok := equal(res[r], res[0]); !ok {
				t.Fatalf("p=%d: rank %d element %d differs from rank 0", p, r, i)
			}
		}
	}
}

// TestDirectMisuse: arena buffers on some ranks only fail the call on
// every rank with ErrMismatch, naming Alloc; Direct pinned for Go buffers
// fails with ErrInvalidArgument.
func TestDirectMisuse(t *testing.T) {
	const n = 1 << 20 / 8 * 2
	errs := make([]error, 3)
	Run(3, Options{HeapBytes: 4 << 20}, func(c *Comm) error {
		recv := make([]float64, n)
		if c.Rank() != 1 {
			recv, _ = Alloc[float64](c, n)
		}
		errs[c.Rank()] = Allreduce(bg, c, nil, recv, Sum)
		return nil
	})
	for r, err := range errs {
		if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "Alloc") {
			t.Errorf("rank %d: %v, want ErrMismatch naming Alloc", r, err)
		}
	}
	Run(3, Options{HeapBytes: 1 << 20, Algorithms: map[Collective]Algorithm{CollAllgather: Direct}}, func(c *Comm) error {
		errs[c.Rank()] = Allgather(bg, c, make([]int32, 10), make([]int32, 30))
		return nil
	})
	for r, err := range errs {
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("pinned: rank %d: %v, want ErrInvalidArgument", r, err)
		}
	}
}

// TestDirectProcesses runs the Direct cases among real processes.
func TestDirectProcesses(t *testing.T) {
	if os.Getenv(shm.EnvArena) != "" {
		t.Skip("in a child")
	}
	for _, p := range []int{2, 3} {
		t.Run(fmt.Sprintf("p=%d", p), func(t *testing.T) {
			runRanks(t, "TestDirectChild", p, func(int) []string { return nil })
		})
	}
}

// TestDirectChild is one rank of TestDirectProcesses.
func TestDirectChild(t *testing.T) {
	if os.Getenv(shm.EnvArena) == "" {
		t.Skip("run by TestDirectProcesses")
	}
	c, err := JoinEnv(bg, Options{HeapBytes: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Auto, with the thresholds of ranks that outnumber the CPUs or not,
	// then Direct pinned.
	if err := directCalls[float64](c, []int{100, 64<<10/8 + 13, 1<<20/8 + 13}, false); err != nil {
		t.Fatal(err)
	}
	for _, coll := range []Collective{CollAllreduce, CollReduceScatterBlock, CollReduceScatter, CollAllgather, CollAllgatherv, CollBcast} {
		setPin(c, coll, Direct)
	}
	if err := directCalls[int32](c, []int{0, 1, 1000}, true); err != nil {
		t.Fatal(err)
	}
}

// TestDirectDup: a communicator made by Dup has heaps of the parent's size,
// and its arena buffers take Direct.
func TestDirectDup(t *testing.T) {
	const n = 1 << 20 / 8 * 2
	err := Run(2, Options{HeapBytes: 4 << 20}, func(c *Comm) error {
		d, err := c.Dup(bg)
		if err != nil {
			return err
		}
		defer d.Close()
		if d.HeapBytes() != c.HeapBytes() {
			return fmt.Errorf("Dup's heap: %d bytes, the parent's %d", d.HeapBytes(), c.HeapBytes())
		}
		v, err := Alloc[int64](d, n)
		if err != nil {
			return err
		}
		for i := range v {
			v[i] = int64(i + d.Rank())
		}
		if err := Allreduce(bg, d, nil, v, Sum); err != nil {
			return err
		}
		if d.LastAlgorithm() != Direct {
			return fmt.Errorf("took %v", d.LastAlgorithm())
		}
		for i, x := range v {
			if x != int64(2*i+1) {
				return fmt.Errorf("element %d = %d, want %d", i, x, 2*i+1)
			}
		}
		return Free(d, v)
	})
	if err != nil {
		t.Fatal(err)
	}
}
