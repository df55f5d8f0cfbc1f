package collectives

import (
	"context"

	"github.com/shmcoll/shmcoll/simd"
)

// Pipelined binary-tree allreduce (Träff, 002): the ranks form balanced
// binary trees numbered in postorder, so that the subtree of rank i is
// the ranks lo..i, its first child the root of lo..j-1 and its second
// child i-1, the root of j..i-1. The segment is cut into n blocks; in
// round t a rank
//
//   - up: computes the partial result of block t over its subtree,
//     (first child's) op (second child's) op own input — rank order, so
//     non-commutative operators are correct — and exposes it to its
//     parent;
//   - down: takes block t-D of the result from its parent and exposes it to
//     its children, D its delay.
//
// Three shapes share the loop (treeKind): Tree, one tree doubly pipelined
// (up and down at once, D = depth); ReduceBcast, one tree with the
// broadcast after the reduction (D = n-1+depth: the root starts down when
// the last block came up), the pair the paper compares with; and
// DualRoot, two trees of about p/2 ranks, ranks [0, ceil(p/2)) and
// [ceil(p/2), p), whose roots exchange their partial blocks and both
// compute result block t = (lower tree's) op (upper tree's), bitwise the
// same on both. A DualRoot rank with k children receives and reduces k
// partial blocks a round and a root also the other root's. The number of
// blocks comes from the pipelining lemma (treeKind.lead).
//
// Slot layout: a rank's slot half holds the partial area (blocks going
// up) and, at alignUp(half/2), the result area (blocks going down); the
// root of a single tree computes its partial blocks straight into the
// result area. Phases of step e: 1 at the start, 2t+2 when partial block t
// is exposed, 2t+3 when result block t-D is (ranks with children only).
// A child's delay is its parent's plus one, so a rank never waits for a
// block its parent can only produce after waiting for this rank's later
// blocks: no cycle.
//
// Slot reuse within a step (structure): every block of either area is
// written once in the step, before the phase that exposes it, and never
// again. Across steps see step.go. In place, input block t is read in
// round t and result block t written in round t+D >= t, after it.

type treeKind uint8

const (
	treeDoubly      treeKind = iota // Tree
	treeReduceBcast                 // ReduceBcast
	treeDual                        // DualRoot
)

func init() {
	register(CollAllreduce, Tree, func(c *Comm, ctx context.Context, a *call) error { return c.treeAllreduce(ctx, a, treeDoubly) }, true)
	register(CollAllreduce, ReduceBcast, func(c *Comm, ctx context.Context, a *call) error { return c.treeAllreduce(ctx, a, treeReduceBcast) }, true)
	register(CollAllreduce, DualRoot, func(c *Comm, ctx context.Context, a *call) error { return c.treeAllreduce(ctx, a, treeDual) }, true)
}

// treeNode is a rank's place in the trees of a treeKind.
type treeNode struct {
	parent, c0, c1 int // -1: none; c0 the first child (lower ranks)
	depth          int
	peerRoot       int  // dual roots: the other root, else -1
	lower          bool // dual roots: this root's tree holds the lower ranks
	height         int  // height of the (higher) tree
}

// postorderNode returns the parent, first and second child (-1: none) and
// depth of rank r in the balanced postorder binary tree on [lo, hi): the
// root is hi-1, the first subtree takes the first ceil((hi-lo-1)/2)
// ranks, the second the rest.
func postorderNode(lo, hi, r int) (parent, c0, c1, depth int) {
	parent = -1
	for {
		root := hi - 1
		s := root - lo
		L := (s + 1) / 2
		if r == root {
			c0, c1 = -1, -1
			if L > 0 {
				c0 = lo + L - 1
			}
			if s > L {
				c1 = root - 1
			}
			return parent, c0, c1, depth
		}
		parent = root
		depth++
		if r < lo+L {
			hi = lo + L
		} else {
			lo, hi = lo+L, root
		}
	}
}

