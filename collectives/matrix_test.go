package collectives

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// vec is rank r's test vector of n elements.
func vec(r, n int) []int32 {
	v := make([]int32, n)
	for i := range v {
		v[i] = input[int32](r, i, 1000)
	}
	return v
}

var (
	sumMu    sync.Mutex
	sumCache = map[[2]int][]int32{}
)

// sumAll is the element-wise sum of vec(0, n) ... vec(p-1, n), computed
// once per (p, n) for all ranks; callers must not modify it.
func sumAll(p, n int) []int32 {
	sumMu.Lock()
	defer sumMu.Unlock()
	if s, ok := sumCache[[2]int{p, n}]; ok {
		return s
	}
	out := make([]int32, n)
	for r := range p {
		for i := range out {
			out[i] += input[int32](r, i, 1000)
		}
	}
	if len(sumCache) > 64 {
		clear(sumCache)
	}
	sumCache[[2]int{p, n}] = out
	return out
}

// irregularCounts returns p block counts summing to about n, some zero.
func irregularCounts(p, n int) []int {
	cs := make([]int, p)
	for j := range cs {
		if j%3 != 1 {
			cs[j] = (n*(j%4+1))/(2*p) + j%2
		}
	}
	return cs
}

// runMatrix runs every collective for every count of the matrix on one
// communicator of p in-process ranks with alg pinned.
func runMatrix(t *testing.T, p int, alg Algorithm) {
	var barrierCount atomic.Int64
	opt := pinAll(alg)
	if p > 17 {
		// Larger slots keep the number of 100-rank steps of the long mode
		// bounded; p <= 17 exercises segmentation with 4 KiB slots.
		opt.SlotBytes = 64 << 10
	}
	err := Run(p, opt, func(c *Comm) error { return matrixCalls(t, c, alg, false, &barrierCount) })
	if err != nil {
		t.Fatal(err)
	}
}

