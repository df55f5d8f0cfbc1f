package collectives

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// warmSmall makes the calls after which an allreduce with Sum of float64
// takes the small-call path, checks that it will, and returns the counts
// of the first allreduce, which took the general path.
func warmSmall(c *Comm, n int) (Stats, error) {
	if err := Barrier(bg, c); err != nil {
		return Stats{}, err
	}
	// The first allreduce binds the kernel: the general path.
	if err := Allreduce(bg, c, make([]float64, n), make([]float64, n), Sum); err != nil {
		return Stats{}, err
	}
	general, _ := c.Stats()
	// (Not smallOK's result: a peer may have gone on to abort the arena.)
	c.smallOK(smallAllreduceIdx, 8*n)
	if int(c.small[smallAllreduceIdx].upTo) < 8*n || c.synced != c.step {
		return general, fmt.Errorf("rank %d: allreduce of %d B would not take the small-call path (%v)", c.rank, 8*n, c.LastAlgorithm())
	}
	return general, nil
}

// TestSmallPathResults: allreduce and barrier on the small-call path give
// the general path's results and counts: exact integer sums, float sums
// bitwise equal on every rank and to the rank-order sum, the same Stats.
func TestSmallPathResults(t *testing.T) {
	for _, p := range []int{2, 3, 8} {
		t.Run(fmt.Sprint("p=", p), func(t *testing.T) {
			const iters = 200
			got := make([][]uint64, p)
			errs := runAll(t, p, Options{}, func(c *Comm) error {
				r := c.Rank()
				first, err := warmSmall(c, 5)
				if err != nil {
					return err
				}
				for it := range iters {
					n := 1 + it%5 // 8 to 40 bytes
					in := make([]float64, n)
					for i := range in {
						in[i] = float64(r*1000 + it*7 + i)
					}
					out := make([]float64, n)
					if err := Allreduce(bg, c, in, out, Sum); err != nil {
						return err
					}
					for i := range out {
						want := float64(p*(p-1)/2*1000 + p*(it*7+i)) // exact: small integers
						if out[i] != want {
							return fmt.Errorf("rank %d it %d: sum[%d] = %v, want %v", r, it, i, out[i], want)
						}
					}
					if err := Barrier(bg, c); err != nil {
						return err
					}
					f := []float64{1 / float64(r+3+it), math.Pi * float64(r-it), 1e16 / float64(r+1)}
					g := make([]float64, len(f))
					copy(g, f)
					if err := Allreduce(bg, c, nil, g, Sum); err != nil { // in place
						return err
					}
					for _, x := range g {
						got[r] = append(got[r], math.Float64bits(x))
					}
					// The rank-order sum, as the kernel adds.
					for i := range f {
						var s float64
						for q := range p {
							s += [...]float64{1 / float64(q+3+it), math.Pi * float64(q-it), 1e16 / float64(q+1)}[i]
						}
						if math.Float64bits(s) != math.Float64bits(g[i]) {
							return fmt.Errorf("rank %d it %d: float64 sum[%d] = %v, rank-order sum %v", r, it, i, g[i], s)
						}
					}
				}
				last, _ := c.Stats()
				if last != first {
					return fmt.Errorf("rank %d: small-call path counted %+v, general path %+v", r, last, first)
				}
				return nil
			})
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
			for r := 1; r < p; r++ {
				for i := range got[0] {
					if got[r][i] != got[0][i] {
						t.Fatalf("rank %d float result %d differs from rank 0's", r, i)
					}
				}
			}
		})
	}
}

// forceGeneral makes c take the general path for every call.
func forceGeneral(c *Comm) {
	for i := range c.small {
		c.small[i] = smallMemo{known: true, upTo: -1}
	}
}

