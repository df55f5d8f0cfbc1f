package collectives

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/shmcoll/shmcoll/simd"
)

// The pair loop (p = 2 under the Rabenseifner family) with slots large
// enough for several chunks per half and vectors of several segments,
// counts that split unevenly into halves, chunks and pieces: exact integer
// sums, float sums bitwise equal on both ranks and to the reference, rank
// order under a non-commutative operator, in place, and irregular blocks
// with an empty one.

// pairOpts pins alg for the reductions with 1 MiB slots: a 512 KiB slot
// half, so that allreduce halves and reduce-scatter pieces have several
// chunks each.
func pairOpts(alg Algorithm) Options {
	o := pinAll(alg)
	o.SlotBytes = 1 << 20
	return o
}

func TestPairLoop(t *testing.T) {
	counts := []int{0, 1, 7, 8191, 65537, 300007}
	if testing.Short() {
		counts = []int{1, 65537, 300007}
	}
	for _, alg := range []Algorithm{Rabenseifner, Rabenseifner21, RabenseifnerOdd} {
		err := Run(2, pairOpts(alg), func(c *Comm) error {
			r := c.Rank()
			for _, n := range counts {
				what := fmt.Sprintf("%v n=%d rank %d", alg, n, r)
				got := make([]int32, n)
				if err := Allreduce(bg, c, vec(r, n), got, Sum); err != nil {
					return err
				}
				expect(t, what+" allreduce", got, sumAll(2, n))
				if c.LastAlgorithm() != alg {
					t.Errorf("%s: ran %v", what, c.LastAlgorithm())
				}
				inPlace := vec(r, n)
				if err := Allreduce(bg, c, nil, inPlace, Sum); err != nil {
					return err
				}
				expect(t, what+" allreduce in place", inPlace, sumAll(2, n))

				whole := sumAll(2, 2*n)
				blk := make([]int32, n)
				if err := ReduceScatterBlock(bg, c, vec(r, 2*n), blk, Sum); err != nil {
					return err
				}
				expect(t, what+" reduce_scatter_block", blk, whole[r*n:(r+1)*n])
				buf := vec(r, 2*n)
				if err := ReduceScatterBlock(bg, c, nil, buf, Sum); err != nil {
					return err
				}
				expect(t, what+" reduce_scatter_block in place", buf[r*n:(r+1)*n], whole[r*n:(r+1)*n])

				// Irregular: one block empty, or the two far apart.
				for _, cs := range [][]int{{2 * n, 0}, {0, 2 * n}, {n/3 + 1, 2*n - n/3 - 1}} {
					if cs[0] < 0 || cs[1] < 0 {
						continue
					}
					part := make([]int32, cs[r])
					if err := ReduceScatter(bg, c, vec(r, 2*n), part, cs, Sum); err != nil {
						return err
					}
					lo := 0
					if r == 1 {
						lo = cs[0]
					}
					expect(t, fmt.Sprintf("%s reduce_scatter %v", what, cs), part, whole[lo:lo+cs[r]])
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestPairLoopFloats: float64 sums of values whose sum rounds, bitwise the
// same on both ranks and equal to rank 0's value + rank 1's; NaN, ±Inf and
// -0 among them.
func TestPairLoopFloats(t *testing.T) {
	n := 200003
	in := [2][]float64{make([]float64, n), make([]float64, n)}
	for r := range in {
		for i := range in[r] {
			in[r][i] = float64(i%977)*0.1 + float64(r)/3 + 1e16*float64((i+r)%3)
		}
	}
	specials := []float64{math.NaN(), math.Inf(1), math.Inf(-1), math.Copysign(0, -1)}
	for k, v := range specials {
		in[0][n/2+k] = v
		in[1][n-1-k] = v
	}
	want := make([]float64, n)
	for i := range want {
		want[i] = in[0][i] + in[1][i]
	}
	got := [2][]float64{make([]float64, n), make([]float64, n)}
	err := Run(2, pairOpts(Rabenseifner), func(c *Comm) error {
		return Allreduce(bg, c, in[c.Rank()], got[c.Rank()], Sum)
	})
	if err != nil {
		t.Fatal(err)
	}
	for r := range got {
		for i := range want {
			if math.Float64bits(got[r][i]) != math.Float64bits(want[i]) && !(math.IsNaN(got[r][i]) && math.IsNaN(want[i])) {
				t.Fatalf("rank %d element %d: %v, want %v", r, i, got[r][i], want[i])
			}
			if math.Float64bits(got[r][i]) != math.Float64bits(got[1-r][i]) {
				t.Fatalf("element %d differs between the ranks: %v, %v", i, got[0][i], got[1][i])
			}
		}
	}
}

// TestPairLoopNonCommutative: rank 0's operand on the left in every
// chunk, with the affine operator (composition of maps), in place too.
func TestPairLoopNonCommutative(t *testing.T) {
	n := 70001 // 16-byte elements: several segments and chunks
	in := [][]simd.Int64Int64{affineIn(0, 2*n), affineIn(1, 2*n)}
	want := refReduce(t, affine, in)
	err := Run(2, pairOpts(Rabenseifner), func(c *Comm) error {
		r := c.Rank()
		got := make([]simd.Int64Int64, 2*n)
		if err := Allreduce(bg, c, in[r], got, affine); err != nil {
			return err
		}
		expect(t, fmt.Sprintf("rank %d allreduce", r), got, want)
		blk := make([]simd.Int64Int64, n)
		if err := ReduceScatterBlock(bg, c, in[r], blk, affine); err != nil {
			return err
		}
		expect(t, fmt.Sprintf("rank %d reduce_scatter_block", r), blk, want[r*n:(r+1)*n])
		// In place: the result overwrites the input, which is the right
		// operand on rank 1.
		buf := slices.Clone(in[r])
		if err := Allreduce(bg, c, nil, buf, affine); err != nil {
			return err
		}
		expect(t, fmt.Sprintf("rank %d allreduce in place", r), buf, want)
		buf = slices.Clone(in[r])
		if err := ReduceScatterBlock(bg, c, nil, buf, affine); err != nil {
			return err
		}
		expect(t, fmt.Sprintf("rank %d reduce_scatter_block in place", r), buf[r*n:(r+1)*n], want[r*n:(r+1)*n])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
