package collectives

import (
	"context"
	"fmt"
	"slices"

	"github.com/shmcoll/shmcoll/circulant"
	"github.com/shmcoll/shmcoll/simd"
)

// The circulant algorithms of Träff (000): reduce-scatter (Algorithm 1),
// allreduce (Algorithm 2: reduce-scatter, then the allgather rounds with the
// skips reversed), allgather(v) by the reversed rounds alone, and a barrier
// on the same graph; bcast and reduce with one block on the circulant tree
// (skips ascending: the ranks holding the data double each round).
//
// Data layout: a rank's slot half holds its rotated buffer R, R[i] = block
// (rank+i) mod p of the segment. In a reduce-scatter round with skips
// (s', s) a rank exposes R[s..s'-1] and reduces rank (r-s)'s R[s..s'-1]
// straight from that rank's slot into its own R[0..s'-s-1]; the first
// round is fused with the copy-in (R[0..s'-s-1] = V op peer, one
// three-operand pass), and the rest of R is copied in before phase 1.
// Reduction order: the local accumulator is always the left operand, so
// rank r's block is the expression circulant.ReduceScatterExpr prints,
// the same in every run.
//
// Slot reuse within a step: reduce-scatter rounds write only R[0..s'-s-1]
// with s'-s <= s, below every range exposed so far, so nothing exposed is
// rewritten (structure). An allgather round (s', s) writes R[s..s'-1],
// which was read in the reduce-scatter round (s', s) by rank r+s — the
// very rank this round waits for, at a phase it posts only after its
// reduce-scatter rounds are done (structure). Across steps see step.go.

func init() {
	register(CollAllreduce, Circulant, (*Comm).circAllreduce, false)
	rs := func(c *Comm, ctx context.Context, a *call) error { return c.circBlocks(ctx, a, false) }
	ag := func(c *Comm, ctx context.Context, a *call) error { return c.circBlocks(ctx, a, true) }
	register(CollReduceScatterBlock, Circulant, rs, false)
	register(CollReduceScatter, Circulant, rs, false)
	register(CollAllgather, Circulant, ag, true)
	register(CollAllgatherv, Circulant, ag, true)
	register(CollBarrier, Circulant, (*Comm).circBarrier, true)
	register(CollBcast, Circulant, (*Comm).circBcast, true)
	register(CollReduce, Circulant, (*Comm).circReduce, false)
	register(CollAlltoall, Circulant, (*Comm).circAlltoall, true)
}

// plan returns the circulant plan of kind for this rank, built on first
// use. It cannot fail: newComm checked c.skips (circulant.CheckSkips).
func (c *Comm) plan(kind circulant.Kind) *circulant.Plan {
	if c.plans[kind-1] == nil {
		pl, err := circulant.NewPlan(kind, c.size, c.rank, c.skips, nil)
		if err != nil {
			panic(err)
		}
		c.plans[kind-1] = pl
	}
	return c.plans[kind-1]
}

