package circulant

import (
	"fmt"
	"slices"
)

// AlltoallRound is one round of an [AlltoallPlan] for one rank.
type AlltoallRound struct {
	Skip     int
	To, From int
	// Positions lists, ascending, the buffer positions whose blocks the
	// rank sends to To; it receives From's blocks at the same positions
	// into the same positions of its own buffer. The list is the same for
	// every rank.
	Positions []int
	// Slots[b] is the R index (destination offset) of the block at
	// Positions[b] before the round, in [Skip, s'): at rank x that block
	// goes from rank x+Slots[b]-Positions[b] to rank x+Slots[b] (mod p).
	Slots []int
}

// AlltoallPlan is [RS] section 4's alltoall: the reduce-scatter pattern
// with concatenation as the operator, in len(Skips)-1 rounds (q for the
// halving skips).
//
// Layout: each rank keeps a buffer B of p blocks. Initially B[j] is the
// block the rank sends to rank (rank+j) mod p (that is [RotateIn] of its
// send vector). A block never moves within a buffer: in each round the
// blocks at Positions are sent to To and the blocks from From arrive at
// the same positions (the receiver has just sent the blocks it held
// there). After the last round B[j] is the block from rank (rank-j) mod p,
// so recv[src] = B[(rank-src) mod p]. For alltoallv, Slots gives each
// moving block's source and destination.
//
// In shared memory a rank overwrites positions that its To reads in the
// same round: it must wait for To's acknowledgement, or alternate between
// two buffers.
type AlltoallPlan struct {
	P, Rank int
	Skips   []int
	Rounds  []AlltoallRound
}

// NewAlltoallPlan returns rank's alltoall plan for p ranks with the given
// skips (nil: [HalvingSkips]) in O(p log p) time and space. Positions and
// Slots do not depend on the rank; only To and From do.
func NewAlltoallPlan(p, rank int, skips []int) (*AlltoallPlan, error) {
	if p < 1 || rank < 0 || rank >= p {
		return nil, fmt.Errorf("%w: rank %d of p = %d", ErrInvalidArgument, rank, p)
	}
	if skips == nil {
		skips = HalvingSkips(p)
	} else {
		if err := CheckSkips(p, skips); err != nil {
			return nil, err
		}
		skips = slices.Clone(skips)
	}
	pl := &AlltoallPlan{P: p, Rank: rank, Skips: skips}
	// members[i] = positions of the blocks in slot i (destination offset i).
	members := make([][]int, p)
	for j := range members {
		members[j] = []int{j}
	}
	for k := 0; k+1 < len(skips); k++ {
		sp, s := skips[k], skips[k+1]
		rd := AlltoallRound{Skip: s, To: (rank + s) % p, From: (rank - s + p) % p}
		type pos struct{ label, slot int }
		var moved []pos
		for i := s; i < sp; i++ {
			for _, j := range members[i] {
				moved = append(moved, pos{j, i})
			}
			members[i-s] = append(members[i-s], members[i]...)
			members[i] = nil
		}
		slices.SortFunc(moved, func(a, b pos) int { return a.label - b.label })
		rd.Positions = make([]int, len(moved))
		rd.Slots = make([]int, len(moved))
		for b, m := range moved {
			rd.Positions[b], rd.Slots[b] = m.label, m.slot
		}
		pl.Rounds = append(pl.Rounds, rd)
	}
	return pl, nil
}

// Counts returns the number of rounds and of blocks the rank sends (and
// receives) in total.
func (pl *AlltoallPlan) Counts() (rounds, blocks int) {
	for _, rd := range pl.Rounds {
		blocks += len(rd.Positions)
	}
	return len(pl.Rounds), blocks
}
