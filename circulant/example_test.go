package circulant_test

import (
	"fmt"

	"github.com/shmcoll/shmcoll/circulant"
)

func ExampleHalvingSkips() {
	fmt.Println(circulant.HalvingSkips(22))
	fmt.Println(circulant.SkipTable(22))
	fmt.Println(circulant.PowerOfTwoSkips(22))
	fmt.Println(circulant.SqrtSkips(22))
	// Output:
	// [22 11 6 3 2 1]
	// [1 2 3 6 11 22]
	// [22 16 8 4 2 1]
	// [22 17 12 7 4 2 1]
}

func ExampleCheckSkips() {
	fmt.Println(circulant.CheckSkips(10, []int{10, 5, 3, 2, 1}))
	fmt.Println(circulant.CheckSkips(10, []int{10, 4, 3, 2, 1}))
	// Output:
	// <nil>
	// circulant: invalid skip sequence: p = 10: round 0 moves 6 blocks with skip 4 (skips[k] > 2*skips[k+1])
}

// ExampleNewPlan runs an allreduce of 5 ranks with irregular block sizes
// in one process: the loop every rank runs is the one a shared-memory
// collective runs, reading the peer's blocks straight from its buffer.
func ExampleNewPlan() {
	const p = 5
	sizes := []int{2, 0, 1, 3, 1} // elements of block j
	plans := make([]*circulant.Plan, p)
	rot := make([][]int, p) // each rank's rotated buffer R
	for r := range plans {
		plans[r], _ = circulant.NewPlan(circulant.Allreduce, p, r, nil, sizes)
		v := make([]int, plans[r].Elems())
		for i := range v {
			v[i] = (r + 1) * (i + 1) // rank r's input
		}
		rot[r] = make([]int, len(v))
		circulant.RotateIn(plans[r], rot[r], v)
	}
	for k := range plans[0].Rounds {
		// All ranks run round k; reads see the state before the round.
		prev := make([][]int, p)
		for r := range rot {
			prev[r] = append([]int(nil), rot[r]...)
		}
		for r, pl := range plans {
			rd := pl.Rounds[k]
			src := prev[rd.From][rd.PeerElems.Lo:rd.PeerElems.Hi]
			dst := rot[r][rd.RecvElems.Lo:rd.RecvElems.Hi]
			for i := range dst {
				if rd.Op == circulant.OpReduce {
					dst[i] += src[i]
				} else {
					dst[i] = src[i]
				}
			}
		}
	}
	out := make([]int, plans[3].Elems())
	circulant.RotateOut(plans[3], out, rot[3])
	fmt.Println(out) // (1+2+3+4+5) * (i+1)
	rounds, sent, recv, reduced := plans[3].Counts()
	fmt.Println(rounds, sent, recv, reduced)
	// Output:
	// [15 30 45 60 75 90 105]
	// 6 8 8 4
}

func ExampleReduceScatterExpr() {
	e, _ := circulant.ReduceScatterExpr(6, 0, nil)
	fmt.Println(e)
	// Output: x0+x3+(x4+x1)+(x5+x2)
}

func ExampleSchedules() {
	s, _ := circulant.NewSchedules(17)
	recv := make([]int, s.Q())
	send := make([]int, s.Q())
	for _, r := range []int{0, 5, 16} {
		fmt.Println(r, s.Baseblock(r), s.RecvSchedule(r, recv), s.SendSchedule(r, send))
	}
	// Output:
	// 0 5 [-4 -5 -2 -1 -3] [0 1 2 3 4]
	// 5 3 [-5 -3 -4 3 -1] [-2 -2 -2 -2 3]
	// 16 1 [-5 -2 -3 -1 1] [-4 -4 -2 -2 -1]
}

// ExampleRankSchedule_BroadcastRound prints the rounds of rank 3 in a
// broadcast of n = 4 blocks from root 1 among 6 ranks (the same as the
// reference's `circulant.py bcast-trace 6 4 1`). Rank 3 is root-relative
// rank 2, whose baseblock is 1; block -1 means no transfer.
func ExampleRankSchedule_BroadcastRound() {
	s, _ := circulant.NewSchedules(6)
	rs, _ := s.ForRank(3, 1)
	for i := 0; i < s.NumRounds(4); i++ {
		fmt.Printf("%+v\n", rs.BroadcastRound(4, i))
	}
	// Output:
	// {K:0 To:4 From:2 SendBlock:-1 RecvBlock:-1}
	// {K:1 To:5 From:1 SendBlock:-1 RecvBlock:1}
	// {K:2 To:0 From:0 SendBlock:1 RecvBlock:-1}
	// {K:0 To:4 From:2 SendBlock:1 RecvBlock:0}
	// {K:1 To:5 From:1 SendBlock:1 RecvBlock:3}
	// {K:2 To:0 From:0 SendBlock:3 RecvBlock:2}
}

func ExampleNewAlltoallPlan() {
	pl, _ := circulant.NewAlltoallPlan(6, 0, nil)
	for _, rd := range pl.Rounds {
		fmt.Println(rd.To, rd.From, rd.Positions)
	}
	// Output:
	// 3 3 [3 4 5]
	// 2 4 [2 5]
	// 1 5 [1 4]
}
