package collectives

import (
	"fmt"
	"math/bits"
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

// TestTreeMatrix: the matrix of the collectives each tree algorithm
// serves (allreduce; Tree also reduce and bcast, with the roots 0, p-1 and
// p/2), out of place and in place, exact int32 sums, with the block count
// of the pipelining lemma and with fixed counts (several blocks per
// segment of the 4 KiB slots).
func TestTreeMatrix(t *testing.T) {
	blocks := []int{0, 3}
	if long {
		blocks = []int{0, 1, 2, 3, 7, 64}
	}
	for _, alg := range treeAlgs {
		for _, nb := range blocks {
			for _, p := range testSizes() {
				t.Run(fmt.Sprintf("alg=%v/blocks=%d/p=%d", alg, nb, p), func(t *testing.T) {
					defer setTestBlocks(nb)()
					if err := Run(p, pinAll(alg), func(c *Comm) error { return matrixCalls(t, c, alg, true, nil) }); err != nil {
						t.Fatal(err)
					}
				})
			}
		}
	}
}

// TestTreeNonCommutative: the trees keep rank order, so the affine
// operator (errors_test.go) gives x_0 op x_1 op ... op x_{p-1} exactly, in
// the allreduce and in Tree's reduce to any root.
func TestTreeNonCommutative(t *testing.T) {
	ps := []int{2, 3, 4, 5, 7, 8, 13, 17}
	if long {
		ps = append(ps, 31, 32, 33, 64, 100)
	}
	for _, alg := range treeAlgs {
		for _, nb := range []int{0, 1, 4} {
			for _, p := range ps {
				n := 300/p + 1 // several segments in 4 KiB slots
				in := make([][]simd.Int64Int64, p)
				for r := range in {
					in[r] = affineIn(r, p*n)
				}
				want := refReduce(t, affine, in)
				func() {
					defer setTestBlocks(nb)()
					if err := Run(p, pinAll(alg), func(c *Comm) error { return affineCalls(t, c, alg, in, want) }); err != nil {
						t.Fatalf("%v blocks=%d p=%d: %v", alg, nb, p, err)
					}
				}()
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
				err := Run(p, opt, func(c *Comm) error {
					if err := Allreduce(bg, c, make([]float64, 8*nb), make([]float64, 8*nb), Sum); err != nil {
						return err
					}
					stats[c.Rank()], _ = c.Stats()
					return nil
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

// TestTreeRootedCounts asserts Tree's reduce and bcast against 002's
// single pipelined tree: on every rank, per block, a reduce receives and
// reduces one partial block from each child and exposes one to its parent
// (rank p-1 its result to a root other than itself, which receives it); a
// bcast receives each block once and exposes it once if a child other than
// the root reads it. The pipeline takes at most n-1+h rounds (h the tree
// height), one more when the root is not rank p-1 — exactly n-1+h for the
// reduce to p-1 —, and n is the pipelining lemma's.
func TestTreeRootedCounts(t *testing.T) {
	ps := []int{2, 3, 4, 5, 7, 8, 9, 16, 17, 33}
	if long {
		ps = append(ps, 31, 32, 64, 100)
	}
	for _, p := range ps {
		h := treeHeight(p)
		for _, root := range []int{p - 1, 0, p / 2} {
			handOff := 0
			if root != p-1 {
				handOff = 1
			}
			for _, nb := range []int{1, 5} {
				what := fmt.Sprintf("p=%d root %d n=%d", p, root, nb)
				for _, bcast := range []bool{false, true} {
					rounds := treeRootedRounds(p, root, nb, bcast)
					if rounds > nb-1+h+handOff || !bcast && handOff == 0 && rounds != nb-1+h {
						t.Errorf("%s bcast=%v: %d rounds, want <= n-1+h+%d = %d", what, bcast, rounds, handOff, nb-1+h+handOff)
					}
				}
				stats := treeRootedStats(t, p, root, nb, 8*nb)
				N := uint64(nb)
				for r, s := range stats[0] { // reduce
					nd := treeNodeOf(treeDoubly, p, r)
					k := uint64(0)
					for _, ch := range []int{nd.c0, nd.c1} {
						if ch >= 0 {
							k++
						}
					}
					want := Stats{Calls: 1, Steps: 1, Received: N * k, Reduced: N * k}
					if nd.parent >= 0 {
						want.Sent = N
					}
					if r == root && handOff == 1 {
						want.Received += N
					}
					if r == p-1 && handOff == 1 {
						want.Sent = N
					}
					want.Rounds = want.Received
					if s != want {
						t.Errorf("reduce %s rank %d (%+v): %+v, want %+v", what, r, nd, s, want)
					}
				}
				for r, s := range stats[1] { // bcast
					nd := treeNodeOf(treeDoubly, p, r)
					want := Stats{Calls: 1, Steps: 1, Rounds: N, Received: N}
					if nd.c0 >= 0 && nd.c0 != root || nd.c1 >= 0 && nd.c1 != root {
						want.Sent = N
					}
					if r == root {
						want = Stats{Calls: 1, Steps: 1, Sent: N}
					}
					if s != want {
						t.Errorf("bcast %s rank %d (%+v): %+v, want %+v", what, r, nd, s, want)
					}
				}
			}
			// The block count of the pipelining lemma: rank 0 is a leaf
			// that receives (or sends) each block once.
			m := 1 << 17
			n := machineCost.blocks(rootedLead(p, root), 8*m, m, machineCost.beta)
			nr := machineCost.blocks(rootedLead(p, root), 8*m, m, machineCost.beta+machineCost.gamma)
			stats := treeRootedStats(t, p, root, 0, m)
			if s := stats[0][0]; root != 0 && s.Sent != uint64(nr) {
				t.Errorf("reduce p=%d root %d: rank 0 sent %d blocks, the lemma gives %d", p, root, s.Sent, nr)
			}
			if s := stats[1][0]; root != 0 && s.Received != uint64(n) {
				t.Errorf("bcast p=%d root %d: rank 0 received %d blocks, the lemma gives %d", p, root, s.Received, n)
			}
		}
	}
}

// treeRootedStats runs Tree's reduce and bcast of m float64 to root with
// nb blocks (0: the lemma's) in one segment and returns every rank's
// counts of each.
func treeRootedStats(t *testing.T, p, root, nb, m int) [2][]Stats {
	t.Helper()
	defer setTestBlocks(nb)()
	opt := pinAll(Tree)
	opt.SlotBytes = max(1<<16, 16*m) // one segment
	stats := [2][]Stats{make([]Stats, p), make([]Stats, p)}
	err := Run(p, opt, func(c *Comm) error {
		var out []float64
		if c.Rank() == root {
			out = make([]float64, m)
		}
		if err := Reduce(bg, c, make([]float64, m), out, Sum, root); err != nil {
			return err
		}
		stats[0][c.Rank()], _ = c.Stats()
		if err := Bcast(bg, c, make([]float64, m), root); err != nil {
			return err
		}
		stats[1][c.Rank()], _ = c.Stats()
		return nil
	})
	if err != nil {
		t.Fatalf("p=%d root %d: %v", p, root, err)
	}
	return stats
}

// treeRootedRounds is the number of rounds Tree's reduce or bcast of n
// blocks takes when every rank handles one block a round and takes a block
// in the round after its sources have it (the children's partial blocks,
// or the parent's block; rank p-1 hands the result to the root, or takes
// the blocks from it).
func treeRootedRounds(p, root, n int, bcast bool) int {
	done := make([][]int, p) // round at whose end rank r has block b
	var at func(r, b int) int
	at = func(r, b int) int {
		if done[r] == nil {
			done[r] = make([]int, n)
			for i := range done[r] {
				done[r][i] = -1
			}
		}
		if done[r][b] >= 0 {
			return done[r][b]
		}
		nd := treeNodeOf(treeDoubly, p, r)
		ready := 0 // when its sources have block b
		if b > 0 {
			ready = at(r, b-1)
		}
		var srcs []int
		switch {
		case bcast && r == root:
			done[r][b] = 0
			return 0
		case bcast && nd.parent < 0:
			srcs = []int{root}
		case bcast:
			srcs = []int{nd.parent}
		default:
			srcs = []int{nd.c0, nd.c1}
		}
		for _, q := range srcs {
			if q >= 0 {
				ready = max(ready, at(q, b))
			}
		}
		done[r][b] = ready + 1
		return ready + 1
	}
	if bcast {
		rounds := 0
		for r := range p {
			rounds = max(rounds, at(r, n-1))
		}
		return rounds
	}
	// The reduce: rank p-1 has result block b when its children's partial
	// blocks are in (it reduces them in the round it takes them); a root
	// other than p-1 takes it one round later.
	last := 0
	nd := treeNodeOf(treeDoubly, p, p-1)
	for _, q := range []int{nd.c0, nd.c1} {
		if q >= 0 {
			last = max(last, at(q, n-1))
		}
	}
	if root != p-1 {
		last++
	}
	return last
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
