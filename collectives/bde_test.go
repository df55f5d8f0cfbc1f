package collectives

import (
	"fmt"
	"testing"
)

// TestBDESchedules checks the BDE schedules symbolically and their counts
// against 003: ceil(log2 p) rounds for the reduce-scatter and for the
// allgather; for p a power of two p-1 blocks received (and reduced) per
// rank, otherwise at most one extra read per level.
func TestBDESchedules(t *testing.T) {
	for _, p := range schedPs() {
		if p == 1 {
			continue
		}
		q := uint64(ceilLog2(p))
		pow2 := p&(p-1) == 0
		s := bdeSchedule(p, CollAllreduce)
		st := symFull(p, p)
		symRun(t, s, st)
		for r := range p {
			for i := range p {
				checkReduced(t, fmt.Sprintf("p=%d bde allreduce rank %d block %d", p, r, i), st[r][bufW][i], p, false)
			}
		}
		s = bdeSchedule(p, CollReduceScatter)
		st = symFull(p, p)
		symRun(t, s, st)
		for r := range p {
			checkReduced(t, fmt.Sprintf("p=%d bde reduce-scatter rank %d", p, r), st[r][bufW][r], p, false)
			got := s.ranks[r].stats
			if s.nrounds != int(q) || got.Rounds > 2*q || (pow2 && got != Stats{Rounds: q, Sent: uint64(p - 1), Received: uint64(p - 1), Reduced: uint64(p - 1)}) {
				t.Errorf("p=%d bde reduce-scatter rank %d: %d rounds, %+v", p, r, s.nrounds, got)
			}
		}
		s = bdeSchedule(p, CollAllgather)
		st = newSym(p, p)
		for r := range p {
			st[r][bufW][r] = []int{r}
		}
		symRun(t, s, st)
		for r := range p {
			for j := range p {
				if v := st[r][bufW][j]; len(v) != 1 || v[0] != j {
					t.Fatalf("p=%d bde allgather rank %d block %d: %v", p, r, j, v)
				}
			}
			got := s.ranks[r].stats
			if s.nrounds != int(q) || (pow2 && got != Stats{Rounds: q, Sent: uint64(p - 1), Received: uint64(p - 1)}) {
				t.Errorf("p=%d bde allgather rank %d: %d rounds, %+v", p, r, s.nrounds, got)
			}
		}
		for _, k := range []Collective{CollAllreduce, CollReduceScatter, CollAllgather} {
			if n := countAcks(bdeSchedule(p, k)); n != 0 {
				t.Errorf("p=%d bde kind %d: %d acknowledgements", p, k, n)
			}
		}
	}
}

func TestBDEMatrix(t *testing.T) { testSchedMatrix(t, BDE) }
