package collectives

import (
	"fmt"
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
	err := Run(p, opt, func(c *Comm) error { return matrixCalls(t, c, alg, &barrierCount) })
	if err != nil {
		t.Fatal(err)
	}
}

// matrixCalls makes every collective call of the matrix on c and checks
// the results exactly. barrierCount, if not nil, is shared by the ranks
// (in-process) to check that nobody leaves a barrier early.
func matrixCalls(t *testing.T, c *Comm, alg Algorithm, barrierCount *atomic.Int64) error {
	{
		p, r := c.Size(), c.Rank()
		for _, n := range testCounts(p) {
			if n < 0 {
				continue
			}
			what := func(coll string) string { return fmt.Sprintf("%v p=%d n=%d rank %d %s", alg, p, n, r, coll) }
			total := sumAll(p, n)

			// allreduce, out of place and in place
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

			// reduce_scatter_block: vectors of p*n
			big := sumAll(p, p*n)
			recv = make([]int32, n)
			if err := ReduceScatterBlock(bg, c, vec(r, p*n), recv, Sum); err != nil {
				return err
			}
			expect(t, what("reduce_scatter_block"), recv, big[r*n:(r+1)*n])
			buf = vec(r, p*n)
			if err := ReduceScatterBlock(bg, c, nil, buf, Sum); err != nil {
				return err
			}
			expect(t, what("reduce_scatter_block in place"), buf[r*n:(r+1)*n], big[r*n:(r+1)*n])

			// reduce_scatter, irregular
			counts := irregularCounts(p, n)
			off := 0
			for _, k := range counts[:r] {
				off += k
			}
			tot := off
			for _, k := range counts[r:] {
				tot += k
			}
			all := sumAll(p, tot)
			recv = make([]int32, counts[r])
			if err := ReduceScatter(bg, c, vec(r, tot), recv, counts, Sum); err != nil {
				return err
			}
			expect(t, what("reduce_scatter"), recv, all[off:off+counts[r]])

			// allgather
			ag := make([]int32, p*n)
			if err := Allgather(bg, c, vec(r, n), ag); err != nil {
				return err
			}
			for j := range p {
				if !expect(t, what(fmt.Sprintf("allgather block %d", j)), ag[j*n:(j+1)*n], vec(j, n)) {
					break
				}
			}

			// allgatherv with gaps between blocks
			displs := make([]int, p)
			d := 0
			for j, k := range counts {
				displs[j] = d
				d += k + 1
			}
			agv := make([]int32, d)
			if err := Allgatherv(bg, c, vec(r, counts[r]), agv, counts, displs); err != nil {
				return err
			}
			for j := range p {
				if !expect(t, what(fmt.Sprintf("allgatherv block %d", j)), agv[displs[j]:displs[j]+counts[j]], vec(j, counts[j])) {
					break
				}
			}

			for _, root := range []int{0, p - 1, p / 2} {
				// bcast
				b := make([]int32, n)
				if r == root {
					copy(b, vec(root, n))
				}
				if err := Bcast(bg, c, b, root); err != nil {
					return err
				}
				expect(t, what(fmt.Sprintf("bcast root %d", root)), b, vec(root, n))

				// reduce
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

				// scatter and gather
				var sc []int32
				if r == root {
					sc = vec(100, p*n)
				}
				got := make([]int32, n)
				if err := Scatter(bg, c, sc, got, root); err != nil {
					return err
				}
				expect(t, what(fmt.Sprintf("scatter root %d", root)), got, vec(100, p*n)[r*n:(r+1)*n])
				var g []int32
				if r == root {
					g = make([]int32, p*n)
				}
				if err := Gather(bg, c, vec(r, n), g, root); err != nil {
					return err
				}
				if r == root {
					for j := range p {
						if !expect(t, what(fmt.Sprintf("gather root %d block %d", root, j)), g[j*n:(j+1)*n], vec(j, n)) {
							break
						}
					}
				}
			}

			// scan and exscan
			sc := make([]int32, n)
			if err := Scan(bg, c, vec(r, n), sc, Sum); err != nil {
				return err
			}
			expect(t, what("scan"), sc, sumAll(r+1, n))
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

			// alltoall: block j of rank r is vec(r*p+j, n)
			a2a := make([]int32, 0, p*n)
			for j := range p {
				a2a = append(a2a, vec(r*p+j, n)...)
			}
			a2r := make([]int32, p*n)
			if err := Alltoall(bg, c, a2a, a2r); err != nil {
				return err
			}
			for j := range p {
				if !expect(t, what(fmt.Sprintf("alltoall block %d", j)), a2r[j*n:(j+1)*n], vec(j*p+r, n)) {
					break
				}
			}
			if err := Alltoall(bg, c, nil, a2a); err != nil {
				return err
			}
			for j := range p {
				if !expect(t, what(fmt.Sprintf("alltoall in place block %d", j)), a2a[j*n:(j+1)*n], vec(j*p+r, n)) {
					break
				}
			}

			// alltoallv: rank r sends (r+2j) % (n+1) elements to rank j
			cnt := func(from, to int) int { return (from + 2*to) % (n + 1) }
			sc2, rc2 := make([]int, p), make([]int, p)
			var sbuf []int32
			for j := range p {
				sc2[j], rc2[j] = cnt(r, j), cnt(j, r)
				sbuf = append(sbuf, vec(r*p+j, sc2[j])...)
			}
			rtot := 0
			for _, k := range rc2 {
				rtot += k
			}
			rbuf := make([]int32, rtot)
			if err := Alltoallv(bg, c, sbuf, sc2, nil, rbuf, rc2, nil); err != nil {
				return err
			}
			o := 0
			for j := range p {
				if !expect(t, what(fmt.Sprintf("alltoallv block %d", j)), rbuf[o:o+rc2[j]], vec(j*p+r, rc2[j])) {
					break
				}
				o += rc2[j]
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
}

func TestMatrix(t *testing.T) {
	for _, alg := range []Algorithm{Flat, Circulant, Replicated, Auto} {
		for _, p := range testSizes() {
			t.Run(fmt.Sprintf("alg=%v/p=%d", alg, p), func(t *testing.T) { runMatrix(t, p, alg) })
		}
	}
}