// treeHeight is the height of the postorder tree of s >= 1 ranks,
// floor(log2 s): the first subtree of s ranks has ceil((s-1)/2) = floor(s/2).
func treeHeight(s int) int { return floorLog2(s) }

func treeNodeOf(kind treeKind, p, r int) treeNode {
	nd := treeNode{peerRoot: -1}
	if kind != treeDual {
		nd.parent, nd.c0, nd.c1, nd.depth = postorderNode(0, p, r)
		nd.height = treeHeight(p)
		return nd
	}
	pa := (p + 1) / 2 // ranks [0, pa) and [pa, p)
	lo, hi := 0, pa
	if r >= pa {
		lo, hi = pa, p
	}
	nd.parent, nd.c0, nd.c1, nd.depth = postorderNode(lo, hi, r)
	nd.height = treeHeight(pa)
	if nd.parent < 0 {
		nd.lower = r == pa-1
		nd.peerRoot = pa - 1
		if nd.lower {
			nd.peerRoot = p - 1
		}
	}
	return nd
}

// lead is the latency of the pipeline in rounds besides one round per
// block, from 002's step counts (three communication steps a round):
// doubly pipelined dual roots 6h+1+3(n-1) steps, one doubly pipelined
// tree 6h+3(n-1), reduce then bcast 2(3h+3(n-1)), h the tree height.
func (k treeKind) lead(h int) float64 {
	switch k {
	case treeDual:
		return float64(6*h-2) / 3
	case treeDoubly:
		return float64(2*h - 1)
	}
	return float64(h - 1)
}

// treeSeg is one segment of a tree algorithm's call a: m elements cut
// into n blocks, run in step e.
type treeSeg struct {
	c    *Comm
	a    *call
	ctx  context.Context
	e    uint64
	m, n int
}

// blk is block b of a segment-sized buffer.
func (s *treeSeg) blk(buf []byte, b int) []byte {
	lo, hi := blockSpan(0, s.m, s.n, b)
	return span(buf, s.a.esz, lo, hi)
}

// peer returns block b of the area at byte offset off of rank q's slot
// half once q posted phase.
func (s *treeSeg) peer(q, phase, off, b int) ([]byte, error) {
	c := s.c
	if err := c.wait(s.ctx, q, s.e, phase); err != nil {
		return nil, err
	}
	c.last.add(Stats{Rounds: 1, Received: 1})
	return s.blk(c.slotHalf(q, s.e)[off:off+s.m*s.a.esz], b), nil
}

// up computes partial block t of nd's subtree into dst, (first child's)
// op (second child's) op own input block x — rank order — from the
// children's partial areas (offset 0, phase 2t+2).
func (s *treeSeg) up(nd treeNode, t int, dst, x []byte) error {
	if nd.c0 < 0 {
		simd.Copy(dst, x)
		return nil
	}
	red := &s.a.red
	l, err := s.peer(nd.c0, 2*t+2, 0, t)
	if err != nil {
		return err
	}
	if nd.c1 < 0 {
		red.reduce3(dst, l, x)
		s.c.last.Reduced++
		return nil
	}
	r, err := s.peer(nd.c1, 2*t+2, 0, t)
	if err != nil {
		return err
	}
	red.reduce3(dst, l, r)
	red.reduce(dst, x)
	s.c.last.Reduced += 2
	return nil
}

