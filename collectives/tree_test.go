package collectives

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sync"
	"testing"

	"github.com/shmcoll/shmcoll/simd"
)

var treeAlgs = []Algorithm{Tree, ReduceBcast, DualRoot}

// TestPostorder checks the tree shapes: every rank of [lo, hi) in exactly
// one place, subtrees contiguous and ending at their root (so that the
// reduction (first) op (second) op own is in rank order), depth at most
// the height, and the height floor(log2 s) (as complete as possible).
func TestPostorder(t *testing.T) {
	for s := 1; s <= 130; s++ {
		if got, want := treeHeight(s), bits.Len(uint(s))-1; got != want {
			t.Errorf("treeHeight(%d) = %d, want %d", s, got, want)
		}
		lo := 3
		hi := lo + s
		// sub[r] = first rank of r's subtree, computed bottom-up.
		sub := make(map[int]int)
		for r := lo; r < hi; r++ {
			parent, c0, c1, depth := postorderNode(lo, hi, r)
			if depth > treeHeight(s) {
				t.Errorf("s=%d rank %d: depth %d > height %d", s, r, depth, treeHeight(s))
			}
			if (parent < 0) != (r == hi-1) {
				t.Errorf("s=%d rank %d: parent %d", s, r, parent)
			}
			first := r
			for _, ch := range []int{c1, c0} {
				if ch < 0 {
					continue
				}
				if pp, _, _, _ := postorderNode(lo, hi, ch); pp != r {
					t.Errorf("s=%d: child %d of %d has parent %d", s, ch, r, pp)
				}
				if ch != first-1 {
					t.Errorf("s=%d rank %d: child %d does not end where the next subtree starts (%d)", s, r, ch, first)
				}
				first = sub[ch]
			}
			if c1 >= 0 && c0 < 0 {
				t.Errorf("s=%d rank %d: second child without a first", s, r)
			}
			sub[r] = first
		}
		if sub[hi-1] != lo {
			t.Errorf("s=%d: the root's subtree starts at %d, want %d", s, sub[hi-1], lo)
		}
	}
}

// TestTreeAllreduce: every p and count of the matrix, out of place and in
// place, exact int32 sums, with the block count of the pipelining lemma
// and with fixed counts (several blocks per segment of the 4 KiB slots).
func TestTreeAllreduce(t *testing.T) {
	blocks := []int{0, 3}
	if long {
		blocks = []int{0, 1, 2, 3, 7, 64}
	}
	for _, alg := range treeAlgs {
		for _, nb := range blocks {
			for _, p := range testSizes() {
				t.Run(fmt.Sprintf("alg=%v/blocks=%d/p=%d", alg, nb, p), func(t *testing.T) {
					defer setTestBlocks(nb)()
					err := runRanks(p, pinAll(alg), func(c *Comm) error {
						r := c.Rank()
						for _, n := range testCounts(p) {
							what := fmt.Sprintf("%v p=%d n=%d rank %d", alg, p, n, r)
							recv := make([]int32, n)
							if err := Allreduce(bg, c, vec(r, n), recv, Sum); err != nil {
								return err
							}
							expect(t, what, recv, sumAll(p, n))
							buf := vec(r, n)
							if err := Allreduce(bg, c, nil, buf, Sum); err != nil {
								return err
							}
							expect(t, what+" in place", buf, sumAll(p, n))
						}
						return Barrier(bg, c)
					})
					if err != nil {
						t.Fatal(err)
					}
				})
			}
		}
	}
}

// TestTreeNonCommutative: the trees keep rank order, so the affine
// operator (errors_test.go) gives x_0 op x_1 op ... op x_{p-1} exactly.
func TestTreeNonCommutative(t *testing.T) {
	ps := []int{2, 3, 4, 5, 7, 8, 13, 17}
	if long {
		ps = append(ps, 31, 32, 33, 64, 100)
	}
	for _, alg := range treeAlgs {
		for _, nb := range []int{0, 1, 4} {
			for _, p := range ps {
				n := 300 // several segments in 4 KiB slots
				in := make([][]simd.Int64Int64, p)
				for r := range in {
					in[r] = affineIn(r, n)
				}
				want := refReduce(t, affine, in)
				func() {
					defer setTestBlocks(nb)()
					err := runRanks(p, pinAll(alg), func(c *Comm) error {
						got := make([]simd.Int64Int64, n)
						if err := Allreduce(bg, c, in[c.Rank()], got, affine); err != nil {
							return err
						}
						expect(t, fmt.Sprintf("%v blocks=%d p=%d rank %d", alg, nb, p, c.Rank()), got, want)
						return Barrier(bg, c)
					})
					if err != nil {
						t.Fatalf("%v p=%d: %v", alg, p, err)
					}
				}()
			}
		}
	}
}