// smallSequence runs a sequence of barriers and allreduces of 1 to
// smallBytes bytes, bcasts and reduces of 1 to smallRootedBytes (roots and
// in-place calls varied), reduce_scatter_blocks of 1 to 4 elements per
// rank, alltoalls of 1 to smallBytes bytes (blocks of 1 element and up)
// reduce_scatters of blocks of 0 to 2 elements, and gathers and scatters
// of 8 B to 4 KiB (roots varied), and returns every
// rank's results and counts, in call order.
func smallSequence(c *Comm) ([]float64, []Stats, error) {
	var out []float64
	var stats []Stats
	p, r := c.Size(), c.Rank()
	keep := func(xs []float64) {
		out = append(out, xs...)
		last, _ := c.Stats()
		stats = append(stats, last)
	}
	for it := range 60 {
		n := []int{1, 3, 5, 6, 32, 64, 127, 128}[it%8] // 8 B to 1 KiB
		root := it % p
		in := make([]float64, n)
		for i := range in {
			in[i] = 1/float64(r+i+2) + float64(it)
		}
		if err := Barrier(bg, c); err != nil {
			return nil, nil, err
		}
		keep(nil)
		res := make([]float64, n)
		if err := Allreduce(bg, c, in, res, Sum); err != nil {
			return nil, nil, err
		}
		keep(res)
		nb := []int{1, 5, 128, 256, 500, 512, 777, 1024}[it%8] // 8 B to 8 KiB
		buf := make([]float64, nb)
		if r == root {
			for i := range buf {
				buf[i] = 1/float64(r+i+2) + float64(it)
			}
		}
		if err := Bcast(bg, c, buf, root); err != nil {
			return nil, nil, err
		}
		keep(buf)
		rin := make([]float64, nb)
		for i := range rin {
			rin[i] = 1/float64(r+i+3) + float64(it)
		}
		red := make([]float64, nb)
		var send []float64 = rin
		if r == root && it%3 == 0 {
			copy(red, rin)
			send = nil // in place
		}
		if err := Reduce(bg, c, send, red, Sum, root); err != nil {
			return nil, nil, err
		}
		keep(red)
		nr := 1 + it%4 // elements per rank: at p=2 only 1 takes the small path (flat below 32 B)
		rsIn := make([]float64, p*nr)
		for i := range rsIn {
			rsIn[i] = 1/float64(r+i+4) + float64(it)
		}
		rs := make([]float64, nr)
		if err := ReduceScatterBlock(bg, c, rsIn, rs, Sum); err != nil {
			return nil, nil, err
		}
		keep(rs)
		na := max(1, []int{1, 2, 3, 5, 8, 16, 31, 128}[it%8]/p) // elements per block: 8 B to 1 KiB in all
		aIn := make([]float64, p*na)
		for i := range aIn {
			aIn[i] = float64(1000*r+i) + float64(it)/8
		}
		aOut := make([]float64, p*na)
		if err := Alltoall(bg, c, aIn, aOut); err != nil {
			return nil, nil, err
		}
		for q := range p { // exact: block q of the result is block r of rank q's input
			for i := range na {
				if want := float64(1000*q+r*na+i) + float64(it)/8; aOut[q*na+i] != want {
					return nil, nil, fmt.Errorf("alltoall of %d per block: element %d of block %d is %v, want %v", na, i, q, aOut[q*na+i], want)
				}
			}
		}
		keep(aOut)
		counts := make([]int, p) // 0 to 2 elements per block, some empty
		total := 0
		for j := range counts {
			counts[j] = (it + j) % 3
			total += counts[j]
		}
		vIn := make([]float64, total)
		for i := range vIn {
			vIn[i] = 1/float64(r+i+5) + float64(it)
		}
		vOut := make([]float64, counts[r])
		if err := ReduceScatter(bg, c, vIn, vOut, counts, Sum); err != nil {
			return nil, nil, err
		}
		keep(vOut)
		ng := max(1, nb/(2*p)) // elements per block: 8 B to 4 KiB in all
		gIn := make([]float64, ng)
		for i := range gIn {
			gIn[i] = float64(1000*r+i) + float64(it)/8
		}
		var gOut []float64
		if r == root {
			gOut = make([]float64, p*ng)
		}
		if err := Gather(bg, c, gIn, gOut, root); err != nil {
			return nil, nil, err
		}
		for i := range gOut { // exact: block q is rank q's input
			if q, j := i/ng, i%ng; gOut[i] != float64(1000*q+j)+float64(it)/8 {
				return nil, nil, fmt.Errorf("gather of %d per block: element %d of block %d is %v", ng, j, q, gOut[i])
			}
		}
		keep(gOut)
		var sIn []float64
		if r == root {
			sIn = make([]float64, p*ng)
			for i := range sIn {
				sIn[i] = float64(i) + float64(it)/8
			}
		}
		sOut := make([]float64, ng)
		if err := Scatter(bg, c, sIn, sOut, root); err != nil {
			return nil, nil, err
		}
		for j := range sOut { // exact: block r of the root's input
			if sOut[j] != float64(r*ng+j)+float64(it)/8 {
				return nil, nil, fmt.Errorf("scatter of %d per block: element %d is %v", ng, j, sOut[j])
			}
		}
		keep(sOut)
	}
	return out, stats, nil
}

