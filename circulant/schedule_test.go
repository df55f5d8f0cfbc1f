package circulant

import (
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestFigure1Labels(t *testing.T) {
	var v struct {
		RS struct {
			Labels string `json:"figure1_labels"`
		} `json:"rs_example"`
	}
	loadVectors(t, "paper_ground_truth.json", &v)
	pl, err := NewPlan(ReduceScatter, 22, 0, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	children := reductionChildren(pl)
	var b strings.Builder
	var pre func(i int)
	pre = func(i int) {
		b.WriteString(strconv.Itoa(i))
		for _, c := range children[i] {
			pre(c)
		}
	}
	pre(0)
	if b.String() != v.RS.Labels || v.RS.Labels == "" {
		t.Errorf("pre-order labels %s, want %s", b.String(), v.RS.Labels)
	}
}

// TestPaperTables checks [BC] Tables 1-3 (p = 17, 9, 18) as printed.
func TestPaperTables(t *testing.T) {
	var v struct {
		Tables map[string]struct {
			P         int     `json:"p"`
			Q         int     `json:"q"`
			Baseblock []int   `json:"baseblock"`
			Recv      [][]int `json:"recv"` // [round][rank]
			Send      [][]int `json:"send"`
		} `json:"bc_tables"`
	}
	loadVectors(t, "paper_ground_truth.json", &v)
	ps := map[string]int{"1": 17, "2": 9, "3": 18}
	for name, p := range ps {
		tab, ok := v.Tables[name]
		if !ok || tab.P != p {
			t.Fatalf("table %s missing or not p = %d", name, p)
		}
		s, _ := NewSchedules(p)
		if s.Q() != tab.Q {
			t.Errorf("p=%d: q = %d, want %d", p, s.Q(), tab.Q)
		}
		var rb, sb [64]int
		entries := 0
		for r := 0; r < p; r++ {
			if b := s.Baseblock(r); b != tab.Baseblock[r] {
				t.Errorf("table %s p=%d r=%d: baseblock %d, want %d", name, p, r, b, tab.Baseblock[r])
			}
			recv := s.RecvSchedule(r, rb[:])
			send := s.SendSchedule(r, sb[:])
			for k := 0; k < s.Q(); k++ {
				if recv[k] != tab.Recv[k][r] {
					t.Errorf("table %s p=%d r=%d k=%d: recv %d, want %d", name, p, r, k, recv[k], tab.Recv[k][r])
				}
				if send[k] != tab.Send[k][r] {
					t.Errorf("table %s p=%d r=%d k=%d: send %d, want %d", name, p, r, k, send[k], tab.Send[k][r])
				}
				entries += 2
			}
		}
		t.Logf("table %s (p=%d): %d baseblocks, %d schedule entries match", name, p, p, entries)
	}
}

func TestSchedulesVectors(t *testing.T) {
	var v struct {
		Cases []struct {
			P          int     `json:"p"`
			Q          int     `json:"q"`
			Skip       []int   `json:"skip"`
			Ranks      []int   `json:"ranks"`
			Baseblock  []int   `json:"baseblock"`
			Recv       [][]int `json:"recv"`
			Send       [][]int `json:"send"`
			Violations []int   `json:"violations"`
		} `json:"cases"`
	}
	loadVectors(t, "bc_schedules_small.json", &v)
	if len(v.Cases) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range v.Cases {
		s, err := NewSchedules(c.P)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(s.SkipTable(), c.Skip) {
			t.Errorf("p=%d: skip table %v, want %v", c.P, s.SkipTable(), c.Skip)
		}
		for i, r := range c.Ranks {
			rb := make([]int, s.Q())
			sb := make([]int, s.Q())
			s.RecvSchedule(r, rb)
			viol := s.sendSchedule(r, sb)
			if b := s.Baseblock(r); b != c.Baseblock[i] {
				t.Errorf("p=%d r=%d: baseblock %d, want %d", c.P, r, b, c.Baseblock[i])
			}
			if !reflect.DeepEqual(rb, c.Recv[i]) || !reflect.DeepEqual(sb, c.Send[i]) {
				t.Errorf("p=%d r=%d: recv %v send %v, want %v %v", c.P, r, rb, sb, c.Recv[i], c.Send[i])
			}
			if viol != c.Violations[i] {
				t.Errorf("p=%d r=%d: %d receive-schedule look-ups, want %d", c.P, r, viol, c.Violations[i])
			}
		}
	}
}

// TestSchedulesAllP checks the four conditions of [BC] section 2 for every
// p up to 4096 and every rank; SHMCOLL_LONG=1 extends this to every p up
// to 16384 and sampled p up to 2^24.
func TestSchedulesAllP(t *testing.T) {
	maxP := 4096
	if testing.Short() {
		maxP = 1024
	}
	long := os.Getenv("SHMCOLL_LONG") == "1"
	if long {
		maxP = 16384
	}
	start := time.Now()
	const workers = 4
	t.Run("every-p", func(t *testing.T) {
		for w := 0; w < workers; w++ {
			t.Run(fmt.Sprintf("part=%d", w), func(t *testing.T) {
				t.Parallel()
				maxV := 0
				// Interleave large and small p so that the parts take equal time.
				for p := 1 + w; p <= maxP; p += workers {
					st, err := verifySchedules(p, 1)
					if err != nil {
						t.Fatal(err)
					}
					maxV = max(maxV, st.maxViolations)
					if maxV > 4 {
						t.Fatalf("p=%d: %d receive-schedule look-ups for one rank, Theorem 3 says at most 4", p, st.maxViolations)
					}
				}
			})
		}
	})
	t.Logf("every p up to %d: %v", maxP, time.Since(start))
	if !long {
		return
	}
	start = time.Now()
	sampled := []int{16385, 20000, 32767, 32768, 32769, 65535, 65536, 65537, 100003, 131071, 131072, 131073,
		262143, 262145, 524287, 524289, 773087, 1000003, 1<<20 - 1, 1 << 20, 1<<20 + 1,
		2097151, 2097153, 4194305, 8388607, 8388609, 1<<24 - 1, 1 << 24}
	for _, p := range sampled {
		st, err := verifySchedules(p, 0)
		if err != nil {
			t.Fatal(err)
		}
		if st.maxViolations > 4 {
			t.Fatalf("p=%d: %d look-ups for one rank", p, st.maxViolations)
		}
	}
	t.Logf("sampled p up to 2^24 (%d values, every rank): %v", len(sampled), time.Since(start))
}

func TestVerifySchedulesCatches(t *testing.T) {
	// A corrupted schedule must fail the local conditions.
	s, _ := NewSchedules(17)
	rb := make([]int, s.Q())
	sb := make([]int, s.Q())
	for r := 0; r < 17; r++ {
		s.RecvSchedule(r, rb)
		s.SendSchedule(r, sb)
		b := s.Baseblock(r)
		if err := s.checkLocal(r, b, rb, sb); err != nil {
			t.Fatal(err)
		}
		for k := range rb {
			bad := append([]int(nil), rb...)
			bad[k], bad[(k+1)%len(bad)] = bad[(k+1)%len(bad)], bad[k]
			if r != 0 && bad[k] != rb[k] && s.checkLocal(r, b, bad, sb) == nil {
				// Swapping rounds keeps condition 3's set, but must break the
				// baseblock round or condition 4 or the pairing with peers.
				if recvMatchesPeers(s, r, bad) {
					t.Errorf("r=%d: swapped receive rounds %d,%d not detected", r, k, (k+1)%len(bad))
				}
			}
			bad = append([]int(nil), sb...)
			bad[k] = rb[len(rb)-1] + 100
			if s.checkLocal(r, b, rb, bad) == nil {
				t.Errorf("r=%d: bad send block in round %d not detected", r, k)
			}
		}
	}
}

func recvMatchesPeers(s *Schedules, r int, recv []int) bool {
	sb := make([]int, s.Q())
	for k := range recv {
		s.SendSchedule(s.From(r, k), sb)
		if sb[k] != recv[k] {
			return false
		}
	}
	return true
}

// BenchmarkSchedules measures the receive plus send schedule computation
// averaged over all ranks of p: one op computes both schedules of every
// rank; the ns/rank metric is the figure to compare with [BC] Table 4.
func BenchmarkSchedules(b *testing.B) {
	for _, p := range []int{1 << 10, 1 << 16, 1 << 20, 1<<20 + 1} {
		b.Run(fmt.Sprintf("p=%d", p), func(b *testing.B) {
			s, _ := NewSchedules(p)
			var rb, sb [64]int
			b.ReportAllocs()
			sink := 0
			for b.Loop() {
				for r := 0; r < p; r++ {
					s.RecvSchedule(r, rb[:])
					s.SendSchedule(r, sb[:])
					sink += rb[0] + sb[0]
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(p), "ns/rank")
			if sink == 1 {
				b.Log(sink)
			}
		})
	}
}

func TestSchedulesHugeP(t *testing.T) {
	for _, p := range []int{0, -3, MaxSchedulesP + 1} {
		if _, err := NewSchedules(p); err == nil {
			t.Errorf("NewSchedules(%d) accepted", p)
		}
	}
	// The largest p: a few ranks, checked against condition 2 directly.
	for _, p := range []int{MaxSchedulesP, 1<<40 + 12345, 1<<31 + 1} {
		s, err := NewSchedules(p)
		if err != nil {
			t.Fatal(err)
		}
		q := s.Q()
		rb := make([]int, q)
		sb := make([]int, q)
		for _, r := range []int{0, 1, p / 3, p/2 + 1, p - 1} {
			s.RecvSchedule(r, rb)
			s.SendSchedule(r, sb)
			if err := s.checkLocal(r, s.Baseblock(r), rb, sb); err != nil {
				t.Fatal(err)
			}
			for k := 0; k < q; k++ {
				if got := s.RecvSchedule(s.To(r, k), make([]int, q))[k]; got != sb[k] {
					t.Fatalf("p=%d r=%d k=%d: sends %d, to-rank receives %d", p, r, k, sb[k], got)
				}
			}
		}
	}
}
