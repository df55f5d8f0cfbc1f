package circulant

import "testing"

// TestAlltoall runs every rank's plan against the others with blocks
// tagged (source, destination) and checks that each block arrives exactly
// where the plan says, and at the end at its destination.
func TestAlltoall(t *testing.T) {
	type blk struct{ src, dst int }
	maxP := 130
	if testing.Short() {
		maxP = 40
	}
	for p := 1; p <= maxP; p++ {
		for _, skips := range [][]int{nil, PowerOfTwoSkips(p), SqrtSkips(p)} {
			plans := make([]*AlltoallPlan, p)
			buf := make([][]blk, p)
			for r := range plans {
				pl, err := NewAlltoallPlan(p, r, skips)
				if err != nil {
					t.Fatal(err)
				}
				plans[r] = pl
				buf[r] = make([]blk, p)
				for j := range buf[r] {
					buf[r][j] = blk{r, (r + j) % p}
				}
			}
			for k := range plans[0].Rounds {
				next := make([][]blk, p)
				for r := range next {
					next[r] = append([]blk(nil), buf[r]...)
				}
				for r, pl := range plans {
					rd := pl.Rounds[k]
					peer := plans[rd.From].Rounds[k]
					if peer.To != r {
						t.Fatalf("p=%d round %d: rank %d expects from %d, which sends to %d", p, k, r, rd.From, peer.To)
					}
					for b, j := range rd.Positions {
						got := buf[rd.From][j]
						slot := peer.Slots[b]
						want := blk{(rd.From + slot - j + 2*p) % p, (rd.From + slot) % p}
						if got != want {
							t.Fatalf("p=%d round %d: rank %d position %d holds %v, plan says %v", p, k, rd.From, j, got, want)
						}
						next[r][j] = got
					}
				}
				buf = next
			}
			for r := range buf {
				for j, b := range buf[r] {
					if b != (blk{(r - j + p) % p, r}) {
						t.Fatalf("p=%d: rank %d position %d ends with %v", p, r, j, b)
					}
				}
			}
			rounds, blocks := plans[0].Counts()
			if skips == nil && rounds != CeilLog2(p) {
				t.Fatalf("p=%d: %d rounds", p, rounds)
			}
			if p&(p-1) == 0 && skips == nil && blocks != p/2*CeilLog2(p) {
				t.Fatalf("p=%d: %d blocks sent, want (p/2) log2 p = %d", p, blocks, p/2*CeilLog2(p))
			}
		}
	}
}