// TestSmallPathSameAsGeneral: the same calls on the small-call path and on
// the general path give bitwise equal results and the same counts.
func TestSmallPathSameAsGeneral(t *testing.T) {
	for _, p := range []int{2, 3, 5} {
		t.Run(fmt.Sprint("p=", p), func(t *testing.T) {
			type res struct {
				out   []float64
				stats []Stats
			}
			run := func(general bool) []res {
				rs := make([]res, p)
				errs := runAll(t, p, Options{}, func(c *Comm) error {
					if general {
						forceGeneral(c)
					}
					var err error
					rs[c.Rank()].out, rs[c.Rank()].stats, err = smallSequence(c)
					if err == nil && !general {
						// The small-call path took every call (the barrier's
						// where the flat barrier is chosen).
						for i, m := range c.small {
							want := smallBytes
							switch i {
							case smallBcastIdx, smallReduceIdx:
								want = smallRootedBytes
							case smallGatherIdx, smallScatterIdx:
								want = 8 * p * max(1, 512/p) // the largest of the sequence
							case smallReduceScatterIdx:
								want = 8 * p // the smallest of the sequence
							case smallAlltoallIdx:
								want = 8 * p * max(1, 128/p) // the largest of the sequence
							case smallReduceScatterVIdx:
								want = 0 // the most the sequence's counts sum to
								for it := range 3 {
									sum := 0
									for j := range p {
										sum += (it + j) % 3
									}
									want = max(want, 8*sum)
								}
							}
							if i != smallBarrierIdx && i != smallBarrierRootIdx && int(m.upTo) < want {
								err = fmt.Errorf("small-call path %d took calls up to %d bytes only", i, m.upTo)
							}
						}
						if d, _ := c.selector().decide(selectInput{coll: CollBarrier, commutative: true}); d.alg == Flat && c.small[smallBarrierIdx].upTo != 0 {
							err = fmt.Errorf("the flat barrier did not take the small-call path")
						}
					}
					return err
				})
				for r, err := range errs {
					if err != nil {
						t.Fatalf("general %v: rank %d: %v", general, r, err)
					}
				}
				return rs
			}
			small, general := run(false), run(true)
			for r := range p {
				a, b := small[r], general[r]
				if len(a.out) != len(b.out) || len(a.stats) != len(b.stats) {
					t.Fatalf("rank %d: %d results and %d counts, general path %d and %d", r, len(a.out), len(a.stats), len(b.out), len(b.stats))
				}
				for i := range a.out {
					if math.Float64bits(a.out[i]) != math.Float64bits(b.out[i]) {
						t.Fatalf("rank %d: result %d is %v, general path %v", r, i, a.out[i], b.out[i])
					}
				}
				for i := range a.stats {
					if a.stats[i] != b.stats[i] {
						t.Fatalf("rank %d: call %d counted %+v, general path %+v", r, i, a.stats[i], b.stats[i])
					}
				}
			}
		})
	}
}

// TestSmallPathCanceled: a canceled context fails the call on the
// small-call path's arguments too (the general path reports it).
func TestSmallPathCanceled(t *testing.T) {
	errs := runAll(t, 2, Options{}, func(c *Comm) error {
		if _, err := warmSmall(c, 1); err != nil {
			return err
		}
		ctx, cancel := context.WithCancel(bg)
		cancel()
		return Allreduce(ctx, c, []float64{1}, make([]float64, 1), Sum)
	})
	// Each rank fails for its canceled context, or for the abort of the
	// rank that failed first.
	for r, err := range errs {
		if !errors.Is(err, context.Canceled) && !(errors.Is(err, ErrAborted) && strings.Contains(err.Error(), "context canceled")) {
			t.Errorf("rank %d: %v, want context.Canceled", r, err)
		}
	}
}

