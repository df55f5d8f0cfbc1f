package collectives

import (
	"fmt"
	"testing"

	"github.com/shmcoll/shmcoll/circulant"
)

// TestCirculantCounts asserts the instrumented per-call counts against
// Träff (000): reduce-scatter ceil(log2 p) rounds and p-1 blocks sent,
// received and reduced; allreduce 2 ceil(log2 p) rounds, 2(p-1) blocks
// sent and received, p-1 reduced; allgather ceil(log2 p) rounds, p-1
// blocks, none reduced. One segment per call; with S segments every count
// is S times as large.
func TestCirculantCounts(t *testing.T) {
	ps := []int{2, 3, 4, 5, 6, 7, 8, 9, 16, 17, 31, 32, 33}
	if long {
		ps = append(ps, 64, 100)
	}
	for _, p := range ps {
		q := uint64(circulant.CeilLog2(p))
		b := uint64(p - 1)
		opt := pinAll(Circulant)
		opt.SlotBytes = 16 << 10 // halves of 1024 float64: one segment below
		err := Run(p, opt, func(c *Comm) error {
			check := func(what string, segs uint64, want Stats) {
				last, _ := c.Stats()
				want.Calls = 1
				want.Steps = segs
				want.Rounds *= segs
				want.Sent *= segs
				want.Received *= segs
				want.Reduced *= segs
				if last != want {
					t.Errorf("p=%d rank %d %s: stats %+v, want %+v", p, c.Rank(), what, last, want)
				}
			}
			n := 3
			if err := ReduceScatterBlock(bg, c, make([]float64, p*n), make([]float64, n), Sum); err != nil {
				return err
			}
			check("reduce_scatter_block", 1, Stats{Rounds: q, Sent: b, Received: b, Reduced: b})
			if err := Allreduce(bg, c, make([]float64, p*n), make([]float64, p*n), Sum); err != nil {
				return err
			}
			check("allreduce", 1, Stats{Rounds: 2 * q, Sent: 2 * b, Received: 2 * b, Reduced: b})
			if err := Allgather(bg, c, make([]float64, n), make([]float64, p*n)); err != nil {
				return err
			}
			check("allgather", 1, Stats{Rounds: q, Sent: b, Received: b})
			// Three segments.
			if err := Allreduce(bg, c, make([]float64, 2600), make([]float64, 2600), Sum); err != nil {
				return err
			}
			check("allreduce 2600", 3, Stats{Rounds: 2 * q, Sent: 2 * b, Received: 2 * b, Reduced: b})
			if err := Barrier(bg, c); err != nil {
				return err
			}
			check("barrier", 1, Stats{Rounds: q})
			a2a, err := circulant.NewAlltoallPlan(p, c.Rank(), nil)
			if err != nil {
				return err
			}
			rounds, blocks := a2a.Counts()
			if err := Alltoall(bg, c, make([]float64, p), make([]float64, p)); err != nil {
				return err
			}
			check("alltoall", 1, Stats{Rounds: uint64(rounds), Sent: uint64(blocks), Received: uint64(blocks)})
			if rounds != int(q) {
				t.Errorf("p=%d: alltoall in %d rounds, want %d", p, rounds, q)
			}
			return nil
		})
		if err != nil {
			t.Fatal(fmt.Errorf("p=%d: %w", p, err))
		}
	}
}
