package collectives

import (
	"fmt"
	"slices"
	"testing"
)

// symState is a symbolic run of a schedule: every position of every
// buffer of every rank holds the list of the ranks whose inputs it
// combines, in operand order (nil: undefined).
type symState [][2][][]int

// symRun runs s on the initial state in the semantics of runSchedule: a
// read of round t sees the peer's state after its rounds before t (the
// builder guarantees that nobody overwrites it earlier), and a rank's own
// reads of one round apply in order.
func symRun(t *testing.T, s *schedule, st symState) {
	t.Helper()
	for rd := range s.nrounds {
		snap := make(symState, s.p)
		for r := range st {
			for b := range 2 {
				snap[r][b] = slices.Clone(st[r][b])
			}
		}
		for r := range s.p {
			rs := s.ranks[r]
			if rd >= len(rs.rounds) {
				continue
			}
			for _, x := range rs.rounds[rd] {
				for i := range int(x.phi - x.plo) {
					pv := snap[x.from][x.pbuf][int(x.plo)+i]
					if pv == nil {
						t.Fatalf("p=%d round %d: rank %d reads undefined position %d of rank %d", s.p, rd, r, int(x.plo)+i, x.from)
					}
					ov := st[r][x.obuf][int(x.olo)+i]
					var v []int
					switch x.op {
					case xCopy:
						v = slices.Clone(pv)
					case xReduce:
						v = append(slices.Clone(ov), pv...)
					case xReduceRev:
						v = append(slices.Clone(pv), ov...)
					}
					if x.op != xCopy && ov == nil {
						t.Fatalf("p=%d round %d: rank %d reduces into undefined position %d", s.p, rd, r, int(x.olo)+i)
					}
					st[r][x.dbuf][int(x.dlo)+i] = v
				}
			}
		}
	}
}

func newSym(p, npos int) symState {
	st := make(symState, p)
	for r := range st {
		st[r][0] = make([][]int, npos)
		st[r][1] = make([][]int, npos)
	}
	return st
}

// symFull sets every position of every rank's W to the rank itself.
func symFull(p, npos int) symState {
	st := newSym(p, npos)
	for r := range st {
		for i := range npos {
			st[r][0][i] = []int{r}
		}
	}
	return st
}

var allRanksCache = map[int][]int{}

func allRanks(p int) []int {
	if v, ok := allRanksCache[p]; ok {
		return v
	}
	v := make([]int, p)
	for i := range v {
		v[i] = i
	}
	allRanksCache[p] = v
	return v
}

// checkReduced checks that v combines every rank once, in rank order if
// ordered.
func checkReduced(t *testing.T, what string, v []int, p int, ordered bool) {
	t.Helper()
	got := slices.Clone(v)
	if !ordered {
		slices.Sort(got)
	}
	if !slices.Equal(got, allRanks(p)) {
		t.Fatalf("%s: combines %v", what, v)
	}
}

// schedPs are the rank counts the schedule tests cover.
func schedPs() []int {
	ps := []int{}
	for p := 1; p <= 24; p++ {
		ps = append(ps, p)
	}
	ps = append(ps, 31, 32, 33, 64)
	if testing.Short() {
		ps = []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 15, 16, 17, 31, 32}
	}
	if long {
		ps = append(ps, 63, 65, 100, 127, 128)
	}
	return ps
}

func ceilLog2(p int) int {
	l := floorLog2(p)
	if 1<<l < p {
		l++
	}
	return l
}

func countAcks(s *schedule) int {
	n := 0
	for _, rs := range s.ranks {
		for _, rd := range rs.rounds {
			for _, x := range rd {
				n += len(x.acks)
			}
		}
	}
	return n
}

