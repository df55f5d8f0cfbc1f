package collectives

import (
	"fmt"
	"testing"
)

// TestMSTSchedules checks the MST schedules symbolically and their counts
// against 003: ceil(log2 p) rounds; bcast and reduce p-1 messages in all
// (one per non-root rank), scatter and gather p-1 blocks in and out of the
// root; reduce in rank order.
func TestMSTSchedules(t *testing.T) {
	for _, p := range schedPs() {
		if p == 1 {
			continue
		}
		q := ceilLog2(p)
		for _, root := range []int{0, p - 1, p / 2, 1} {
			what := fmt.Sprintf("p=%d root %d", p, root)
			s := mstSchedule(p, root, CollBcast)
			st := newSym(p, 1)
			st[root][bufW][0] = []int{root}
			symRun(t, s, st)
			var sent, recv uint64
			for r := range p {
				if v := st[r][bufW][0]; len(v) != 1 || v[0] != root {
					t.Fatalf("%s bcast rank %d: %v", what, r, v)
				}
				sent += s.ranks[r].stats.Sent
				recv += s.ranks[r].stats.Received
			}
			if s.nrounds != q || sent != uint64(p-1) || recv != uint64(p-1) || s.ranks[root].stats.Sent > uint64(q) {
				t.Errorf("%s bcast: %d rounds, %d sent, %d received, root %+v", what, s.nrounds, sent, recv, s.ranks[root].stats)
			}

			s = mstSchedule(p, root, CollReduce)
			st = symFull(p, 1)
			symRun(t, s, st)
			checkReduced(t, what+" reduce", st[root][bufW][0], p, true)
			if s.nrounds != q || s.ranks[root].stats.Reduced > uint64(q) {
				t.Errorf("%s reduce: %d rounds, root %+v", what, s.nrounds, s.ranks[root].stats)
			}

			s = mstSchedule(p, root, CollScatter)
			st = newSym(p, p)
			for j := range p {
				if j != root {
					st[root][bufW][j] = []int{j}
				}
			}
			symRun(t, s, st)
			for r := range p {
				if v := st[r][bufW][r]; r != root && (len(v) != 1 || v[0] != r) {
					t.Fatalf("%s scatter rank %d: %v", what, r, v)
				}
			}
			if s.nrounds != q || s.ranks[root].stats.Sent != uint64(p-1) {
				t.Errorf("%s scatter: %d rounds, root %+v", what, s.nrounds, s.ranks[root].stats)
			}

			s = mstSchedule(p, root, CollGather)
			st = newSym(p, p)
			for r := range p {
				if r != root {
					st[r][bufW][r] = []int{r}
				}
			}
			symRun(t, s, st)
			for j := range p {
				if v := st[root][bufW][j]; j != root && (len(v) != 1 || v[0] != j) {
					t.Fatalf("%s gather block %d: %v", what, j, v)
				}
			}
			if s.nrounds != q || s.ranks[root].stats.Received != uint64(p-1) {
				t.Errorf("%s gather: %d rounds, root %+v", what, s.nrounds, s.ranks[root].stats)
			}
		}
	}
}

func TestMSTMatrix(t *testing.T) { testSchedMatrix(t, MST) }
