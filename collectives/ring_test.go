package collectives

import (
	"fmt"
	"testing"
)

// TestRingSchedules checks the ring schedules symbolically and their
// counts against 003: reduce-scatter and allgather p-1 rounds and p-1
// blocks per rank, allreduce 2(p-1) rounds, 2(p-1) blocks received and
// p-1 reduced; bcast ceil(log2 p) + p-1 rounds at most. None needs an
// acknowledgement.
func TestRingSchedules(t *testing.T) {
	for _, p := range schedPs() {
		if p == 1 {
			continue
		}
		b := uint64(p - 1)
		s := ringSchedule(p, 0, CollAllreduce)
		st := symFull(p, p)
		symRun(t, s, st)
		for r := range p {
			for i := range p {
				checkReduced(t, fmt.Sprintf("p=%d ring allreduce rank %d block %d", p, r, i), st[r][bufW][i], p, false)
			}
			// Every reduction is fused with the copy-in but the block
			// the right neighbour reads first; the last allgather block
			// goes straight to the user's buffer.
			if in, out := s.ranks[r].slotIn, s.ranks[r].slotOut; len(in) != 1 || in[0][1]-in[0][0] != 1 || len(out) > 2 {
				t.Errorf("p=%d ring allreduce rank %d: copied in %v, out %v", p, r, in, out)
			}
			if want := (Stats{Rounds: 2 * b, Sent: 2 * b, Received: 2 * b, Reduced: b}); s.ranks[r].stats != want {
				t.Errorf("p=%d ring allreduce rank %d: %+v, want %+v", p, r, s.ranks[r].stats, want)
			}
		}
		s = ringSchedule(p, 0, CollReduceScatter)
		st = symFull(p, p)
		symRun(t, s, st)
		for r := range p {
			checkReduced(t, fmt.Sprintf("p=%d ring reduce-scatter rank %d", p, r), st[r][bufW][r], p, false)
			if want := (Stats{Rounds: b, Sent: b, Received: b, Reduced: b}); s.ranks[r].stats != want {
				t.Errorf("p=%d ring reduce-scatter rank %d: %+v, want %+v", p, r, s.ranks[r].stats, want)
			}
			if in := s.ranks[r].slotIn; len(in) != 1 || in[0] != [2]int32{int32(mod(r-1, p)), int32(mod(r-1, p)) + 1} {
				t.Errorf("p=%d ring reduce-scatter rank %d: copies in %v, want block %d only", p, r, in, mod(r-1, p))
			}
		}
		s = ringSchedule(p, 0, CollAllgather)
		st = newSym(p, p)
		for r := range p {
			st[r][bufW][r] = []int{r}
		}
		symRun(t, s, st)
		for r := range p {
			for j := range p {
				if v := st[r][bufW][j]; len(v) != 1 || v[0] != j {
					t.Fatalf("p=%d ring allgather rank %d block %d: %v", p, r, j, v)
				}
			}
			if want := (Stats{Rounds: b, Sent: b, Received: b}); s.ranks[r].stats != want {
				t.Errorf("p=%d ring allgather rank %d: %+v, want %+v", p, r, s.ranks[r].stats, want)
			}
		}
		for _, root := range []int{0, p - 1, p / 2} {
			s = ringSchedule(p, root, CollBcast)
			st = newSym(p, p)
			for j := range p {
				st[root][bufW][j] = []int{j}
			}
			symRun(t, s, st)
			for r := range p {
				for j := range p {
					if v := st[r][bufW][j]; len(v) != 1 || v[0] != j {
						t.Fatalf("p=%d ring bcast root %d rank %d block %d: %v", p, root, r, j, v)
					}
				}
			}
			if s.nrounds > ceilLog2(p)+p-1 {
				t.Errorf("p=%d ring bcast: %d rounds, want at most %d", p, s.nrounds, ceilLog2(p)+p-1)
			}
		}
		for _, k := range []Collective{CollAllreduce, CollReduceScatter, CollAllgather, CollBcast} {
			if n := countAcks(ringSchedule(p, 0, k)); n != 0 {
				t.Errorf("p=%d ring kind %d: %d acknowledgements", p, k, n)
			}
		}
	}
}

func TestRingMatrix(t *testing.T) { testSchedMatrix(t, Ring) }
