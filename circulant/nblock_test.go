package circulant

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func nullable(v *int) int {
	if v == nil {
		return -1
	}
	return *v
}

func TestBroadcastTraceVectors(t *testing.T) {
	var v struct {
		Cases []struct {
			P, N, Q, X int
			NumRounds  int `json:"num_rounds"`
			Rounds     []struct {
				I, K, Skip int
				Send, Recv []*int
			}
		}
	}
	loadVectors(t, "bc_bcast_trace.json", &v)
	if len(v.Cases) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range v.Cases {
		s, _ := NewSchedules(c.P)
		if s.NumRounds(c.N) != c.NumRounds || s.VirtualRounds(c.N) != c.X || len(c.Rounds) != c.NumRounds {
			t.Fatalf("p=%d n=%d: %d rounds, x=%d; want %d, %d", c.P, c.N, s.NumRounds(c.N), s.VirtualRounds(c.N), c.NumRounds, c.X)
		}
		ranks := make([]*RankSchedule, c.P)
		for r := range ranks {
			ranks[r], _ = s.ForRank(r, 0)
		}
		for i, rd := range c.Rounds {
			k, _ := s.Round(c.N, i)
			if k != rd.K || s.Skip(k) != rd.Skip || i+c.X != rd.I {
				t.Fatalf("p=%d n=%d round %d: k=%d, want %d", c.P, c.N, i, k, rd.K)
			}
			for r := 0; r < c.P; r++ {
				br := ranks[r].BroadcastRound(c.N, i)
				if br.SendBlock != nullable(rd.Send[r]) || br.RecvBlock != nullable(rd.Recv[r]) {
					t.Errorf("p=%d n=%d round %d rank %d: send %d recv %d, want %d %d", c.P, c.N, i, r,
						br.SendBlock, br.RecvBlock, nullable(rd.Send[r]), nullable(rd.Recv[r]))
				}
				// The reduction is the same table backwards, arrows reversed.
				rr := ranks[r].ReduceRound(c.N, c.NumRounds-1-i)
				if rr.SendBlock != br.RecvBlock || rr.RecvBlock != br.SendBlock || rr.To != br.From || rr.From != br.To {
					t.Errorf("p=%d n=%d: reduce round is not the reversed broadcast round", c.P, c.N)
				}
			}
		}
	}
}