// matrixCalls makes the collective calls of the matrix on c and checks the
// results exactly: every collective's (alg pinned where it serves, auto
// elsewhere), or with only the calls of the collectives alg implements.
// Vectors go out of place and in place, roots are 0, p-1 and p/2, and
// irregular counts include degenerate ones (one rank has everything).
// barrierCount, if not nil, is shared by the ranks (in-process) to check
// that nobody leaves a barrier early.
func matrixCalls(t *testing.T, c *Comm, alg Algorithm, only bool, barrierCount *atomic.Int64) error {
	p, r := c.Size(), c.Rank()
	runs := func(coll Collective) bool { return !only || implements(alg, coll) }
	for _, n := range testCounts(p) {
		what := func(coll string) string { return fmt.Sprintf("%v p=%d n=%d rank %d %s", alg, p, n, r, coll) }
		total := sumAll(p, n)
		regular, packed := make([]int, p), make([]int, p)
		for j := range p {
			regular[j], packed[j] = n, j*n
		}

		if runs(CollAllreduce) {
			recv := make([]int32, n)
			if err := Allreduce(bg, c, vec(r, n), recv, Sum); err != nil {
				return err
			}
			expect(t, what("allreduce"), recv, total)
			buf := vec(r, n)
			if err := Allreduce(bg, c, nil, buf, Sum); err != nil {
				return err
			}
			expect(t, what("allreduce in place"), buf, total)
		}

		if runs(CollReduceScatterBlock) { // vectors of p*n
			big := sumAll(p, p*n)
			recv := make([]int32, n)
			if err := ReduceScatterBlock(bg, c, vec(r, p*n), recv, Sum); err != nil {
				return err
			}
			expect(t, what("reduce_scatter_block"), recv, big[r*n:(r+1)*n])
			buf := vec(r, p*n)
			if err := ReduceScatterBlock(bg, c, nil, buf, Sum); err != nil {
				return err
			}
			expect(t, what("reduce_scatter_block in place"), buf[r*n:(r+1)*n], big[r*n:(r+1)*n])
		}

		if runs(CollAllgather) {
			ag := make([]int32, p*n)
			if err := Allgather(bg, c, vec(r, n), ag); err != nil {
				return err
			}
			expectBlocks(t, what("allgather"), ag, regular, packed, func(j int) []int32 { return vec(j, n) })
			ip := make([]int32, p*n)
			copy(ip[r*n:], vec(r, n))
			if err := Allgather(bg, c, nil, ip); err != nil {
				return err
			}
			expectBlocks(t, what("allgather in place"), ip, regular, packed, func(j int) []int32 { return vec(j, n) })
		}

		deg := make([]int, p)
		deg[p/2] = n
		for _, counts := range [][]int{irregularCounts(p, n), deg} {
			off, tot := 0, 0
			displs := make([]int, p) // with gaps between the blocks
			d := 0
			for j, k := range counts {
				if j < r {
					off += k
				}
				tot += k
				displs[j] = d
				d += k + 1
			}
			if runs(CollReduceScatter) {
				all := sumAll(p, tot)
				recv := make([]int32, counts[r])
				if err := ReduceScatter(bg, c, vec(r, tot), recv, counts, Sum); err != nil {
					return err
				}
				expect(t, what(fmt.Sprintf("reduce_scatter %v", counts)), recv, all[off:off+counts[r]])
				buf := vec(r, tot)
				if err := ReduceScatter(bg, c, nil, buf, counts, Sum); err != nil {
					return err
				}
				expect(t, what(fmt.Sprintf("reduce_scatter in place %v", counts)), buf[off:off+counts[r]], all[off:off+counts[r]])
			}
			if runs(CollAllgatherv) {
				agv := make([]int32, d)
				if err := Allgatherv(bg, c, vec(r, counts[r]), agv, counts, displs); err != nil {
					return err
				}
				expectBlocks(t, what(fmt.Sprintf("allgatherv %v", counts)), agv, counts, displs, func(j int) []int32 { return vec(j, counts[j]) })
			}
		}

		for _, root := range []int{0, p - 1, p / 2} {
			if runs(CollBcast) {
				b := make([]int32, n)
				if r == root {
					copy(b, vec(root, n))
				}
				if err := Bcast(bg, c, b, root); err != nil {
					return err
				}
				expect(t, what(fmt.Sprintf("bcast root %d", root)), b, vec(root, n))
			}
			if runs(CollReduce) {
				var out []int32
				if r == root {
					out = make([]int32, n)
				}
				if err := Reduce(bg, c, vec(r, n), out, Sum, root); err != nil {
					return err
				}
				if r == root {
					expect(t, what(fmt.Sprintf("reduce root %d", root)), out, total)
				}
				send, out := vec(r, n), []int32(nil)
				if r == root {
					send, out = nil, vec(r, n)
				}
				if err := Reduce(bg, c, send, out, Sum, root); err != nil {
					return err
				}
				if r == root {
					expect(t, what(fmt.Sprintf("reduce in place root %d", root)), out, total)
				}
			}
			if runs(CollScatter) {
				var sc []int32
				if r == root {
					sc = vec(100, p*n)
				}
				got := make([]int32, n)
				if err := Scatter(bg, c, sc, got, root); err != nil {
					return err
				}
				expect(t, what(fmt.Sprintf("scatter root %d", root)), got, vec(100, p*n)[r*n:(r+1)*n])
			}
			if runs(CollGather) {
				var g []int32
				if r == root {
					g = make([]int32, p*n)
				}
				if err := Gather(bg, c, vec(r, n), g, root); err != nil {
					return err
				}
				if r == root {
					expectBlocks(t, what(fmt.Sprintf("gather root %d", root)), g, regular, packed, func(j int) []int32 { return vec(j, n) })
				}
			}
		}

		if runs(CollScan) {
			sc := make([]int32, n)
			if err := Scan(bg, c, vec(r, n), sc, Sum); err != nil {
				return err
			}
			expect(t, what("scan"), sc, sumAll(r+1, n))
		}
		if runs(CollExscan) {
			ex := make([]int32, n)
			for i := range ex {
				ex[i] = -7
			}
			if err := Exscan(bg, c, vec(r, n), ex, Sum); err != nil {
				return err
			}
			if r > 0 {
				expect(t, what("exscan"), ex, sumAll(r, n))
			} else if n > 0 && ex[0] != -7 {
				t.Errorf("%s: exscan wrote rank 0's recv", what("exscan"))
			}
		}

		// alltoall: block j of rank r is vec(r*p+j, n)
		fromJ := func(j int) []int32 { return vec(j*p+r, n) }
		if runs(CollAlltoall) {
			a2a := make([]int32, 0, p*n)
			for j := range p {
				a2a = append(a2a, vec(r*p+j, n)...)
			}
			a2r := make([]int32, p*n)
			if err := Alltoall(bg, c, a2a, a2r); err != nil {
				return err
			}
			expectBlocks(t, what("alltoall"), a2r, regular, packed, fromJ)
			if err := Alltoall(bg, c, nil, a2a); err != nil {
				return err
			}
			expectBlocks(t, what("alltoall in place"), a2a, regular, packed, fromJ)
		}
		if runs(CollAlltoallv) {
			// rank r sends (r+2j) % (n+1) elements to rank j
			cnt := func(from, to int) int { return (from + 2*to) % (n + 1) }
			sc, rc, rd := make([]int, p), make([]int, p), make([]int, p)
			var sbuf []int32
			rtot := 0
			for j := range p {
				sc[j], rc[j], rd[j] = cnt(r, j), cnt(j, r), rtot
				sbuf = append(sbuf, vec(r*p+j, sc[j])...)
				rtot += rc[j]
			}
			rbuf := make([]int32, rtot)
			if err := Alltoallv(bg, c, sbuf, sc, nil, rbuf, rc, nil); err != nil {
				return err
			}
			expectBlocks(t, what("alltoallv"), rbuf, rc, rd, func(j int) []int32 { return vec(j*p+r, rc[j]) })
		}

		if !runs(CollBarrier) {
			continue
		}
		// barrier: everybody has arrived when anybody leaves
		if barrierCount == nil {
			if err := Barrier(bg, c); err != nil {
				return err
			}
			continue
		}
		barrierCount.Add(1)
		if err := Barrier(bg, c); err != nil {
			return err
		}
		if got, want := barrierCount.Load(), int64(p); got < want {
			t.Errorf("%s: left the barrier after %d of %d arrived", what("barrier"), got, want)
		}
		if err := Barrier(bg, c); err != nil {
			return err
		}
		barrierCount.Add(-1)
		if err := Barrier(bg, c); err != nil {
			return err
		}
	}
	return nil
}

