package collectives

import (
	"context"
	"fmt"

	"github.com/shmcoll/shmcoll/circulant"
	"github.com/shmcoll/shmcoll/simd"
)

// circAlltoall is Träff's alltoall by concatenation (000, section 4): the
// reduce-scatter rounds with concatenation as the operator, q rounds, with
// the plan of circulant.NewAlltoallPlan. Buffer position j of a rank starts
// with the block for rank r+j; in each round the blocks at the round's
// positions go to rank r+s and the blocks of rank r-s arrive at the same
// positions, so that in the end position j holds the block from r-j.
//
// Slot reuse: a rank's half holds two buffers, A and B, of p pieces each.
// A block that arrives is written into the buffer its position is not in
// (the table of which buffer holds a position is the same on every rank),
// so the rank that reads the position in this round reads the other one.
// The buffer written was last read by the To of an earlier round: before
// writing in round k a rank waits for To of round k-1 to post that it has
// read round k-1 (phase 2k), which by induction covers every earlier
// round (acknowledgement counters). Phases: 2k+1 = "my positions for round
// k are in place", 2k+2 = "I have read round k".
func (c *Comm) circAlltoall(ctx context.Context, a *call) error {
	esz, p, n := a.esz, c.size, a.count
	pl := c.a2a
	if pl == nil {
		var err error
		if pl, err = circulant.NewAlltoallPlan(p, c.rank, c.skips); err != nil {
			return c.fail(fmt.Errorf("%w: %v", ErrInvalidArgument, err))
		}
		c.a2a = pl
		c.where = make([]uint8, p)
	}
	per := c.half / esz / (2 * p)
	if per < 1 {
		return c.fail(fmt.Errorf("%w: slot half of %d bytes cannot hold 2×%d pieces", ErrInvalidArgument, c.half, p))
	}
	S := max(1, (n+per-1)/per)
	in := a.input()
	for k := range S {
		lo, hi := pieceLo(k, S, n), pieceLo(k+1, S, n)
		m := hi - lo
		e, err := c.begin(ctx)
		if err != nil {
			return err
		}
		// buf(x, b, j) is position j of buffer b in rank x's half.
		buf := func(x int, b uint8, j int) []byte {
			o := (int(b)*p + j) * m
			return span(c.slotHalf(x, e), esz, o, o+m)
		}
		for j := 1; j < p; j++ {
			dst := (c.rank + j) % p
			simd.Copy(buf(c.rank, 0, j), span(in, esz, dst*n+lo, dst*n+hi))
			c.where[j] = 0
		}
		// Own block: straight to recv (the same memory in place).
		simd.Copy(span(a.recv, esz, c.rank*n+lo, c.rank*n+hi), span(in, esz, c.rank*n+lo, c.rank*n+hi))
		for r := range pl.Rounds {
			rd := &pl.Rounds[r]
			c.post(e, 2*r+1)
			if err := c.wait(ctx, rd.From, e, 2*r+1); err != nil {
				return err
			}
			if r > 0 {
				if err := c.wait(ctx, pl.Rounds[r-1].To, e, 2*r); err != nil {
					return err
				}
			}
			for _, j := range rd.Positions {
				b := c.where[j]
				simd.Copy(buf(c.rank, 1-b, j), buf(rd.From, b, j))
				c.where[j] = 1 - b
			}
			c.post(e, 2*r+2)
			c.last.add(Stats{Rounds: 1, Sent: uint64(len(rd.Positions)), Received: uint64(len(rd.Positions))})
		}
		for j := 1; j < p; j++ {
			src := (c.rank - j + p) % p
			simd.Copy(span(a.recv, esz, src*n+lo, src*n+hi), buf(c.rank, c.where[j], j))
		}
		a.fully = true
		c.end(e)
	}
	return nil
}
