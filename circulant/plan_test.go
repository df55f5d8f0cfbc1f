package circulant

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

func TestSkipsVectors(t *testing.T) {
	var v struct {
		Cases []struct {
			P         int   `json:"p"`
			Q         int   `json:"q"`
			Skips     []int `json:"skips"`
			SkipTable []int `json:"skip_table"`
		} `json:"cases"`
	}
	loadVectors(t, "skips.json", &v)
	if len(v.Cases) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range v.Cases {
		if got := HalvingSkips(c.P); !reflect.DeepEqual(got, c.Skips) {
			t.Errorf("HalvingSkips(%d) = %v, want %v", c.P, got, c.Skips)
		}
		if got := SkipTable(c.P); !reflect.DeepEqual(got, c.SkipTable) {
			t.Errorf("SkipTable(%d) = %v, want %v", c.P, got, c.SkipTable)
		}
		if got := CeilLog2(c.P); got != c.Q {
			t.Errorf("CeilLog2(%d) = %d, want %d", c.P, got, c.Q)
		}
	}
}

func TestSkipSequences(t *testing.T) {
	if got, want := PowerOfTwoSkips(22), []int{22, 16, 8, 4, 2, 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("PowerOfTwoSkips(22) = %v, want %v", got, want)
	}
	if got, want := SqrtSkips(100), []int{100, 90, 80, 70, 60, 50, 40, 30, 20, 10, 5, 3, 2, 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("SqrtSkips(100) = %v, want %v", got, want)
	}
	if got, want := LinearSkips(4), []int{4, 3, 2, 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("LinearSkips(4) = %v, want %v", got, want)
	}
	for p := 1; p <= 3000; p++ {
		q := CeilLog2(p)
		for name, s := range map[string][]int{
			"halving": HalvingSkips(p), "pow2": PowerOfTwoSkips(p),
			"linear": LinearSkips(p), "sqrt": SqrtSkips(p),
		} {
			if err := CheckSkips(p, s); err != nil {
				t.Fatalf("%s(%d): %v", name, p, err)
			}
			switch name {
			case "halving", "pow2":
				if len(s) != q+1 {
					t.Fatalf("%s(%d) has %d rounds, want %d", name, p, len(s)-1, q)
				}
			case "sqrt":
				c := ceilSqrt(p)
				if len(s)-1 > c+CeilLog2(2*c) {
					t.Fatalf("sqrt(%d) has %d rounds", p, len(s)-1)
				}
			}
		}
	}
}

func TestCheckSkipsRejects(t *testing.T) {
	for _, c := range []struct {
		p     int
		skips []int
	}{
		{10, []int{10, 4, 3, 2, 1}}, // every i a sum, but round 0 moves 6 blocks with skip 4
		{8, []int{8, 3, 2, 1}},      // 7 is not a sum
		{8, []int{8, 4, 2}},         // does not end in 1
		{8, []int{7, 4, 2, 1}},      // does not start at p
		{8, []int{8, 4, 4, 2, 1}},   // not strictly descending
		{1, []int{}},
		{0, []int{1}},
		{5, []int{5, 3, 1}}, // 2... is a sum? 3,1 give 1,3,4: 2 missing
	} {
		err := CheckSkips(c.p, c.skips)
		if !errors.Is(err, ErrInvalidSkips) {
			t.Errorf("CheckSkips(%d, %v) = %v, want ErrInvalidSkips", c.p, c.skips, err)
		}
		if _, err := NewPlan(ReduceScatter, c.p, 0, c.skips, nil); err == nil {
			t.Errorf("NewPlan accepted p=%d skips %v", c.p, c.skips)
		}
	}
}

