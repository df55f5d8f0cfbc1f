package collectives

import (
	"context"
	"fmt"
	"math/bits"
)

// RabenseifnerOdd: the factorization of 001, p = 2^n q with q odd, on read
// schedules (see schedule.go). The ranks form 2^n groups of
// q adjacent ranks (group g: ranks gq .. gq+q-1); the segment is cut into
// p positions, part k of the vector being positions [k 2^n, (k+1) 2^n).
//
//  1. Odd factor, the "ring" of the paper (alltoall and local reduction):
//     in one round, member k of each group reduces part k of the other
//     q-1 members into its own, folding the left neighbours in as left
//     operands and the right ones as right operands, so the part is the
//     group's reduction in rank order.
//  2. Factor 2^n: the butterfly (rabenseifner.go) among the members k of
//     the 2^n groups on part k, adjacent groups paired: n rounds.
//  3. Allreduce: the butterfly's allgather (n rounds), then in one round
//     every rank copies the other q-1 parts from its group.
//
// Allreduce 2n+2 rounds, (q-1)/q + 2(2^n-1)/p + (q-1)/q of the vector
// received; reduce-scatter n+1 rounds. Every partial result reduces a
// contiguous range of ranks in rank order: correct for non-commutative
// operators.
//
// Slot reuse: step 1 writes only the rank's own part, which its readers
// of that round do not read (they read their own parts); steps 2 and 3
// write what the butterfly writes, and the last round writes parts whose
// readers of step 1 the rank has heard from since (structure; the
// schedule builder verifies both).

func init() {
	register(CollAllreduce, RabenseifnerOdd, (*Comm).rabOddAllreduce, true)
	register(CollReduceScatterBlock, RabenseifnerOdd, (*Comm).rabOddReduceScatter, true)
	register(CollReduceScatter, RabenseifnerOdd, (*Comm).rabOddReduceScatter, true)
}

func rabOddSchedule(p int, kind uint8) *schedule {
	n := bits.TrailingZeros(uint(p))
	G := 1 << n // groups
	q := p / G  // members per group
	b := newSchedBuilder(p, p, false)
	part := func(k int) (int, int) { return k * G, (k + 1) * G }
	if q > 1 {
		for r := range p {
			g, k := r/q, r%q
			lo, hi := part(k)
			for m := k - 1; m >= 0; m-- {
				b.read(r, g*q+m, bufW, lo, hi, bufW, lo, bufW, lo, xReduceRev)
			}
			for m := k + 1; m < q; m++ {
				b.read(r, g*q+m, bufW, lo, hi, bufW, lo, bufW, lo, xReduce)
			}
		}
		b.endRound()
	}
	// The butterfly on part k among the members k of the groups.
	groups := make([][]rabMember, q)
	for k := range q {
		lo, hi := part(k)
		for g := range G {
			groups[k] = append(groups[k], rabMember{rank: g*q + k, lo: lo, hi: hi})
		}
	}
	all := groups
	units := make([][]rabUnit, n)
	for l := range n {
		var next [][]rabMember
		for _, g := range all {
			var lower, upper []rabMember
			for i := 0; i+1 < len(g); i += 2 {
				x, y := &g[i], &g[i+1]
				lo, hi := x.lo, x.hi
				rabExchange(b, b.t, x, y, true)
				units[l] = append(units[l], rabUnit{a: x.rank, b: y.rank, w: -1, lo: lo, mid: (lo + hi) / 2, hi: hi})
				lower, upper = append(lower, *x), append(upper, *y)
			}
			next = append(next, lower, upper)
		}
		all = next
		b.endRound()
	}
	if kind == rabKindReduceScatter {
		s := b.s
		s.posBlocks = make([][]int, p)
		for _, g := range all {
			s.posBlocks[g[0].lo] = []int{g[0].rank}
		}
		return b.done(nil)
	}
	for l := n - 1; l >= 0; l-- {
		for _, u := range units[l] {
			b.read(u.a, u.b, bufW, u.mid, u.hi, bufW, 0, bufW, u.mid, xCopy)
			b.read(u.b, u.a, bufW, u.lo, u.mid, bufW, 0, bufW, u.lo, xCopy)
		}
		b.endRound()
	}
	if q > 1 {
		for r := range p {
			g, k := r/q, r%q
			for m := range q {
				if m != k {
					lo, hi := part(m)
					b.read(r, g*q+m, bufW, lo, hi, bufW, 0, bufW, lo, xCopy)
				}
			}
		}
		b.endRound()
	}
	return b.done(nil)
}

func (c *Comm) rabOddSched(kind uint8) *schedule {
	p := c.size
	return cachedSchedule(schedKey{alg: RabenseifnerOdd, kind: kind, p: p}, func() *schedule { return rabOddSchedule(p, kind) })
}

func (c *Comm) rabOddAllreduce(ctx context.Context, a *call) error {
	M := c.half / a.esz / 2
	if M < 1 {
		return c.fail(fmt.Errorf("%w: slot half of %d bytes too small", ErrInvalidArgument, c.half))
	}
	s := c.rabOddSched(rabKindAllreduce)
	return c.schedVector(ctx, a, M, func(int) *schedule { return s })
}

func (c *Comm) rabOddReduceScatter(ctx context.Context, a *call) error {
	return c.rabScatter(ctx, a, c.rabOddSched(rabKindReduceScatter))
}