// TestHashIntsDistinguishes: hashInts, the hash of irregular counts in
// the descriptor, is the same for equal values however they are split
// into slices, and differs when one value differs or two are swapped.
func TestHashIntsDistinguishes(t *testing.T) {
	if hashInts([]int{1, 2}, []int{3}) != hashInts([]int{1, 2, 3}) || hashInts() != hashInts(nil, []int{}) {
		t.Errorf("equal values hash differently")
	}
	for _, x := range [][]int{{0}, {1, 2, 3}, {-1, 1 << 40, 7}, {5, 0, 0, 9, 3}} {
		h := hashInts(x)
		for i := range x {
			for _, d := range []int{1, -1, 1 << 33} {
				y := slices.Clone(x)
				y[i] += d
				if hashInts(y) == h {
					t.Errorf("hashInts(%v) = hashInts(%v)", y, x)
				}
			}
			if i > 0 && x[i] != x[i-1] {
				y := slices.Clone(x)
				y[i], y[i-1] = y[i-1], y[i]
				if hashInts(y) == h {
					t.Errorf("hashInts(%v) = hashInts(%v)", y, x)
				}
			}
		}
	}
}

// TestSmallPathAlternatingOps: a program that alternates built-in
// operators (Sum, Max, Min) and element types takes the small-call path
// for every allreduce and reduce after the first barrier (the counter of
// small calls says so), with exact results.
func TestSmallPathAlternatingOps(t *testing.T) {
	ops := []Op{Sum, Max, Min}
	for _, p := range []int{2, 3} {
		const iters = 60
		runAll(t, p, Options{}, func(c *Comm) error {
			if err := Barrier(bg, c); err != nil { // settles the protocol
				return err
			}
			before := c.smalls
			r := c.Rank()
			for it := range iters {
				op := ops[it%3]
				f := []float64{float64(r + it)}
				if err := Allreduce(bg, c, nil, f, op); err != nil {
					return err
				}
				want := [...]float64{float64(p*it + p*(p-1)/2), float64(p - 1 + it), float64(it)}[it%3] // Sum, Max, Min
				if f[0] != want {
					return fmt.Errorf("rank %d it %d %v: %v, want %v", r, it, op, f[0], want)
				}
				x, y := []int32{int32(r + 1)}, []int32{0}
				if err := Reduce(bg, c, x, y, ops[(it+1)%3], 0); err != nil {
					return err
				}
				if r == 0 {
					want := [...]int32{int32(p * (p + 1) / 2), int32(p), 1}[(it+1)%3]
					if y[0] != want {
						return fmt.Errorf("it %d reduce %v: %d, want %d", it, ops[(it+1)%3], y[0], want)
					}
				}
			}
			if got := c.smalls - before; got != 2*iters {
				return fmt.Errorf("rank %d: %d of %d calls took the small-call path", r, got, 2*iters)
			}
			return nil
		})
	}
}

// TestSmallCallsDoNotAllocate: allreduce, reduce and barrier on the
// small-call path allocate nothing, at p=1 and p=2, alternating operators.
func TestSmallCallsDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, p := range []int{1, 2} {
		cs := localComms(t, p, Options{})
		bufs := make([][2][]float64, p)
		for r := range bufs {
			bufs[r] = [2][]float64{{1}, {0}}
		}
		ops := []Op{Sum, Max}
		calls := func(c *Comm, it int) error {
			b := bufs[c.Rank()]
			if err := Allreduce(bg, c, nil, b[0], ops[it%2]); err != nil {
				return err
			}
			if err := Reduce(bg, c, b[0], b[1], ops[(it+1)%2], p-1); err != nil {
				return err
			}
			return Barrier(bg, c)
		}
		const runs = 100
		done := make(chan error, 1)
		if p == 2 {
			go func() {
				var err error
				for it := range runs + 1 + 4 {
					if err = calls(cs[1], it); err != nil {
						break
					}
				}
				done <- err
			}()
		}
		for it := range 4 {
			if err := calls(cs[0], it); err != nil {
				t.Fatal(err)
			}
		}
		it := 4
		allocs := testing.AllocsPerRun(runs, func() {
			if err := calls(cs[0], it); err != nil {
				t.Fatal(err)
			}
			it++
		})
		if p == 2 {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		if allocs != 0 {
			t.Errorf("p=%d: %v allocations per call", p, allocs)
		}
	}
}