// expectBlocks reports the first block j of got, counts[j] elements at
// displs[j], that differs from want(j).
func expectBlocks(t *testing.T, what string, got []int32, counts, displs []int, want func(j int) []int32) {
	t.Helper()
	for j := range counts {
		if !expect(t, fmt.Sprintf("%s block %d", what, j), got[displs[j]:displs[j]+counts[j]], want(j)) {
			return
		}
	}
}

func TestMatrix(t *testing.T) {
	for _, alg := range []Algorithm{Flat, Circulant, Replicated, ReduceBcast, Auto} {
		for _, p := range testSizes() {
			t.Run(fmt.Sprintf("alg=%v/p=%d", alg, p), func(t *testing.T) { runMatrix(t, p, alg) })
		}
	}
}

// TestFloatsBitwise: every allreduce algorithm combines each element on
// one rank in a fixed order and copies it, so float64 sums of values that
// round differently in every order are bitwise the same on every rank
// (both dual roots compute the result) and in every run.
func TestFloatsBitwise(t *testing.T) {
	for alg := Flat; alg < numAlgorithms; alg++ {
		if !implements(alg, CollAllreduce) || alg == Direct { // Direct: TestDirectBitwise
			continue
		}
		for _, p := range []int{2, 3, 5, 6, 8, 9, 16} {
			n := 1000
			rng := rand.New(rand.NewPCG(uint64(p), 7))
			in := make([][]float64, p)
			for r := range in {
				in[r] = make([]float64, n)
				for i := range in[r] {
					in[r][i] = rng.NormFloat64() * math.Pow(10, float64(rng.IntN(12)-6))
				}
			}
			var first []uint64
			for run := range 2 {
				res := make([][]float64, p)
				err := Run(p, pinAll(alg), func(c *Comm) error {
					res[c.Rank()] = make([]float64, n)
					return Allreduce(bg, c, in[c.Rank()], res[c.Rank()], Sum)
				})
				if err != nil {
					t.Fatalf("%v p=%d: %v", alg, p, err)
				}
				for r, x := range res {
					bits := make([]uint64, n)
					for i, v := range x {
						bits[i] = math.Float64bits(v)
					}
					if first == nil {
						first = bits
					} else if i, ok := equal(bits, first); !ok {
						t.Fatalf("%v p=%d run %d: rank %d element %d = %v, rank 0 of run 0 has %v", alg, p, run, r, i, x[i], math.Float64frombits(first[i]))
					}
				}
			}
		}
	}
}