// rounds runs the rounds of pl in step e on the rotated buffer in the
// calling rank's half h, with the segment's blocks in c.sc.pre and their
// user offsets in c.sc.uoff. in is the user input (the first reduce round
// is fused with the copy-in from it); out receives the last round's
// blocks directly (allgather rounds) or the last reduction of R[0]
// (a reduce-scatter), if not nil.
func (c *Comm) rounds(ctx context.Context, a *call, pl *circulant.Plan, e uint64, h, in, out []byte) error {
	esz := a.esz
	last := len(pl.Rounds) - 1
	for k := range pl.Rounds {
		rd := &pl.Rounds[k]
		if k > 0 {
			c.post(e, k+1)
		}
		if err := c.wait(ctx, rd.From, e, k+1); err != nil {
			return err
		}
		ph := c.slotHalf(rd.From, e)
		rlo, rhi := c.roff(c.rank, rd.Recv.Lo), c.roff(c.rank, rd.Recv.Hi)
		plo := c.roff(rd.From, rd.Send.Lo)
		peer := func(rot, n int) []byte { return span(ph, esz, plo+rot-rlo, plo+rot-rlo+n) }
		c.last.add(Stats{Rounds: 1, Sent: uint64(rd.Send.Len()), Received: uint64(rd.Recv.Len())})
		if rd.Op == circulant.OpReduce {
			c.last.Reduced += uint64(rd.Recv.Len())
		}
		switch {
		case rd.Op == circulant.OpReduce && k == 0 && in != nil:
			if k == last && out != nil { // p = 2 reduce-scatter: R[0] is the result
				a.red.reduce3(out, span(in, esz, c.sc.uoff[c.rank], c.sc.uoff[c.rank]+rhi), peer(0, rhi))
				break
			}
			if out != nil && finalFirst(pl) { // p = 2 allreduce
				// The probe, not the reduction's time (memory-bound at
				// either placement), gives the store advice.
				if (rhi-rlo)*esz >= pipelineBytes/8 && !c.ep.Oversubscribed() {
					c.adv.probeRead(peer(0, rhi-rlo))
				}
				c.eachRun(rd.Recv.Lo, rd.Recv.Hi, func(rot, user, n int) {
					a.red.reduceResult(span(out, esz, user, user+n), span(h, esz, rot, rot+n), span(in, esz, user, user+n), peer(rot, n))
				})
				break
			}
			// The peers read these blocks next: non-temporally when they
			// ask for it, as publish does.
			stream := (rhi-rlo)*esz >= pipelineBytes/8 && c.adv.advised()
			// This reduction reads what the peer just wrote: it is what
			// crawls when the vCPUs sit on different dies, so it is timed.
			t0 := c.adv.readStart((rhi - rlo) * esz)
			c.eachRun(rd.Recv.Lo, rd.Recv.Hi, func(rot, user, n int) {
				a.red.reduce3Stream(span(h, esz, rot, rot+n), span(in, esz, user, user+n), peer(rot, n), stream)
			})
			c.adv.reduceDone((rhi-rlo)*esz, t0)
		case rd.Op == circulant.OpReduce:
			if k == last && out != nil {
				a.red.reduce3(out, span(h, esz, rlo, rhi), peer(rlo, rhi-rlo))
				break
			}
			a.red.reduce(span(h, esz, rlo, rhi), peer(rlo, rhi-rlo))
		case k == last && out != nil:
			c.eachRun(rd.Recv.Lo, rd.Recv.Hi, func(rot, user, n int) {
				simd.Copy(span(out, esz, user, user+n), peer(rot, n))
			})
		default:
			simd.Copy(span(h, esz, rlo, rhi), peer(rlo, rhi-rlo))
		}
	}
	return nil
}

// finalFirst reports whether the first round of pl is its only reduction
// (the allreduce for p = 2): R[0..Rounds[0].Recv.Hi) is then the rank's
// result as soon as that round is done.
func finalFirst(pl *circulant.Plan) bool {
	return len(pl.Rounds) > 1 && pl.Rounds[0].Op == circulant.OpReduce && pl.Rounds[1].Op != circulant.OpReduce
}

// reduceResult computes dst = in op peer, blocks of the rank's result,
// into the user's buffer dst and a copy into its slot (for the peer to
// read), resultChunk bytes at a time, so that the copy reads what the
// reduction just wrote from L1. dst may be in. The slot gets its copy
// from the string copy, not from the kernel's stores: where the vCPUs sit
// on different dies, the peer reads lines the string copy stored faster.
func (r *reducer) reduceResult(dst, slot, in, peer []byte) {
	for lo := 0; lo < len(dst); lo += resultChunk {
		hi := min(lo+resultChunk, len(dst))
		r.reduce3(dst[lo:hi], in[lo:hi], peer[lo:hi])
		simd.Copy(slot[lo:hi], dst[lo:hi])
	}
}

// resultChunk is reduceResult's step: small enough for L1 to hold what
// the copy reads, large enough that each kernel call runs long; a
// multiple of every element size.
const resultChunk = 16 << 10

// copyIn copies R[i..i2) of the calling rank from the user buffer u
// (elements of esz bytes), for the peers to read (publish: non-temporally
// when they ask for it).
func (c *Comm) copyIn(esz int, h, u []byte, i, i2 int) {
	c.eachRun(i, i2, func(rot, user, n int) {
		c.adv.publish(span(h, esz, rot, rot+n), span(u, esz, user, user+n))
	})
}

