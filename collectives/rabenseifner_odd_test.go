package collectives

import (
	"fmt"
	"math/bits"
	"testing"
)

// TestRabenseifnerOddSchedules checks the factorized schedules
// symbolically (results in rank order) and their counts: p = 2^n q,
// allreduce 2n+2 rounds (2n for q = 1), reduce-scatter n+1, every rank
// receiving (q-1) 2^n + (2^n - 1) positions in the reduce-scatter.
func TestRabenseifnerOddSchedules(t *testing.T) {
	for _, p := range schedPs() {
		if p == 1 {
			continue
		}
		n := bits.TrailingZeros(uint(p))
		G := 1 << n
		q := p / G
		extra := 0
		if q > 1 {
			extra = 1
		}
		s := rabOddSchedule(p, CollAllreduce)
		st := symFull(p, p)
		symRun(t, s, st)
		for r := range p {
			for i := range p {
				checkReduced(t, fmt.Sprintf("p=%d allreduce rank %d position %d", p, r, i), st[r][bufW][i], p, true)
			}
		}
		if s.nrounds != 2*n+2*extra {
			t.Errorf("p=%d allreduce: %d rounds, want %d", p, s.nrounds, 2*n+2*extra)
		}
		s = rabOddSchedule(p, CollReduceScatter)
		st = symFull(p, p)
		symRun(t, s, st)
		seen := make([]int, p)
		for i, bl := range s.posBlocks {
			for _, r := range bl {
				seen[r]++
				checkReduced(t, fmt.Sprintf("p=%d reduce-scatter rank %d", p, r), st[r][bufW][i], p, true)
			}
		}
		for r, k := range seen {
			if k != 1 {
				t.Fatalf("p=%d: block %d in %d positions", p, r, k)
			}
			want := uint64((q-1)*G + G - 1)
			if got := s.ranks[r].stats; got.Received != want || got.Reduced != want || got.Rounds != uint64(n+(q-1)) {
				t.Errorf("p=%d reduce-scatter rank %d: %+v, want %d received and reduced", p, r, got, want)
			}
		}
		if s.nrounds != n+extra {
			t.Errorf("p=%d reduce-scatter: %d rounds, want %d", p, s.nrounds, n+extra)
		}
		if countAcks(s) != 0 {
			t.Errorf("p=%d: acknowledgements", p)
		}
	}
}

func TestRabenseifnerOddMatrix(t *testing.T) { testSchedMatrix(t, RabenseifnerOdd) }
