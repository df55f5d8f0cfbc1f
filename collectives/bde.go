package collectives

// The bidirectional-exchange (BDE) algorithms of the lecture notes (003),
// on read schedules (see schedule.go), for any p. The rank
// range [lo, hi) of a group is halved at mid = lo + floor(g/2); rank i of
// the left half pairs with rank i + floor(g/2) of the right half, and if g
// is odd the last rank of the right half, which has no partner, hands its
// left-half blocks to the last rank of the left half (and takes them from
// it in the allgather). ceil(log2 p) levels. Positions are the p blocks in
// rank order.
//
//   - reduce-scatter: from the top, a left rank reduces its partner's
//     blocks [lo, mid) into its own, a right rank the partner's [mid, hi);
//     each then recurses into its half; rank r ends with block r. The
//     partial results are not reductions of contiguous rank ranges:
//     commutative operators only.
//   - allgather: from the bottom, each rank copies the half it lacks from
//     its partner.
//   - allreduce: reduce-scatter, then allgather.
//
// Slot reuse: a reduce-scatter level writes only the half the rank keeps,
// which its readers of that level do not read and no earlier level read
// (structure); an allgather level writes the half its partner read at the
// same level of the reduce-scatter, and waits for a later phase of that
// partner (structure; the schedule builder checks both).

func init() {
	register(CollAllgather, BDE, onSchedule(BDE, CollAllgather), true)
	register(CollAllgatherv, BDE, onSchedule(BDE, CollAllgather), true)
	register(CollReduceScatterBlock, BDE, onSchedule(BDE, CollReduceScatter), false)
	register(CollReduceScatter, BDE, onSchedule(BDE, CollReduceScatter), false)
	register(CollAllreduce, BDE, onSchedule(BDE, CollAllreduce), false)
}

// bdeUnit: the range [lo, hi) split at mid.
type bdeUnit struct{ lo, mid, hi int }

// bdeLevels returns the splits of each level from the top.
func bdeLevels(p int) [][]bdeUnit {
	cur := []bdeUnit{{0, 0, p}}
	var levels [][]bdeUnit
	for {
		var us, next []bdeUnit
		for _, g := range cur {
			if g.hi-g.lo < 2 {
				continue
			}
			mid := g.lo + (g.hi-g.lo)/2
			us = append(us, bdeUnit{g.lo, mid, g.hi})
			next = append(next, bdeUnit{g.lo, 0, mid}, bdeUnit{mid, 0, g.hi})
		}
		if len(us) == 0 {
			return levels
		}
		levels = append(levels, us)
		cur = next
	}
}

func bdeSchedule(p int, kind Collective) *schedule {
	levels := bdeLevels(p)
	b := newSchedBuilder(p, p, false)
	if kind != CollAllgather {
		for _, us := range levels {
			for _, u := range us {
				half := u.mid - u.lo
				for i := u.lo; i < u.mid; i++ {
					j := i + half
					b.read(i, j, bufW, u.lo, u.mid, bufW, u.lo, bufW, u.lo, xReduce)
					b.read(j, i, bufW, u.mid, u.hi, bufW, u.mid, bufW, u.mid, xReduce)
				}
				if (u.hi-u.lo)%2 == 1 {
					b.read(u.mid-1, u.hi-1, bufW, u.lo, u.mid, bufW, u.lo, bufW, u.lo, xReduce)
				}
			}
			b.endRound()
		}
	}
	if kind != CollReduceScatter {
		for l := len(levels) - 1; l >= 0; l-- {
			for _, u := range levels[l] {
				half := u.mid - u.lo
				for i := u.lo; i < u.mid; i++ {
					j := i + half
					b.read(i, j, bufW, u.mid, u.hi, bufW, 0, bufW, u.mid, xCopy)
					b.read(j, i, bufW, u.lo, u.mid, bufW, 0, bufW, u.lo, xCopy)
				}
				if (u.hi-u.lo)%2 == 1 {
					b.read(u.hi-1, u.mid-1, bufW, u.lo, u.mid, bufW, 0, bufW, u.lo, xCopy)
				}
			}
			b.endRound()
		}
	}
	return b.done(nil)
}