// copyOut copies R[i..i2) of the calling rank to the user buffer u.
func (c *Comm) copyOut(esz int, u, h []byte, i, i2 int) {
	c.eachRun(i, i2, func(rot, user, n int) {
		simd.Copy(span(u, esz, user, user+n), span(h, esz, rot, rot+n))
	})
}

// circSegBytes is the largest segment of the circulant allreduce, so that
// each round's blocks stay in L2 (the reference machine's).
const circSegBytes = 1 << 20

func (c *Comm) circAllreduce(ctx context.Context, a *call) error {
	p := c.size
	pl := c.plan(circulant.Allreduce)
	in := a.input()
	first := pl.Rounds[0].Recv.Hi
	lastRecv := pl.Rounds[len(pl.Rounds)-1].Recv
	return c.vectorSteps(ctx, a.count, min(c.half, circSegBytes)/a.esz, func(e uint64, base, m int) error {
		evenSplit(c.sc.pre, p, m)
		for j := range p {
			c.sc.uoff[j] = base + c.sc.pre[j]
		}
		h := c.slotHalf(c.rank, e)
		c.copyIn(a.esz, h, in, first, p)
		c.post(e, 1)
		if err := c.rounds(ctx, a, pl, e, h, in, a.recv); err != nil {
			return err
		}
		done := 0 // blocks that rounds wrote to recv already
		if finalFirst(pl) {
			done = pl.Rounds[0].Recv.Hi
		}
		c.copyOut(a.esz, a.recv, h, done, lastRecv.Lo)
		c.copyOut(a.esz, a.recv, h, lastRecv.Hi, p)
		c.full = true
		return nil
	})
}

// circBlocks is the reduce-scatter (gather false: Algorithm 1) or the
// allgather(v) (the reversed rounds alone), segment by segment.
func (c *Comm) circBlocks(ctx context.Context, a *call, gather bool) error {
	esz, p := a.esz, c.size
	kind, in := circulant.ReduceScatter, a.send
	if gather {
		kind, in = circulant.Allgather, nil
	}
	pl := c.plan(kind)
	lastRecv := pl.Rounds[len(pl.Rounds)-1].Recv
	return c.blockSteps(ctx, a, c.half/esz, func(e uint64, k, S int) error {
		h := c.slotHalf(c.rank, e)
		out := a.recv
		if gather {
			c.copyIn(esz, h, a.recv, 0, 1)
		} else {
			c.copyIn(esz, h, a.send, pl.Rounds[0].Recv.Hi, p)
			lo := pieceLo(k, S, a.counts[c.rank])
			out = span(a.recv, esz, lo, lo+c.sc.pre[c.rank+1]-c.sc.pre[c.rank])
		}
		c.post(e, 1)
		if err := c.rounds(ctx, a, pl, e, h, in, out); err != nil {
			return err
		}
		if gather {
			c.copyOut(esz, a.recv, h, 1, lastRecv.Lo)
			c.copyOut(esz, a.recv, h, lastRecv.Hi, p)
		}
		c.full = true
		return nil
	})
}

// circBarrier: the reduce-scatter rounds without data: in round k a rank
// posts phase k+1 and waits for rank r-s to post it. Every 0 < d < p is a
// sum of distinct skips, so after the last round every rank has heard,
// directly or not, from every other.
func (c *Comm) circBarrier(ctx context.Context, a *call) error {
	pl := c.plan(circulant.ReduceScatter)
	e, err := c.begin(ctx)
	if err != nil {
		return err
	}
	for k := range pl.Rounds {
		c.post(e, k+1)
		if err := c.wait(ctx, pl.Rounds[k].From, e, k+1); err != nil {
			return err
		}
		c.last.Rounds++
	}
	c.full = true
	c.end(e)
	return nil
}

// The one-block tree on the circulant graph: with the ascending skip table
// t[0] = 1 < t[1] < ... < t[q] = p, in round k the ranks (relative to the
// root) i < t[k] hold the data and send it to i + t[k] if that is below
// t[k+1]. Every rank posts phase 1 when it begins the step and phase 2
// when the data (bcast) or its partial result (reduce) is in its half.
// Slot reuse: a rank writes its half once in the step, before phase 2, and
// its readers read after phase 2 (structure).

