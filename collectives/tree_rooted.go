package collectives

import (
	"context"

	"github.com/shmcoll/shmcoll/simd"
)

// The single pipelined binary tree of Träff (002) used one way: reduce up
// the balanced postorder tree of the p ranks (tree.go), bcast down it. The
// tree's root is rank p-1; the collective's root, if another rank, is
// joined by one more hand-off rather than by renumbering the ranks, which
// would rotate the reduction order:
//
//   - reduce: in round t every rank computes partial block t over its
//     subtree, (first child's) op (second child's) op own input — rank
//     order, so non-commutative operators are correct — and exposes it to
//     its parent; rank p-1's partial blocks are the result. A root other
//     than p-1 takes result block t-h from rank p-1 in round t (h the tree
//     height), after exposing its own partial block t. n-1+h rounds, one
//     more with the hand-off.
//   - bcast: the root exposes its whole segment at once; every other rank
//     takes block b from its parent (rank p-1: from the root) and exposes
//     it to its children. n-1+h rounds, one more with the hand-off.
//
// Number of blocks: the pipelining lemma on n-1+h(+1) rounds, lead h-1
// (h with the hand-off), see costModel.blocks; every rank computes it from
// p, the root and the segment size.
//
// Phases of step e: 1 at the start; reduce: 2t+2 when partial block t is
// exposed (the phases of tree.go's up, whose code it shares); bcast:
// b+2 when block b is (the root posts n+1 at once).
//
// Slot reuse within a step (structure): a rank writes each block of its
// slot half once, before the phase that exposes it, and never again. The
// whole half holds the segment: a reduce's partial blocks or a bcast's
// blocks. In place at a reduce root, input block t is read in round t and
// result block t written in round t or later (from the slot of rank p-1,
// or from its own slot when it is rank p-1).

func init() {
	register(CollReduce, Tree, (*Comm).treeReduce, true)
	register(CollBcast, Tree, (*Comm).treeBcast, true)
}

// rootedLead is the latency in rounds besides one round per block of a
// one-way pipeline down (or up) the postorder tree of p ranks to root.
func rootedLead(p, root int) float64 {
	lead := float64(treeHeight(p) - 1)
	if root != p-1 {
		lead++
	}
	return lead
}

func (c *Comm) treeReduce(ctx context.Context, a *call) error {
	esz, p, N := a.esz, c.size, a.count
	nd := treeNodeOf(treeDoubly, p, c.rank)
	top := p - 1
	isRoot := c.rank == a.root
	handOff := a.root != top
	D := 0 // the reduce root takes result block t-D in round t
	if isRoot && handOff {
		D = nd.height
	}
	in := a.input()
	M := c.half / esz
	for base := 0; base == 0 || base < N; base += M {
		m := min(M, N-base)
		n := machineCost.blocks(rootedLead(p, a.root), m*esz, m, machineCost.beta+machineCost.gamma)
		e, err := c.begin(ctx)
		if err != nil {
			return err
		}
		s := treeSeg{c: c, ctx: ctx, e: e, m: m, n: n}
		x := span(in, esz, base, base+m)
		acc := c.slotHalf(c.rank, e)[:m*esz] // partial results
		var out []byte
		if isRoot {
			out = span(a.recv, esz, base, base+m)
			if !handOff && a.send != nil {
				acc = out // nobody reads them: straight into recv
			}
		}
		exposed := nd.parent >= 0 || handOff // somebody reads acc
		c.post(e, 1)
		for t := 0; t < n+D; t++ {
			if t < n {
				if err := s.up(nd, t, s.blk(acc, t), s.blk(x, t)); err != nil {
					return err
				}
				if exposed {
					c.last.Sent++
					c.post(e, 2*t+2)
				}
			}
			b := t - D
			switch {
			case !isRoot || b < 0:
			case handOff:
				src, err := s.peer(top, 2*b+2, 0, b)
				if err != nil {
					return err
				}
				simd.Copy(s.blk(out, b), src)
			case a.send == nil:
				simd.Copy(s.blk(out, b), s.blk(acc, b))
			}
		}
		// Rank p-1's result, and so the root's, needed every rank's data.
		a.fully = isRoot || c.rank == top
		c.end(e)
	}
	return nil
}

func (c *Comm) treeBcast(ctx context.Context, a *call) error {
	esz, p, N := a.esz, c.size, a.count
	nd := treeNodeOf(treeDoubly, p, c.rank)
	from := nd.parent // where this rank's blocks come from
	if from < 0 {
		from = a.root
	}
	isRoot := c.rank == a.root
	// Children other than the root read this rank's blocks.
	exposed := nd.c0 >= 0 && nd.c0 != a.root || nd.c1 >= 0 && nd.c1 != a.root
	M := c.half / esz
	for base := 0; base == 0 || base < N; base += M {
		m := min(M, N-base)
		n := machineCost.blocks(rootedLead(p, a.root), m*esz, m, machineCost.beta)
		e, err := c.begin(ctx)
		if err != nil {
			return err
		}
		s := treeSeg{c: c, ctx: ctx, e: e, m: m, n: n}
		seg := span(a.recv, esz, base, base+m)
		h := c.slotHalf(c.rank, e)[:m*esz]
		if isRoot {
			// Read by its children or, if it is not rank p-1, by rank
			// p-1 (p >= 2: one of the two).
			simd.Copy(h, seg)
			c.last.Sent += uint64(n)
			c.post(e, n+1)
			c.end(e)
			continue
		}
		c.post(e, 1)
		for b := range n {
			src, err := s.peer(from, b+2, 0, b)
			if err != nil {
				return err
			}
			simd.Copy(s.blk(seg, b), src)
			if exposed {
				simd.Copy(s.blk(h, b), src)
				c.last.Sent++
				c.post(e, b+2)
			}
		}
		c.end(e)
	}
	return nil
}
