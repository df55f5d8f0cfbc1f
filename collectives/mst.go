package collectives

import (
	"context"

	"github.com/shmcoll/shmcoll/simd"
)

// The minimum-spanning-tree (MST) algorithms of the lecture notes (003),
// on read schedules (see schedule.go): the rank range is
// halved recursively (the left half gets ceil(g/2) ranks); the holder of a
// range (the root at the top) deals with one rank of the other half, its
// first rank (or the range's first rank if the holder is in the right
// half), which becomes the holder of that half. ceil(log2 p) levels.
//
//   - bcast: level by level from the top, the other half's holder copies
//     the whole segment from the holder.
//   - reduce: level by level from the bottom, the holder reduces the other
//     holder's partial result into its own, the left half's partial as the
//     left operand, so every partial result is the reduction of a range of
//     ranks in rank order (correct for non-commutative operators).
//   - scatter: from the top, the other half's holder copies the other
//     half's blocks from the holder.
//   - gather: from the bottom, the holder copies the other half's blocks
//     from the other holder.
//
// Slot reuse: a rank writes a range of its half once (bcast, scatter,
// gather: the blocks it receives, before it posts the phase its readers
// wait for) or reduces into its partial result before it posts the phase
// its one reader (its holder) waits for (structure). Buffer X is the
// scratch of reductions with the peer as the left operand.

func init() {
	register(CollBcast, MST, onSchedule(MST, CollBcast), true)
	register(CollReduce, MST, (*Comm).mstReduce, true)
	register(CollScatter, MST, (*Comm).mstBlocks, true)
	register(CollGather, MST, (*Comm).mstBlocks, true)
}

// mstUnit: on range [lo, hi) split at mid, holder h deals with o.
type mstUnit struct{ lo, mid, hi, h, o int }

// mstLevels returns the units of each level from the top.
func mstLevels(p, root int) [][]mstUnit {
	type rng struct{ lo, hi, h int }
	cur := []rng{{0, p, root}}
	var levels [][]mstUnit
	for {
		var next []rng
		var us []mstUnit
		for _, g := range cur {
			if g.hi-g.lo == 1 {
				continue
			}
			mid := g.lo + (g.hi-g.lo+1)/2
			o := mid // the other half's first rank, or the range's
			if g.h >= mid {
				o = g.lo
			}
			us = append(us, mstUnit{g.lo, mid, g.hi, g.h, o})
			next = append(next, rng{g.lo, mid, min(g.h, o)}, rng{mid, g.hi, max(g.h, o)})
		}
		if len(us) == 0 {
			return levels
		}
		levels = append(levels, us)
		cur = next
	}
}

func mstSchedule(p, root int, kind Collective) *schedule {
	levels := mstLevels(p, root)
	npos := p
	if kind == CollBcast || kind == CollReduce {
		npos = 1
	}
	b := newSchedBuilder(p, npos, false)
	mstAdd(b, levels, kind)
	return b.done(nil)
}

// mstAdd adds the rounds of an MST bcast, reduce, scatter or gather.
func mstAdd(b *schedBuilder, levels [][]mstUnit, kind Collective) {
	n := len(levels)
	for i := range n {
		l := i
		if kind == CollReduce || kind == CollGather {
			l = n - 1 - i
		}
		for _, u := range levels[l] {
			olo, ohi := u.mid, u.hi // the other half
			if u.h >= u.mid {
				olo, ohi = u.lo, u.mid
			}
			switch kind {
			case CollBcast:
				b.read(u.o, u.h, bufW, 0, b.s.npos, bufW, 0, bufW, 0, xCopy)
			case CollScatter:
				b.read(u.o, u.h, bufW, olo, ohi, bufW, 0, bufW, olo, xCopy)
			case CollReduce:
				op := xReduce
				if u.h >= u.mid {
					op = xReduceRev
				}
				b.read(u.h, u.o, bufW, 0, 1, bufW, 0, bufW, 0, op)
			case CollGather:
				b.read(u.h, u.o, bufW, olo, ohi, bufW, 0, bufW, olo, xCopy)
			}
		}
		b.endRound()
	}
}

func (c *Comm) mstReduce(ctx context.Context, a *call) error {
	M := c.half / a.esz
	if a.red.user != nil && !a.red.comm {
		M /= 2 // buffer X is the scratch of peer-op-own reductions
	}
	s := c.sched(schedKey{alg: MST, coll: CollReduce, root: a.root})
	return c.schedVector(ctx, a, M, func(int) *schedule { return s })
}

// mstBlocks runs the MST scatter (the root copies in every block but its
// own, every other rank copies its block out) or gather (every rank but the
// root copies its block in, the root copies the others out).
func (c *Comm) mstBlocks(ctx context.Context, a *call) error {
	esz, r, gather := a.esz, c.rank, a.coll == CollGather
	s := c.sched(schedKey{alg: MST, coll: a.coll, root: a.root})
	return c.blockSteps(ctx, a, c.half/esz, func(e uint64, k, S int) error {
		pre := c.sc.pre
		h := c.slotHalf(r, e)
		lo, n := pieceLo(k, S, a.count), pre[r+1]-pre[r] // this rank's piece
		var out schedOut
		switch {
		case gather && r == a.root:
			out = schedOut{buf: a.recv, blocks: true}
		case gather:
			simd.Copy(span(h, esz, pre[r], pre[r+1]), span(a.send, esz, lo, lo+n))
		case r == a.root:
			c.copyPieces(h, a.send, esz, r)
		}
		c.post(e, 1)
		if err := c.runSchedule(ctx, a, s, e, pre, 0, out); err != nil {
			return err
		}
		switch {
		case out.buf != nil:
			c.copyResult(esz, s, h, pre, 0, out, r)
		case !gather && r != a.root:
			simd.Copy(span(a.recv, esz, lo, lo+n), span(h, esz, pre[r], pre[r+1]))
		}
		return nil
	})
}