// treeParent returns the parent of relative rank i > 0.
func treeParent(t []int, i int) int {
	for k := 0; k+1 < len(t); k++ {
		if i >= t[k] && i < t[k+1] {
			return i - t[k]
		}
	}
	panic("collectives: rank outside the tree")
}

func (c *Comm) circBcast(ctx context.Context, a *call) error {
	esz, p, N := a.esz, c.size, a.count
	t := c.skipTable()
	i := (c.rank - a.root + p) % p
	forwards := false
	for k := 0; k+1 < len(t); k++ {
		if i < t[k] && i+t[k] < t[k+1] {
			forwards = true
		}
	}
	return c.vectorSteps(ctx, N, c.half/esz, func(e uint64, base, m int) error {
		seg := span(a.recv, esz, base, base+m)
		h := c.slotHalf(c.rank, e)
		if i == 0 {
			simd.Copy(h, seg)
			c.post(e, 2)
		} else {
			c.post(e, 1)
			q := (treeParent(t, i) + a.root) % p
			if err := c.wait(ctx, q, e, 2); err != nil {
				return err
			}
			src := c.slotHalf(q, e)[:m*esz]
			simd.Copy(seg, src)
			c.last.add(Stats{Received: 1, Rounds: 1})
			if forwards {
				simd.Copy(h, src)
				c.post(e, 2)
			}
		}
		return nil
	})
}

func (c *Comm) circReduce(ctx context.Context, a *call) error {
	esz, p, N := a.esz, c.size, a.count
	t := c.skipTable()
	i := (c.rank - a.root + p) % p
	in := a.input()
	return c.vectorSteps(ctx, N, c.half/esz, func(e uint64, base, m int) error {
		c.post(e, 1)
		h := c.slotHalf(c.rank, e)[:m*esz]
		x := span(in, esz, base, base+m)
		var out []byte
		if i == 0 {
			out = span(a.recv, esz, base, base+m)
		}
		acc := x // the partial result so far
		// Children in the reverse order of the bcast rounds.
		nchild := 0
		for k := len(t) - 2; k >= 0; k-- {
			if i < t[k] && i+t[k] < t[k+1] {
				nchild++
			}
		}
		done := 0
		for k := len(t) - 2; k >= 0; k-- {
			if !(i < t[k] && i+t[k] < t[k+1]) {
				continue
			}
			q := (i + t[k] + a.root) % p
			if err := c.wait(ctx, q, e, 2); err != nil {
				return err
			}
			done++
			dst := h
			if done == nchild && out != nil {
				dst = out
			}
			a.red.reduce3(dst, acc, c.slotHalf(q, e)[:m*esz])
			acc = dst
			c.last.add(Stats{Rounds: 1, Received: 1, Reduced: 1})
		}
		if i != 0 {
			if nchild == 0 {
				simd.Copy(h, x)
			}
			c.post(e, 2)
			c.last.Sent++
		} else {
			c.full = true
		}
		return nil
	})
}

// skipTable returns the ascending skips 1 = t[0] < ... < t[q] = p.
func (c *Comm) skipTable() []int {
	if c.table == nil {
		c.table = slices.Clone(c.skips)
		slices.Reverse(c.table)
	}
	return c.table
}

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
	if c.a2a == nil {
		pl, err := circulant.NewAlltoallPlan(p, c.rank, c.skips)
		if err != nil {
			panic(err) // as plan's: c.skips were checked
		}
		c.a2a, c.where = pl, make([]uint8, p)
	}
	pl := c.a2a
	per := c.half / esz / (2 * p)
	if per < 1 {
		return c.fail(fmt.Errorf("%w: slot half of %d bytes cannot hold 2×%d pieces", ErrInvalidArgument, c.half, p))
	}
	S := max(1, (n+per-1)/per)
	in := a.input()
	return c.steps(ctx, S, func(e uint64, k int) error {
		lo, hi := pieceLo(k, S, n), pieceLo(k+1, S, n)
		m := hi - lo
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
		c.full = true
		return nil
	})
}