func TestRSTraceVectors(t *testing.T) {
	var v struct {
		Cases []struct {
			P      int       `json:"p"`
			Q      int       `json:"q"`
			Skips  []int     `json:"skips"`
			Rounds [][][]int `json:"rounds"`
		} `json:"cases"`
	}
	loadVectors(t, "rs_trace.json", &v)
	if len(v.Cases) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range v.Cases {
		for r := 0; r < c.P; r++ {
			pl, err := NewPlan(Allreduce, c.P, r, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(pl.Rounds) != len(c.Rounds[r]) {
				t.Fatalf("p=%d r=%d: %d rounds, want %d", c.P, r, len(pl.Rounds), len(c.Rounds[r]))
			}
			for k, rd := range pl.Rounds {
				got := []int{rd.To, rd.From, rd.Send.Lo, rd.Send.Hi - 1, rd.Recv.Lo, rd.Recv.Hi - 1,
					rd.Send.Len(), pl.Block(r, rd.Send.Lo), pl.Block(r, rd.Recv.Lo)}
				if !reflect.DeepEqual(got, c.Rounds[r][k]) {
					t.Errorf("p=%d r=%d round %d: %v, want %v", c.P, r, k, got, c.Rounds[r][k])
				}
				wantOp := OpReduce
				if k >= c.Q {
					wantOp = OpCopy
				}
				if rd.Op != wantOp {
					t.Errorf("p=%d r=%d round %d: op %v", c.P, r, k, rd.Op)
				}
			}
		}
	}
}

// runInts runs the plans of all ranks on integer vectors as a collectives
// loop would (rotate in, rounds reading the peer's buffer, rotate out) and
// returns, per rank, the output vector and counters.
type rankStats struct {
	rounds, blocksSent, blocksRecv, blocksReduced, elemsSent, elemsRecv, elemsReduced int
}

func runInts(t *testing.T, kind Kind, p int, skips, sizes []int, inputs [][]int64) ([][]int64, []rankStats) {
	t.Helper()
	plans := make([]*Plan, p)
	rot := make([][]int64, p)
	for r := range plans {
		pl, err := NewPlan(kind, p, r, skips, sizes)
		if err != nil {
			t.Fatal(err)
		}
		plans[r] = pl
		rot[r] = make([]int64, pl.Elems())
		RotateIn(pl, rot[r], inputs[r])
	}
	st := make([]rankStats, p)
	for k := range plans[0].Rounds {
		next := make([][]int64, p)
		for r := range next {
			next[r] = append([]int64(nil), rot[r]...)
		}
		for r, pl := range plans {
			rd := pl.Rounds[k]
			src := rot[rd.From][rd.PeerElems.Lo:rd.PeerElems.Hi]
			dst := next[r][rd.RecvElems.Lo:rd.RecvElems.Hi]
			if rd.Op == OpReduce {
				for i := range dst {
					dst[i] += src[i]
				}
				st[r].blocksReduced += rd.Recv.Len()
				st[r].elemsReduced += len(dst)
			} else {
				copy(dst, src)
			}
			st[r].rounds++
			st[r].blocksSent += rd.Send.Len()
			st[r].blocksRecv += rd.Recv.Len()
			st[r].elemsSent += rd.SendElems.Len()
			st[r].elemsRecv += len(dst)
		}
		rot = next
	}
	out := make([][]int64, p)
	for r, pl := range plans {
		out[r] = make([]int64, pl.Elems())
		RotateOut(pl, out[r], rot[r])
	}
	return out, st
}

func TestRSExamplesVectors(t *testing.T) {
	type stats struct {
		Rounds        int `json:"rounds"`
		BlocksSent    int `json:"blocks_sent"`
		BlocksRecv    int `json:"blocks_recv"`
		BlocksReduced int `json:"blocks_reduced"`
		ElemsSent     int `json:"elems_sent"`
		ElemsRecv     int `json:"elems_recv"`
		ElemsReduced  int `json:"elems_reduced"`
	}
	var v struct {
		Cases []struct {
			P          int         `json:"p"`
			BlockSizes []int       `json:"block_sizes"`
			Inputs     [][][]int64 `json:"inputs"`
			RSResult   [][]int64   `json:"reduce_scatter_result"`
			ARResult   [][]int64   `json:"allreduce_result"`
			RSStats    []stats     `json:"reduce_scatter_stats"`
			ARStats    []stats     `json:"allreduce_stats"`
		} `json:"cases"`
		Example struct {
			Expression string `json:"expression"`
			FromProcs  []int  `json:"from_procs"`
		} `json:"example_p22_r21"`
	}
	loadVectors(t, "rs_examples.json", &v)
	if len(v.Cases) == 0 {
		t.Fatal("no cases")
	}
	for _, c := range v.Cases {
		inputs := make([][]int64, c.P)
		for r := range inputs {
			for _, blk := range c.Inputs[r] {
				inputs[r] = append(inputs[r], blk...)
			}
		}
		for _, kind := range []Kind{ReduceScatter, Allreduce} {
			out, st := runInts(t, kind, c.P, nil, c.BlockSizes, inputs)
			want := c.RSStats
			if kind == Allreduce {
				want = c.ARStats
			}
			pl, _ := NewPlan(kind, c.P, 0, nil, c.BlockSizes)
			for r := 0; r < c.P; r++ {
				w := want[r]
				got := stats{st[r].rounds, st[r].blocksSent, st[r].blocksRecv, st[r].blocksReduced, st[r].elemsSent, st[r].elemsRecv, st[r].elemsReduced}
				if got != w {
					t.Errorf("p=%d %v rank %d: stats %+v, want %+v", c.P, kind, r, got, w)
				}
				if kind == ReduceScatter {
					lo, hi := pl.start(r), pl.start(r+1)
					if g := out[r][lo:hi]; !equalInts(g, c.RSResult[r]) {
						t.Errorf("p=%d rank %d: reduce-scatter %v, want %v", c.P, r, g, c.RSResult[r])
					}
					continue
				}
				for j := 0; j < c.P; j++ {
					if g := out[r][pl.start(j):pl.start(j+1)]; !equalInts(g, c.ARResult[j]) {
						t.Errorf("p=%d rank %d block %d: allreduce %v, want %v", c.P, r, j, g, c.ARResult[j])
					}
				}
			}
		}
	}
	got, err := ReduceScatterExpr(22, 21, nil)
	if err != nil || got != v.Example.Expression {
		t.Errorf("ReduceScatterExpr(22, 21) = %q, %v; want %q", got, err, v.Example.Expression)
	}
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestPaperExampleP22 checks [RS]'s worked example, from the paper's text.
func TestPaperExampleP22(t *testing.T) {
	pl, err := NewPlan(ReduceScatter, 22, 21, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pl.Skips[1:], []int{11, 6, 3, 2, 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("skips %v, want %v", got, want)
	}
	var from []int
	for _, rd := range pl.Rounds {
		from = append(from, rd.From)
	}
	if want := []int{10, 15, 18, 19, 20}; !reflect.DeepEqual(from, want) {
		t.Errorf("rank 21 receives from %v, want %v", from, want)
	}
	const want = "x21+x10+(x15+x4)+(x18+x7+(x12+x1))+(x19+x8+(x13+x2)+(x16+x5))+(x20+x9+(x14+x3)+(x17+x6+(x11+x0)))"
	if got, err := ReduceScatterExpr(22, 21, nil); err != nil || got != want {
		t.Errorf("ReduceScatterExpr(22, 21) = %q, %v\nwant %q", got, err, want)
	}
}

// TestVerifyPlansTree proves every p up to 2^16 (halving skips) by the
// rotation/tree argument, and the other skip sequences for smaller p.
func TestVerifyPlansTree(t *testing.T) {
	maxP := 1 << 16
	if testing.Short() {
		maxP = 1 << 12
	}
	const workers = 4
	for w := 0; w < workers; w++ {
		t.Run(fmt.Sprintf("halving/part=%d", w), func(t *testing.T) {
			t.Parallel()
			for p := 1 + w; p <= maxP; p += workers {
				for _, kind := range []Kind{ReduceScatter, Allreduce, Allgather} {
					if err := VerifyPlans(kind, p, nil); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
	t.Run("other", func(t *testing.T) {
		t.Parallel()
		for p := 1; p <= 2048; p++ {
			for _, s := range [][]int{PowerOfTwoSkips(p), SqrtSkips(p), LinearSkips(p)} {
				for _, kind := range []Kind{ReduceScatter, Allreduce, Allgather} {
					if err := VerifyPlans(kind, p, s); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	})
}

// TestVerifierCatchesBrokenPlans makes sure the verifiers can fail.
func TestVerifierCatchesBrokenPlans(t *testing.T) {
	// Skips that pass the sum condition but not the doubling bound.
	pl := &Plan{Kind: ReduceScatter, P: 10, Skips: []int{10, 4, 3, 2, 1}}
	for k := 0; k+1 < len(pl.Skips); k++ {
		pl.Rounds = append(pl.Rounds, pl.rsRound(pl.Skips[k], pl.Skips[k+1]))
	}
	if err := verifyRelative(pl); !errors.Is(err, ErrVerify) {
		t.Errorf("p=10 skips 10,4,3,2,1: verifyRelative = %v, want ErrVerify", err)
	}
	good, _ := NewPlan(Allreduce, 13, 0, nil, nil)
	mutations := []func(rs []Round){
		func(rs []Round) { rs[1].From = (rs[1].From + 1) % 13 },
		func(rs []Round) { rs[0].Recv.Lo++; rs[0].Recv.Hi++ },
		func(rs []Round) { rs[2].Op = OpCopy },
		func(rs []Round) { rs[len(rs)-1], rs[len(rs)-2] = rs[len(rs)-2], rs[len(rs)-1] },
		func(rs []Round) { rs[0], rs[1] = rs[1], rs[0] },
	}
	for i, m := range mutations {
		bad := *good
		bad.Rounds = append([]Round(nil), good.Rounds...)
		m(bad.Rounds)
		if err := verifyRelative(&bad); !errors.Is(err, ErrVerify) {
			t.Errorf("mutation %d not caught: %v", i, err)
		}
	}
}

// TestSimulatePlans runs all ranks against each other for every p up to
// 256 (halving) and smaller p for the other sequences and irregular sizes.
func TestSimulatePlans(t *testing.T) {
	maxP := 256
	if testing.Short() {
		maxP = 96
	}
	t.Run("halving", func(t *testing.T) {
		t.Parallel()
		for p := 1; p <= maxP; p++ {
			for _, kind := range []Kind{ReduceScatter, Allreduce, Allgather} {
				if err := SimulatePlans(kind, p, nil, nil); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
	t.Run("irregular", func(t *testing.T) {
		t.Parallel()
		rng := rand.New(rand.NewPCG(1, 2))
		for p := 1; p <= 70; p++ {
			sizes := make([]int, p)
			for j := range sizes {
				sizes[j] = rng.IntN(4)
			}
			for _, s := range [][]int{nil, PowerOfTwoSkips(p), SqrtSkips(p), LinearSkips(p)} {
				for _, kind := range []Kind{ReduceScatter, Allreduce, Allgather} {
					if err := SimulatePlans(kind, p, s, sizes); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	})
	t.Run("ints", func(t *testing.T) {
		t.Parallel()
		rng := rand.New(rand.NewPCG(3, 4))
		for _, p := range []int{1, 2, 3, 5, 6, 7, 12, 22, 31, 64, 100} {
			sizes := make([]int, p)
			for j := range sizes {
				sizes[j] = rng.IntN(5)
				if j == p/2 {
					sizes[j] = 40 // one large block
				}
			}
			inputs := make([][]int64, p)
			total := 0
			for _, n := range sizes {
				total += n
			}
			sum := make([]int64, total)
			for r := range inputs {
				inputs[r] = make([]int64, total)
				for i := range inputs[r] {
					inputs[r][i] = rng.Int64N(1<<40) - 1<<39
					sum[i] += inputs[r][i]
				}
			}
			for _, s := range [][]int{nil, SqrtSkips(p)} {
				out, _ := runInts(t, Allreduce, p, s, sizes, inputs)
				for r := range out {
					if !equalInts(out[r], sum) {
						t.Fatalf("p=%d rank %d: allreduce wrong", p, r)
					}
				}
			}
		}
	})
}

func TestNewPlanErrors(t *testing.T) {
	for _, c := range []struct {
		kind       Kind
		p, r       int
		skips, szs []int
	}{
		{ReduceScatter, 0, 0, nil, nil},
		{ReduceScatter, 4, 4, nil, nil},
		{ReduceScatter, 4, -1, nil, nil},
		{Kind(9), 4, 0, nil, nil},
		{Allreduce, 4, 0, nil, []int{1, 2, 3}},
		{Allreduce, 4, 0, nil, []int{1, 2, -3, 1}},
	} {
		if _, err := NewPlan(c.kind, c.p, c.r, c.skips, c.szs); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("NewPlan(%v, %d, %d, %v, %v) = %v, want ErrInvalidArgument", c.kind, c.p, c.r, c.skips, c.szs, err)
		}
	}
}

// TestCheckSkipsExact enumerates every descending sequence from p to 1
// for small p and checks that CheckSkips accepts exactly those whose
// reduce-scatter and allreduce plans the tree argument proves correct.
func TestCheckSkipsExact(t *testing.T) {
	accepted := 0
	for p := 2; p <= 14; p++ {
		// Subsets of {2..p-1} as the middle skips.
		for mask := 0; mask < 1<<(p-2); mask++ {
			skips := []int{p}
			for v := p - 1; v >= 2; v-- {
				if mask&(1<<(v-2)) != 0 {
					skips = append(skips, v)
				}
			}
			skips = append(skips, 1)
			ok := CheckSkips(p, skips) == nil
			for _, kind := range []Kind{ReduceScatter, Allreduce} {
				pl := &Plan{Kind: kind, P: p, Skips: skips}
				q := len(skips) - 1
				for k := 0; k < q; k++ {
					pl.Rounds = append(pl.Rounds, pl.rsRound(skips[k], skips[k+1]))
				}
				if kind == Allreduce {
					for k := q - 1; k >= 0; k-- {
						pl.Rounds = append(pl.Rounds, pl.agRound(skips[k], skips[k+1]))
					}
				}
				proved := verifyRelative(pl) == nil
				if proved != ok {
					t.Fatalf("p=%d skips %v %v: CheckSkips says %v, the tree argument %v", p, skips, kind, ok, proved)
				}
			}
			if ok {
				accepted++
			}
		}
	}
	t.Logf("%d valid skip sequences for p <= 14", accepted)
}
