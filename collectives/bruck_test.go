package collectives

import "testing"

// TestBruckSchedules: ceil(log2 p) rounds, p-1 blocks received per rank,
// every block in place after the rotation.
func TestBruckSchedules(t *testing.T) {
	for _, p := range schedPs() {
		s := bruckSchedule(p, false)
		st := newSym(p, p)
		for r := range p {
			st[r][bufW][0] = []int{r}
		}
		symRun(t, s, st)
		for r := range p {
			for i := range p {
				if v := st[r][bufW][i]; len(v) != 1 || v[0] != (r+i)%p {
					t.Fatalf("p=%d bruck rank %d R[%d]: %v", p, r, i, v)
				}
			}
			q := uint64(ceilLog2(p))
			if want := (Stats{Rounds: q, Sent: uint64(p - 1), Received: uint64(p - 1)}); s.ranks[r].stats != want {
				t.Errorf("p=%d bruck rank %d: %+v, want %+v", p, r, s.ranks[r].stats, want)
			}
		}
		if countAcks(s) != 0 {
			t.Errorf("p=%d bruck: acknowledgements", p)
		}
	}
}

func TestBruckMatrix(t *testing.T) { testSchedMatrix(t, Bruck) }
