package collectives

import (
	"fmt"
	"testing"

	"github.com/shmcoll/shmcoll/circulant"
)

// TestSkipSequences runs the circulant algorithms with every skip sequence
// circulant offers (000, Corollary 2) and checks results and round counts.
func TestSkipSequences(t *testing.T) {
	seqs := map[string]func(int) []int{
		"power-of-two": circulant.PowerOfTwoSkips,
		"linear":       circulant.LinearSkips,
		"sqrt":         circulant.SqrtSkips,
	}
	for name, skips := range seqs {
		for _, p := range []int{2, 3, 5, 6, 11, 17} {
			opt := pinAll(Circulant)
			opt.Skips = skips
			q := uint64(len(skips(p)) - 1)
			err := Run(p, opt, func(c *Comm) error {
				r := c.Rank()
				n := 2*p + 1
				got := make([]int32, n)
				if err := Allreduce(bg, c, vec(r, n), got, Sum); err != nil {
					return err
				}
				expect(t, fmt.Sprintf("%s p=%d allreduce", name, p), got, sumAll(p, n))
				last, _ := c.Stats()
				if last.Rounds != 2*q || last.Reduced != uint64(p-1) {
					t.Errorf("%s p=%d: %d rounds, %d blocks reduced; want %d, %d", name, p, last.Rounds, last.Reduced, 2*q, p-1)
				}
				blk := make([]int32, 3)
				if err := ReduceScatterBlock(bg, c, vec(r, 3*p), blk, Sum); err != nil {
					return err
				}
				expect(t, fmt.Sprintf("%s p=%d reduce_scatter_block", name, p), blk, sumAll(p, 3*p)[3*r:3*r+3])
				ag := make([]int32, 2*p)
				if err := Allgather(bg, c, vec(r, 2), ag); err != nil {
					return err
				}
				for j := range p {
					expect(t, fmt.Sprintf("%s p=%d allgather", name, p), ag[2*j:2*j+2], vec(j, 2))
				}
				b := vec(r, 5)
				if err := Bcast(bg, c, b, p-1); err != nil {
					return err
				}
				expect(t, fmt.Sprintf("%s p=%d bcast", name, p), b, vec(p-1, 5))
				var out []int32
				if r == 1 {
					out = make([]int32, 5)
				}
				if err := Reduce(bg, c, vec(r, 5), out, Sum, 1); err != nil {
					return err
				}
				if out != nil {
					expect(t, fmt.Sprintf("%s p=%d reduce", name, p), out, sumAll(p, 5))
				}
				a2r := make([]int32, p)
				a2s := make([]int32, p)
				for j := range a2s {
					a2s[j] = int32(100*r + j)
				}
				if err := Alltoall(bg, c, a2s, a2r); err != nil {
					return err
				}
				for j, x := range a2r {
					if x != int32(100*j+r) {
						t.Errorf("%s p=%d alltoall: [%d] = %d", name, p, j, x)
						break
					}
				}
				return Barrier(bg, c)
			})
			if err != nil {
				t.Fatalf("%s p=%d: %v", name, p, err)
			}
		}
	}
}

// TestAlgorithmOverride: SHMCOLL_ALGO_<COLL> pins, Options.Algorithms
// overrides it, and a bad value is an error.
func TestAlgorithmOverride(t *testing.T) {
	t.Setenv("SHMCOLL_ALGO_ALLREDUCE", "flat")
	t.Setenv("SHMCOLL_ALGO_REDUCE_SCATTER_BLOCK", "circulant")
	check := func(opt Options, want Algorithm) {
		t.Helper()
		err := Run(3, opt, func(c *Comm) error {
			// 1 MiB would select flat, 8 B circulant: the pin decides.
			for _, n := range []int{1, 1 << 17} {
				if err := Allreduce(bg, c, make([]float64, n), make([]float64, n), Sum); err != nil {
					return err
				}
				if c.desc.alg() != want {
					t.Errorf("n=%d: allreduce ran %v, want %v", n, c.desc.alg(), want)
				}
			}
			if err := ReduceScatterBlock(bg, c, make([]float64, 3<<16), make([]float64, 1<<16), Sum); err != nil {
				return err
			}
			if c.desc.alg() != Circulant {
				t.Errorf("reduce_scatter_block ran %v, want circulant", c.desc.alg())
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	check(Options{}, Flat)
	check(Options{Algorithms: map[Collective]Algorithm{CollAllreduce: Circulant}}, Circulant)
	t.Setenv("SHMCOLL_ALGO_BCAST", "nonsense")
	if _, err := NewLocal(2, Options{}); err == nil {
		t.Error("SHMCOLL_ALGO_BCAST=nonsense accepted")
	}
}