// TestTreeFloatsBitwise: float64 sums that round differently in every
// order are bitwise the same on every rank (both dual roots compute the
// result) and from run to run.
func TestTreeFloatsBitwise(t *testing.T) {
	for _, alg := range treeAlgs {
		for _, p := range []int{2, 3, 6, 9, 16} {
			n := 1000
			in := func(r, i int) float64 { return math.Sin(float64(r*7919+i)) * math.Pow(10, float64((r+i)%7-3)) }
			var first []uint64
			for run := range 2 {
				got := make([][]float64, p)
				err := runRanks(p, pinAll(alg), func(c *Comm) error {
					r := c.Rank()
					x := make([]float64, n)
					for i := range x {
						x[i] = in(r, i)
					}
					got[r] = make([]float64, n)
					if err := Allreduce(bg, c, x, got[r], Sum); err != nil {
						return err
					}
					return Barrier(bg, c)
				})
				if err != nil {
					t.Fatal(err)
				}
				b0 := make([]uint64, n)
				for i, v := range got[0] {
					b0[i] = math.Float64bits(v)
				}
				for r := 1; r < p; r++ {
					for i, v := range got[r] {
						if math.Float64bits(v) != b0[i] {
							t.Fatalf("%v p=%d: rank %d element %d = %v, rank 0 has %v", alg, p, r, i, v, got[0][i])
						}
					}
				}
				if run == 0 {
					first = b0
				} else if _, ok := equal(first, b0); !ok {
					t.Errorf("%v p=%d: results differ between runs", alg, p)
				}
			}
		}
	}
}

// TestTreeCounts asserts the per-block counts of 002 on every rank: a rank
// with k children receives and reduces k partial blocks, exposes one to
// its parent (or, a dual root, to the other root), receives one result
// block (a dual root: the other root's partial, reduced once more), and
// exposes it to its children if it has any — at most three hand-offs and
// two reductions a round, three for a dual root. The single-tree root
// exposes only results.
func TestTreeCounts(t *testing.T) {
	ps := []int{2, 3, 4, 5, 7, 8, 9, 16, 17, 33}
	if long {
		ps = append(ps, 31, 32, 64, 100)
	}
	defer setTestBlocks(testBlocks)()
	for _, alg := range treeAlgs {
		kind := map[Algorithm]treeKind{Tree: treeDoubly, ReduceBcast: treeReduceBcast, DualRoot: treeDual}[alg]
		for _, p := range ps {
			for _, nb := range []int{1, 5} {
				testBlocks = nb
				opt := pinAll(alg)
				opt.SlotBytes = 1 << 20
				stats := make([]Stats, p)
				err := runRanks(p, opt, func(c *Comm) error {
					if err := Allreduce(bg, c, make([]float64, 8*nb), make([]float64, 8*nb), Sum); err != nil {
						return err
					}
					stats[c.Rank()], _ = c.Stats()
					return Barrier(bg, c)
				})
				if err != nil {
					t.Fatal(err)
				}
				N := uint64(nb)
				for r, s := range stats {
					nd := treeNodeOf(kind, p, r)
					k := uint64(0)
					for _, ch := range []int{nd.c0, nd.c1} {
						if ch >= 0 {
							k++
						}
					}
					up := uint64(0)
					if nd.parent >= 0 || nd.peerRoot >= 0 {
						up = 1
					}
					hasKids := uint64(min(k, 1))
					dual := uint64(0)
					if nd.peerRoot >= 0 {
						dual = 1
					}
					want := Stats{Calls: 1, Steps: 1,
						Rounds: N * (k + up), Received: N * (k + up),
						Reduced: N * (k + dual), Sent: N * (up + hasKids)}
					if s != want {
						t.Errorf("%v p=%d n=%d rank %d (%+v): %+v, want %+v", alg, p, nb, r, nd, s, want)
					}
					if k+up > 3 || s.Reduced > 3*N || (dual == 0 && s.Reduced > 2*N) {
						t.Errorf("%v p=%d rank %d: more than 3 hand-offs or the paper's reductions a round", alg, p, r)
					}
				}
			}
		}
	}
}

// TestTreeTypes: allreduce with every operator of a representative set of
// types (all in long mode); reduce_scatter_block, reduce and scan of
// testType run on auto.
func TestTreeTypes(t *testing.T) {
	defer setTestBlocks(3)()
	tests := typeTests
	if !long {
		tests = []func(*testing.T, int, Algorithm){testType[int8], testType[float32], testType[simd.Float16],
			testType[complex128], testType[simd.Int32Int32], testType[uint64]}
	}
	for _, alg := range treeAlgs {
		for _, p := range []int{2, 3, 5} {
			for _, f := range tests {
				f(t, p, alg)
			}
		}
	}
}

// runRanks is Run, except that the ranks are closed only when all have
// returned: shm's liveness check takes a rank that closed while a slower
// one still polls its last phase for a departed peer, even though it
// posted that phase, which is not what these tests are about.
func runRanks(p int, opt Options, f func(c *Comm) error) error {
	cs, err := NewLocal(p, opt)
	if err != nil {
		return err
	}
	errs := make([]error, p)
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			if err := f(c); err != nil {
				errs[i] = fmt.Errorf("rank %d: %w", i, err)
				c.Abort(errs[i])
			}
		})
	}
	wg.Wait()
	for _, c := range cs {
		c.Close()
	}
	return errors.Join(errs...)
}