// TestRabenseifnerSchedules checks every Rabenseifner schedule
// symbolically (results, rank order) and its counts against 001: for p a
// power of two, the butterfly allreduce takes 2 log2 p rounds, receives
// 2(p-1) and reduces p-1 blocks per rank, the reduce-scatter log2 p rounds
// and p-1 blocks; the full-buffer exchange log2 p rounds of p blocks.
// Otherwise see the bounds below.
func TestRabenseifnerSchedules(t *testing.T) {
	for _, p := range schedPs() {
		L := floorLog2(p)
		P := 1 << L
		for _, elim21 := range []bool{false, true} {
			for h := 0; h <= L; h++ {
				what := fmt.Sprintf("p=%d elim21=%v h=%d", p, elim21, h)
				s := rabSchedule(p, elim21, h, CollAllreduce, 0)
				st := symFull(p, P)
				symRun(t, s, st)
				for r := range p {
					out := st[r][s.ranks[r].out]
					for i := range P {
						checkReduced(t, fmt.Sprintf("%s allreduce rank %d position %d", what, r, i), out[i], p, true)
					}
				}
				if p == P && h == L && p > 1 {
					// The last allgather level's half goes straight to
					// the user's buffer: half the result is copied out of
					// the slot.
					for r, rs := range s.ranks {
						n := 0
						for _, rg := range rs.slotOut {
							n += int(rg[1] - rg[0])
						}
						if n != P/2 {
							t.Errorf("%s rank %d: %d positions copied from the slot, want %d", what, r, n, P/2)
						}
						// The first level's reduction is fused with the
						// copy-in: only the half sent is copied in.
						n = 0
						for _, rg := range rs.slotIn {
							n += int(rg[1] - rg[0])
						}
						if n != P/2 {
							t.Errorf("%s rank %d: %d positions copied in, want %d", what, r, n, P/2)
						}
					}
				}
				if p == P {
					for r, rs := range s.ranks {
						want := Stats{Rounds: uint64(2 * h), Received: uint64(2*(P-P>>h) + (L-h)*(P>>h)), Reduced: uint64(P - P>>h + (L-h)*(P>>h))}
						want.Sent = want.Received
						if p == 1 {
							want = Stats{}
						}
						if want.Rounds += uint64(L - h); rs.stats != want {
							t.Errorf("%s rank %d: %+v, want %+v", what, r, rs.stats, want)
						}
					}
				} else if h == L {
					// 001: a rank that is never eliminated sends and
					// receives less than 3 buffers and reduces less than
					// 1.5 (3-to-2; 2 with 2-to-1 here).
					red := 3 * P / 2
					if elim21 {
						red = 2 * P
					}
					for r, rs := range s.ranks {
						st := rs.stats
						if !s.eliminated[r] && (st.Received >= uint64(3*P) || st.Reduced > uint64(red)) {
							t.Errorf("%s rank %d: %+v beyond the bounds", what, r, st)
						}
					}
				}
				// 001: 2 ceil(log2 p) rounds for the butterfly,
				// ceil(log2 p) + 1 for the full-buffer exchange with
				// elimination (the triples' second rounds overlap the
				// next level), and in between for the mixed protocol.
				if rounds := L + h + 2*(ceilLog2(p)-L); s.nrounds != rounds {
					t.Errorf("%s: %d rounds, want %d", what, s.nrounds, rounds)
				}
				if h == L && (p == P || elim21) && countAcks(s) != 0 {
					t.Errorf("%s: the butterfly needs %d acknowledgements, want none", what, countAcks(s))
				}
				for _, root := range []int{0, p - 1, p / 2} {
					s := rabSchedule(p, elim21, h, CollReduce, root)
					st := symFull(p, P)
					symRun(t, s, st)
					out := st[root][s.ranks[root].out]
					for i := range P {
						checkReduced(t, fmt.Sprintf("%s reduce root %d position %d", what, root, i), out[i], p, true)
					}
					// The gather ends at the root unless it was
					// eliminated: one round less than the allreduce.
					rounds := L + h + 2*(ceilLog2(p)-L)
					if p != P && !s.eliminated[root] {
						rounds--
					}
					if s.nrounds != rounds {
						t.Errorf("%s reduce root %d: %d rounds, want %d", what, root, s.nrounds, rounds)
					}
				}
			}
			s := rabSchedule(p, elim21, L, CollReduceScatter, 0)
			st := symFull(p, P)
			symRun(t, s, st)
			seen := make([]int, p)
			for i, bl := range s.posBlocks {
				for _, r := range bl {
					seen[r]++
					checkReduced(t, fmt.Sprintf("p=%d elim21=%v reduce-scatter rank %d position %d", p, elim21, r, i), st[r][bufW][i], p, true)
				}
			}
			for r, n := range seen {
				if n != 1 {
					t.Fatalf("p=%d: block %d in %d positions", p, r, n)
				}
			}
			if p == P && p > 1 {
				for r, rs := range s.ranks {
					want := Stats{Rounds: uint64(L), Sent: uint64(P - 1), Received: uint64(P - 1), Reduced: uint64(P - 1)}
					if rs.stats != want {
						t.Errorf("p=%d reduce-scatter rank %d: %+v, want %+v", p, r, rs.stats, want)
					}
				}
			}
		}
	}
}