// TestBroadcastReduce verifies the broadcast and the reduction for every p
// up to 160, every root for small p, and n = 1..q+2, 2q+1, 3q+2, so that
// every number of virtual rounds occurs.
func TestBroadcastReduce(t *testing.T) {
	maxP := 160
	if testing.Short() {
		maxP = 48
	}
	for w := 0; w < 2; w++ {
		t.Run(fmt.Sprintf("part=%d", w), func(t *testing.T) {
			t.Parallel()
			for p := 1 + w; p <= maxP; p += 2 {
				q := CeilLog2(p)
				ns := []int{2*q + 1, 3*q + 2}
				for n := 1; n <= q+2; n++ {
					ns = append(ns, n)
				}
				roots := []int{0, p - 1, p / 3}
				if p <= 12 {
					roots = roots[:0]
					for r := 0; r < p; r++ {
						roots = append(roots, r)
					}
				}
				for _, n := range ns {
					for _, root := range roots {
						if err := VerifyBroadcast(p, n, root); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
		})
	}
	for _, p := range []int{255, 256, 257, 333, 1000} {
		for _, n := range []int{1, 3, 11} {
			if err := VerifyBroadcast(p, n, p/2); err != nil {
				t.Fatal(err)
			}
		}
	}
}

type collCase struct {
	P, N, Q int
	Counts  []int
	Rounds  struct {
		Broadcast     int `json:"broadcast"`
		Reduce        int `json:"reduce"`
		Allgatherv    int `json:"allgatherv"`
		ReduceScatter int `json:"reduce_scatter"`
		Allreduce     int `json:"allreduce"`
	}
	BroadcastRecv  []int `json:"broadcast_blocks_recv"`
	BroadcastSent  []int `json:"broadcast_blocks_sent"`
	ReduceSent     []int `json:"reduce_blocks_sent"`
	ReduceRecv     []int `json:"reduce_blocks_recv"`
	AllgathervSent []int `json:"allgatherv_blocks_sent"`
	AllgathervMsgs []int `json:"allgatherv_msgs"`
	RSSent         []int `json:"reduce_scatter_blocks_sent"`
	Trace          []struct {
		I, K, Skip int
		Send       [][][2]int
	} `json:"allgatherv_send_trace"`
}

func TestCollectivesVectors(t *testing.T) {
	var v struct{ Cases []collCase }
	loadVectors(t, "bc_collectives.json", &v)
	if len(v.Cases) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range v.Cases {
		s, _ := NewSchedules(c.P)
		nr := s.NumRounds(c.N)
		if nr != c.Rounds.Broadcast || nr != c.Rounds.Reduce || nr != c.Rounds.Allgatherv || nr != c.Rounds.ReduceScatter || 2*nr != c.Rounds.Allreduce {
			t.Errorf("p=%d n=%d: %d rounds, want %+v", c.P, c.N, nr, c.Rounds)
		}
		tab := s.NewTable()
		for r := 0; r < c.P; r++ {
			rs, _ := s.ForRank(r, 0)
			var bs, br, rsn, rrc, ags, agm, rss int
			for i := 0; i < nr; i++ {
				b := rs.BroadcastRound(c.N, i)
				if b.SendBlock >= 0 {
					bs++
				}
				if b.RecvBlock >= 0 {
					br++
				}
				d := rs.ReduceRound(c.N, i)
				if d.SendBlock >= 0 {
					rsn++
				}
				if d.RecvBlock >= 0 {
					rrc++
				}
				var packed [][2]int
				for j := 0; j < c.P; j++ {
					if blk := tab.AllgathervSend(r, j, c.N, i); blk >= 0 {
						packed = append(packed, [2]int{j, blk})
					}
					if tab.ReduceScatterSend(r, j, c.N, i) >= 0 {
						rss++
					}
				}
				ags += len(packed)
				if len(packed) > 0 {
					agm++
				}
				if i < len(c.Trace) {
					want := c.Trace[i].Send[r]
					if fmt.Sprint(packed) != fmt.Sprint(want) && !(len(packed) == 0 && len(want) == 0) {
						t.Errorf("p=%d n=%d round %d rank %d: packs %v, want %v", c.P, c.N, i, r, packed, want)
					}
				}
			}
			got := []int{br, bs, rsn, rrc, ags, agm, rss}
			want := []int{c.BroadcastRecv[r], c.BroadcastSent[r], c.ReduceSent[r], c.ReduceRecv[r], c.AllgathervSent[r], c.AllgathervMsgs[r], c.RSSent[r]}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("p=%d n=%d rank %d: counts %v, want %v", c.P, c.N, r, got, want)
			}
		}
		if len(c.Trace) != nr && c.P > 1 {
			t.Errorf("p=%d n=%d: trace has %d rounds", c.P, c.N, len(c.Trace))
		}
	}
}

// splitCounts splits m elements into n blocks, the first m mod n one larger.
func splitCounts(m, n int) []int {
	out := make([]int, n)
	for j := range out {
		out[j] = m / n
		if j < m%n {
			out[j]++
		}
	}
	return out
}

// TestAllgathervReduceScatterInts runs [BC] Algorithm 7 and the
// reduce-scatter with integer data on explicit per-rank buffers, using only
// the Table's public round functions, and checks exact results and
// exactly-once transfers.
func TestAllgathervReduceScatterInts(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, p := range []int{1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 18, 31, 33, 40} {
		s, _ := NewSchedules(p)
		tab := s.NewTable()
		for _, n := range []int{1, 2, 3, s.Q() + 1, 2*s.Q() + 3} {
			counts := make([]int, p)
			for j := range counts {
				counts[j] = rng.IntN(3 * n)
			}
			blk := make([][]int, p) // blk[j] = block sizes of root j
			for j := range blk {
				blk[j] = splitCounts(counts[j], n)
			}
			// Allgatherv: have[r][j][b] = data of root j block b at rank r.
			src := make([][][]int64, p)
			have := make([][][][]int64, p)
			for r := range have {
				have[r] = make([][][]int64, p)
				for j := range have[r] {
					have[r][j] = make([][]int64, n)
				}
			}
			for j := 0; j < p; j++ {
				src[j] = make([][]int64, n)
				for b := 0; b < n; b++ {
					src[j][b] = make([]int64, blk[j][b])
					for e := range src[j][b] {
						src[j][b][e] = rng.Int64()
					}
					have[j][j][b] = src[j][b]
				}
			}
			for i := 0; i < s.NumRounds(n); i++ {
				k, _ := s.Round(n, i)
				type item struct{ root, b int }
				mail := make([][]item, p) // mail[to]
				for r := 0; r < p; r++ {
					for j := 0; j < p; j++ {
						if b := tab.AllgathervSend(r, j, n, i); b >= 0 {
							if have[r][j][b] == nil {
								t.Fatalf("allgatherv p=%d n=%d: rank %d lacks block %d of root %d", p, n, r, b, j)
							}
							mail[s.To(r, k)] = append(mail[s.To(r, k)], item{j, b})
						}
					}
				}
				for r := 0; r < p; r++ {
					var want []item
					for j := 0; j < p; j++ {
						if b := tab.AllgathervRecv(r, j, n, i); b >= 0 {
							want = append(want, item{j, b})
						}
					}
					if fmt.Sprint(mail[r]) != fmt.Sprint(want) {
						t.Fatalf("allgatherv p=%d n=%d round %d rank %d: gets %v, expects %v", p, n, i, r, mail[r], want)
					}
					for _, it := range want {
						if have[r][it.root][it.b] != nil {
							t.Fatalf("allgatherv p=%d: rank %d receives (%d,%d) twice", p, r, it.root, it.b)
						}
						have[r][it.root][it.b] = have[s.From(r, k)][it.root][it.b]
					}
				}
			}
			for r := 0; r < p; r++ {
				for j := 0; j < p; j++ {
					for b := 0; b < n; b++ {
						if fmt.Sprint(have[r][j][b]) != fmt.Sprint(src[j][b]) {
							t.Fatalf("allgatherv p=%d n=%d: rank %d has wrong block %d of root %d", p, n, r, b, j)
						}
					}
				}
			}
			// Reduce-scatter: part[r][j][b] = rank r's partial of root j's
			// block b; root j must end with the sum over r.
			part := make([][][][]int64, p)
			sum := make([][][]int64, p)
			for j := range sum {
				sum[j] = make([][]int64, n)
				for b := range sum[j] {
					sum[j][b] = make([]int64, blk[j][b])
				}
			}
			for r := range part {
				part[r] = make([][][]int64, p)
				for j := range part[r] {
					part[r][j] = make([][]int64, n)
					for b := range part[r][j] {
						part[r][j][b] = make([]int64, blk[j][b])
						for e := range part[r][j][b] {
							x := rng.Int64N(1 << 30)
							part[r][j][b][e] = x
							sum[j][b][e] += x
						}
					}
				}
			}
			sent := make([]bool, p*p*n)
			nr := s.NumRounds(n)
			for i := 0; i < nr; i++ {
				k, _ := s.Round(n, nr-1-i)
				type item struct {
					root, b int
					d       []int64
				}
				mail := make([][]item, p)
				for r := 0; r < p; r++ {
					to := s.From(r, k) // reversed
					for j := 0; j < p; j++ {
						if b := tab.ReduceScatterSend(r, j, n, i); b >= 0 {
							if sent[(r*p+j)*n+b] {
								t.Fatalf("reduce-scatter p=%d: rank %d sends (%d,%d) twice", p, r, j, b)
							}
							sent[(r*p+j)*n+b] = true
							mail[to] = append(mail[to], item{j, b, append([]int64(nil), part[r][j][b]...)})
						}
					}
				}
				for r := 0; r < p; r++ {
					var want []string
					for j := 0; j < p; j++ {
						if b := tab.ReduceScatterRecv(r, j, n, i); b >= 0 {
							want = append(want, fmt.Sprint(j, b))
						}
					}
					var got []string
					for _, it := range mail[r] {
						got = append(got, fmt.Sprint(it.root, it.b))
					}
					if fmt.Sprint(got) != fmt.Sprint(want) {
						t.Fatalf("reduce-scatter p=%d n=%d round %d rank %d: gets %v, expects %v", p, n, i, r, got, want)
					}
					for _, it := range mail[r] {
						if sent[(r*p+it.root)*n+it.b] {
							t.Fatalf("reduce-scatter p=%d: rank %d receives (%d,%d) after sending it", p, r, it.root, it.b)
						}
						for e := range it.d {
							part[r][it.root][it.b][e] += it.d[e]
						}
					}
				}
			}
			for j := 0; j < p; j++ {
				for b := 0; b < n; b++ {
					if fmt.Sprint(part[j][j][b]) != fmt.Sprint(sum[j][b]) {
						t.Fatalf("reduce-scatter p=%d n=%d: root %d block %d wrong", p, n, j, b)
					}
				}
			}
		}
	}
}