func (c *Comm) treeAllreduce(ctx context.Context, a *call, kind treeKind) error {
	esz, p, N := a.esz, c.size, a.count
	nd := treeNodeOf(kind, p, c.rank)
	area := c.half / 2 &^ (lineBytes - 1)
	M := area / esz
	in := a.input()
	singleRoot := nd.parent < 0 && nd.peerRoot < 0
	return c.vectorSteps(ctx, N, M, func(e uint64, base, m int) error {
		n := machineCost.blocks(kind.lead(nd.height), m*esz, m, machineCost.beta+machineCost.gamma)
		D := nd.depth // the round in which this rank takes result block 0
		if kind == treeReduceBcast {
			D += n - 1
		}
		s := treeSeg{c: c, a: a, ctx: ctx, e: e, m: m, n: n}
		h := c.slotHalf(c.rank, e)
		part, res := h[:m*esz], h[area:area+m*esz]
		acc := part // where partial results go
		if singleRoot {
			acc = res
		}
		x := span(in, esz, base, base+m)
		out := span(a.recv, esz, base, base+m)
		c.post(e, 1)
		for t := 0; t < n+D; t++ {
			if t < n { // up
				if err := s.up(nd, t, s.blk(acc, t), s.blk(x, t)); err != nil {
					return err
				}
				if !singleRoot {
					c.last.Sent++
				}
				c.post(e, 2*t+2)
			}
			b := t - D
			if b < 0 {
				continue
			}
			// down
			switch {
			case singleRoot:
			case nd.peerRoot >= 0:
				o, err := s.peer(nd.peerRoot, 2*b+2, 0, b)
				if err != nil {
					return err
				}
				if nd.lower {
					a.red.reduce3(s.blk(res, b), s.blk(part, b), o)
				} else {
					a.red.reduce3(s.blk(res, b), o, s.blk(part, b))
				}
				c.last.Reduced++
			default:
				src, err := s.peer(nd.parent, 2*(b+D-1)+3, area, b)
				if err != nil {
					return err
				}
				if nd.c0 >= 0 {
					simd.Copy(s.blk(res, b), src)
				} else {
					simd.Copy(s.blk(out, b), src)
					continue
				}
			}
			simd.Copy(s.blk(out, b), s.blk(res, b))
			if nd.c0 >= 0 {
				c.last.Sent++
				c.post(e, 2*t+3)
			}
		}
		c.full = true
		return nil
	})
}

// Tree's reduce and bcast: the same postorder tree of the p ranks used one
// way. Its root is rank p-1; the collective's root, if another rank, is
// joined by one more hand-off rather than by renumbering the ranks, which
// would rotate the reduction order:
//
//   - reduce: the up rounds of the allreduce; rank p-1's partial blocks
//     are the result. A root other than p-1 takes result block t-h from
//     rank p-1 in round t (h the tree height), after exposing its own
//     partial block t. n-1+h rounds, one more with the hand-off.
//   - bcast: the root exposes its whole segment at once; every other rank
//     takes block b from its parent (rank p-1: from the root) and exposes
//     it to its children. n-1+h rounds, one more with the hand-off.
//
// Number of blocks: the pipelining lemma with lead h-1, h with the
// hand-off (rootedLead); every rank computes it from p, the root and the
// segment size. Phases of step e: 1 at the start; reduce: 2t+2 when
// partial block t is exposed, as in the allreduce; bcast: b+2 when block
// b is (the root posts n+1 at once).
//
// Slot reuse within a step (structure): a rank writes each block of its
// slot half, which holds the whole segment, once, before the phase that
// exposes it. In place at a reduce root, input block t is read in round t
// and result block t written in round t or later.

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
	return c.vectorSteps(ctx, N, c.half/esz, func(e uint64, base, m int) error {
		n := machineCost.blocks(rootedLead(p, a.root), m*esz, m, machineCost.beta+machineCost.gamma)
		s := treeSeg{c: c, a: a, ctx: ctx, e: e, m: m, n: n}
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
		c.full = isRoot || c.rank == top
		return nil
	})
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
	return c.vectorSteps(ctx, N, c.half/esz, func(e uint64, base, m int) error {
		n := machineCost.blocks(rootedLead(p, a.root), m*esz, m, machineCost.beta)
		s := treeSeg{c: c, a: a, ctx: ctx, e: e, m: m, n: n}
		seg := span(a.recv, esz, base, base+m)
		h := c.slotHalf(c.rank, e)[:m*esz]
		if isRoot {
			// Read by its children or, if it is not rank p-1, by rank
			// p-1 (p >= 2: one of the two).
			simd.Copy(h, seg)
			c.last.Sent += uint64(n)
			c.post(e, n+1)
			return nil
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
		return nil
	})
}
