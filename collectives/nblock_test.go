package collectives

import (
	"errors"
	"fmt"
	"testing"

	"github.com/shmcoll/shmcoll/circulant"
	"github.com/shmcoll/shmcoll/simd"
)

// TestNblockMatrix runs the collectives nblock serves over the matrix
// (helpers_test.go: p, counts 0, 1, p-1, p, a prime larger than the 4 KiB
// slots, irregular and degenerate counts) with the block count of the cost
// model and with fixed counts that force many blocks, virtual rounds and
// capped last phases; and the whole matrix (every collective, nblock
// pinned where it serves) once.
func TestNblockMatrix(t *testing.T) {
	blocks := []int{0, 3}
	if long {
		blocks = []int{0, 1, 3, 64}
	}
	for _, n := range blocks {
		for _, p := range testSizes() {
			t.Run(fmt.Sprintf("blocks=%d/p=%d", n, p), func(t *testing.T) {
				defer setTestBlocks(n)()
				if err := Run(p, pinAll(Nblock), func(c *Comm) error { return matrixCalls(t, c, Nblock, true, nil) }); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
	for _, p := range testSizes() {
		t.Run(fmt.Sprintf("all/p=%d", p), func(t *testing.T) { runMatrix(t, p, Nblock) })
	}
}

// setTestBlocks fixes the block count (0: the cost model's) and returns
// the function that restores it.
func setTestBlocks(n int) func() {
	old := testBlocks
	testBlocks = n
	return func() { testBlocks = old }
}

// TestNblockCounts asserts the instrumented counts against Träff (004):
// with n blocks the bcast, reduce, allgatherv and reduce-scatter take
// n-1+q rounds, q = ceil(log2 p), of which a rank waits in at most n-1+q;
// a non-root receives each block of a bcast exactly once and exposes each
// partial block of a reduce exactly once; in the allgatherv a rank receives
// each block of every other root once, in the reduce-scatter it exposes
// each partial block of every other root's part once; every block exposed
// is read by exactly one rank. The allreduce is the reduce-scatter of p
// parts followed by their allgatherv: two steps of n-1+q rounds.
func TestNblockCounts(t *testing.T) {
	ps := []int{2, 3, 4, 5, 7, 8, 9, 16, 17, 33}
	if long {
		ps = append(ps, 31, 32, 64, 100)
	}
	for _, p := range ps {
		q := circulant.CeilLog2(p)
		for _, n := range []int{1, 2, q, 2*q + 1, 3*q + 2} {
			t.Run(fmt.Sprintf("p=%d/n=%d", p, n), func(t *testing.T) { nblockCounts(t, p, n, q) })
		}
	}
}

func nblockCounts(t *testing.T, p, n, q int) {
	defer setTestBlocks(n)()
	R := uint64(n - 1 + q)
	N := uint64(n)
	P := uint64(p)
	type coll struct {
		name string
		run  func(c *Comm) error
		// want checks one rank's stats; sent and received must be
		// equal when summed over the ranks, and equal total.
		want  func(r int, s Stats) string
		total uint64
	}
	root := p / 2
	m := 8 * n // elements per block of a root: n blocks of 8
	deg := make([]int, p)
	deg[root] = m
	colls := []coll{
		{"bcast", func(c *Comm) error { return Bcast(bg, c, make([]float64, m), root) },
			func(r int, s Stats) string {
				want := N
				if r == root {
					want = 0
				}
				if s.Received != want || s.Rounds != want || s.Rounds > R || s.Sent > R || s.Reduced != 0 {
					return fmt.Sprintf("want %d blocks received in as many rounds (<= %d), <= %d sent", want, R, R)
				}
				return ""
			}, (P - 1) * N},
		{"reduce", func(c *Comm) error {
			var out []float64
			if c.Rank() == root {
				out = make([]float64, m)
			}
			return Reduce(bg, c, make([]float64, m), out, Sum, root)
		}, func(r int, s Stats) string {
			want := N
			if r == root {
				want = 0
			}
			if s.Sent != want || s.Received != s.Reduced || s.Rounds != s.Received || s.Rounds > R {
				return fmt.Sprintf("want %d blocks sent, every block received reduced, <= %d rounds", want, R)
			}
			return ""
		}, (P - 1) * N},
		{"allgather", func(c *Comm) error { return Allgather(bg, c, make([]float64, m), make([]float64, p*m)) },
			func(r int, s Stats) string {
				if s.Received != (P-1)*N || s.Rounds > R || s.Reduced != 0 {
					return fmt.Sprintf("want %d blocks received in <= %d rounds", (P-1)*N, R)
				}
				return ""
			}, P * (P - 1) * N},
		{"allgatherv degenerate", func(c *Comm) error {
			return Allgatherv(bg, c, make([]float64, deg[c.Rank()]), make([]float64, m), deg, nil)
		}, func(r int, s Stats) string {
			want := N
			if r == root {
				want = 0
			}
			if s.Received != want || s.Rounds != want || s.Rounds > R {
				return fmt.Sprintf("want %d blocks received in as many rounds (<= %d)", want, R)
			}
			return ""
		}, (P - 1) * N},
		{"reduce_scatter_block", func(c *Comm) error {
			return ReduceScatterBlock(bg, c, make([]float64, p*m), make([]float64, m), Sum)
		}, func(r int, s Stats) string {
			if s.Sent != (P-1)*N || s.Received != s.Reduced || s.Rounds > R {
				return fmt.Sprintf("want %d blocks sent, every block received reduced, <= %d rounds", (P-1)*N, R)
			}
			return ""
		}, P * (P - 1) * N},
		{"allreduce", func(c *Comm) error { return Allreduce(bg, c, make([]float64, p*m), make([]float64, p*m), Sum) },
			func(r int, s Stats) string {
				// The reduce-scatter exposes, the allgatherv receives
				// every block of the other parts once.
				if s.Sent < (P-1)*N || s.Received < (P-1)*N || s.Reduced != s.Received-(P-1)*N || s.Rounds > 2*R {
					return fmt.Sprintf("want >= %d blocks sent and received, all but %[1]d received reduced, <= %d rounds", (P-1)*N, 2*R)
				}
				return ""
			}, 2 * P * (P - 1) * N},
		{"reduce_scatter degenerate", func(c *Comm) error {
			return ReduceScatter(bg, c, make([]float64, m), make([]float64, deg[c.Rank()]), deg, Sum)
		}, func(r int, s Stats) string {
			want := N
			if r == root {
				want = 0
			}
			if s.Sent != want || s.Received != s.Reduced || s.Rounds > R {
				return fmt.Sprintf("want %d blocks sent, every block received reduced, <= %d rounds", want, R)
			}
			return ""
		}, (P - 1) * N},
	}
	stats := make([]Stats, p)
	opt := pinAll(Nblock)
	opt.SlotBytes = 1 << 20 // one segment
	for _, cl := range colls {
		err := Run(p, opt, func(c *Comm) error {
			if err := cl.run(c); err != nil {
				return err
			}
			stats[c.Rank()], _ = c.Stats()
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var sent, recv uint64
		steps := uint64(1)
		if cl.name == "allreduce" {
			steps = 2
		}
		for r, s := range stats {
			if s.Steps != steps {
				t.Errorf("%s rank %d: %d steps, want %d", cl.name, r, s.Steps, steps)
			}
			if msg := cl.want(r, s); msg != "" {
				t.Errorf("%s p=%d n=%d rank %d: %+v: %s", cl.name, p, n, r, s, msg)
			}
			sent += s.Sent
			recv += s.Received
		}
		if sent != cl.total || recv != cl.total {
			t.Errorf("%s p=%d n=%d: %d blocks sent and %d received in all, want %d", cl.name, p, n, sent, recv, cl.total)
		}
	}
}

// TestNblockTypes runs reduce, reduce_scatter_block (nblock) with every
// operator of a representative set of types (all of them in long mode),
// with a block count that makes several blocks per segment.
func TestNblockTypes(t *testing.T) {
	defer setTestBlocks(3)()
	tests := typeTests
	if !long {
		tests = []func(*testing.T, int, Algorithm){testType[int32], testType[uint8], testType[float64],
			testType[simd.BFloat16], testType[complex64], testType[simd.Float64Int32]}
	}
	for _, p := range []int{2, 3, 5} {
		for _, f := range tests {
			f(t, p, Nblock)
		}
	}
}

// TestNblockNonCommutative: reduce, reduce-scatter and allreduce reorder
// operands, so pinning nblock with a non-commutative operator fails on
// every rank; bcast and allgather carry no operator.
func TestNblockNonCommutative(t *testing.T) {
	for coll, call := range map[string]func(c *Comm) error{
		"reduce": func(c *Comm) error {
			return Reduce(bg, c, affineIn(c.Rank(), 6), make([]simd.Int64Int64, 6), affine, 0)
		},
		"reduce_scatter_block": func(c *Comm) error {
			return ReduceScatterBlock(bg, c, affineIn(c.Rank(), 6), make([]simd.Int64Int64, 2), affine)
		},
		"allreduce": func(c *Comm) error {
			return Allreduce(bg, c, affineIn(c.Rank(), 6), make([]simd.Int64Int64, 6), affine)
		},
	} {
		for r, err := range runAll(t, 3, pinAll(Nblock), call) {
			if !errors.Is(err, ErrNotCommutative) {
				t.Errorf("%s rank %d: %v, want ErrNotCommutative", coll, r, err)
			}
		}
	}
}

// TestNblocksModel checks the block counts of the two cost models: the
// papers' count (one block for q=1) for collectives that copy their
// segment in before the rounds, fitCost's for the reduce of one segment
// among ranks that are not oversubscribed (goroutine ranks here; processes
// in TestNblockReduceFit).
func TestNblocksModel(t *testing.T) {
	err := Run(2, Options{}, func(c *Comm) error {
		for _, tc := range []struct {
			exposes bool
			want    int
		}{{false, 1}, {true, 4}} {
			if n := c.nblocks(1, 64<<10, 8<<10, true, tc.exposes); n != tc.want {
				t.Errorf("exposes %v: %d blocks, want %d", tc.exposes, n, tc.want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ bytes, want int }{{4 << 10, 1}, {32 << 10, 3}, {64 << 10, 4}, {128 << 10, 6}} {
		if n := fitCost.blocks(1, tc.bytes, tc.bytes/8, fitCost.beta+fitCost.gamma); n != tc.want {
			t.Errorf("fitCost, %d bytes: %d blocks, want %d", tc.bytes, n, tc.want)
		}
	}
}
