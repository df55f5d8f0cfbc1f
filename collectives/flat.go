package collectives

import (
	"context"
	"fmt"
	"slices"

	"github.com/shmcoll/shmcoll/internal/clock"
	"github.com/shmcoll/shmcoll/simd"
)

// The flat algorithms: every rank reads what it needs straight from the
// other ranks' slot halves, one step per segment.
//
// Reductions (allreduce, reduce, reduce-scatter): every rank copies its
// segment into its slot half and posts phase 1; rank r then reduces block r
// of the segment from all p slot halves in one pass of the k-way kernel, in
// rank order (x_0 op x_1 op ... op x_{p-1}: correct for non-commutative
// operators, and for bfloat16/float16 rounded once per pass of up to 8
// sources), writes it to the result area of its own half (allreduce,
// reduce) and posts phase 2; then every rank (the root for reduce) copies
// block q from the result area of rank q.
//
// Bcast, scatter, gather, allgather(v), scan, alltoall(v): the ranks that
// provide data copy it into their half and post phase 1; the others read
// it after waiting for that phase. Replicated (replicatedAllreduce) lives
// here too: every rank reduces the whole vector.
//
// Slot reuse (structure): in a step a rank writes its half only before it
// posts phase 1, except the result area of allreduce and reduce, which it
// writes before phase 2 and nobody reads before phase 2; nothing is written
// after it is exposed. Across steps the halves alternate and begin()
// ensures every rank began step e-1 before step e writes (see step.go).

func init() {
	register(CollAllreduce, Flat, (*Comm).flatAllreduce, true)
	register(CollReduce, Flat, (*Comm).flatAllreduce, true)
	register(CollReduceScatterBlock, Flat, (*Comm).flatReduceScatter, true)
	register(CollReduceScatter, Flat, (*Comm).flatReduceScatter, true)
	register(CollAllgather, Flat, (*Comm).flatAllgather, true)
	register(CollAllgatherv, Flat, (*Comm).flatAllgather, true)
	register(CollBcast, Flat, (*Comm).flatBcast, true)
	// Gather and Scatter are Gatherv and Scatterv of the regular blocks
	// that their entry points set.
	register(CollGather, Flat, (*Comm).flatGatherv, true)
	register(CollScatter, Flat, (*Comm).flatScatterv, true)
	register(CollScan, Flat, (*Comm).flatScan, true)
	register(CollExscan, Flat, (*Comm).flatScan, true)
	register(CollBarrier, Flat, (*Comm).flatBarrier, true)
	register(CollBarrier, ReduceBcast, (*Comm).rootFirstBarrier, true)
	register(CollAlltoall, Flat, (*Comm).flatAlltoall, true)
	register(CollAllreduce, Replicated, (*Comm).replicatedAllreduce, true)
	register(CollReduce, Replicated, (*Comm).replicatedAllreduce, true)
}

// alignUp rounds n up to a cache line.
func alignUp(n int) int { return (n + lineBytes - 1) &^ (lineBytes - 1) }

// flatSegElems is the largest segment m with m elements of esz bytes and a result area of
// ceil(m/p) elements (line-aligned) in one slot half.
func (c *Comm) flatSegElems(esz int) (int, error) {
	p := c.size
	m := (c.half - lineBytes) / esz * p / (p + 1)
	for m > 0 && alignUp(m*esz)+(m+p-1)/p*esz > c.half {
		m--
	}
	if m < 1 {
		return 0, fmt.Errorf("%w: slot half of %d bytes too small", ErrInvalidArgument, c.half)
	}
	return m, nil
}

// input returns the call's input: send, or recv in place.
func (a *call) input() []byte {
	if a.send != nil {
		return a.send
	}
	return a.recv
}

func (c *Comm) flatAllreduce(ctx context.Context, a *call) error {
	esz, p, N := a.esz, c.size, a.count
	M, err := c.flatSegElems(esz)
	if err != nil {
		return c.fail(err)
	}
	in := a.input()
	root := a.coll == CollReduce
	for base := 0; base == 0 || base < N; base += M {
		m := min(M, N-base)
		e, err := c.begin(ctx)
		if err != nil {
			return err
		}
		h := c.slotHalf(c.rank, e)
		simd.Copy(h, span(in, esz, base, base+m))
		c.post(e, 1)
		pre := c.sc.pre
		evenSplit(pre, p, m)
		for q := range p {
			if q != c.rank {
				if err := c.wait(ctx, q, e, 1); err != nil {
					return err
				}
			}
			c.sc.srcs[q] = span(c.slotHalf(q, e), esz, pre[c.rank], pre[c.rank+1])
		}
		res := alignUp(m * esz)
		mine := pre[c.rank+1] - pre[c.rank]
		a.red.reduceK(h[res:res+mine*esz], c.sc.srcs)
		c.post(e, 2)
		c.last.add(Stats{Rounds: 2, Sent: 2 * uint64(p-1), Received: uint64(p - 1), Reduced: uint64(p - 1)})
		if !root || c.rank == a.root {
			for i := 1; i <= p; i++ {
				q := c.next(i)
				if q != c.rank {
					if err := c.wait(ctx, q, e, 2); err != nil {
						return err
					}
				}
				n := pre[q+1] - pre[q]
				simd.Copy(span(a.recv, esz, base+pre[q], base+pre[q]+n), c.slotHalf(q, e)[res:res+n*esz])
			}
			c.last.Received += uint64(p - 1)
			c.full = true
		}
		c.end(e)
	}
	return nil
}

// flatReduceScatter: every rank copies this step's piece of every block
// into its half; rank r reduces piece r from all halves into recv, its own
// piece read from its input where it is (not from the copy the peers read
// at the same time, so that the lines are not shared), except where ranks
// share CPUs, whose peers do not read at the same time, and in place,
// where recv is the input's piece too, which the kernel allows only as
// its first source: rank 0. A rank whose block is empty reads nothing:
// once its copy is posted it returns early (early.go), so that a vector
// of a few elements, which reaches a few ranks, keeps the others waiting
// for none.
func (c *Comm) flatReduceScatter(ctx context.Context, a *call) error {
	esz, p := a.esz, c.size
	S := 1 // the blocks are packed in rank order in a.send: one piece each if it fits
	if len(a.send) > c.half {
		var err error
		if S, err = numPieces(a.counts, c.half/esz); err != nil {
			return c.fail(err)
		}
	}
	ownIn := !c.ep.Oversubscribed() && (c.rank == 0 || !overlaps(a.send, a.recv))
	for k := range S {
		e, err := c.begin(ctx)
		if err != nil {
			return err
		}
		c.pieces(k, S, a.counts, a.displs)
		pre, uoff := c.sc.pre, c.sc.uoff
		tiny := S == 1 && pre[p]*esz <= tinyBytes
		h := c.stepBuf(c.rank, e, tiny)
		if S == 1 {
			simd.Copy(h, a.send[:pre[p]*esz]) // the blocks are packed in rank order
		} else {
			c.copyPieces(h, a.send, esz, -1)
		}
		c.post(e, 1)
		if pre[c.rank+1] == pre[c.rank] {
			c.last.add(Stats{Rounds: 1, Sent: uint64(p - 1)})
			c.end(e) // c.full stays false: the call returns early
			continue
		}
		for q := range p {
			if q == c.rank && ownIn {
				c.sc.srcs[q] = span(a.send, esz, uoff[q], uoff[q]+pre[q+1]-pre[q])
				continue
			}
			c.sc.srcs[q] = span(c.stepBuf(q, e, tiny), esz, pre[c.rank], pre[c.rank+1])
			if q != c.rank {
				if err := c.waitData(ctx, q, e, 1, c.sc.srcs[q]); err != nil {
					return err
				}
			}
		}
		lo := pieceLo(k, S, a.counts[c.rank])
		n := pre[c.rank+1] - pre[c.rank]
		a.red.reduceK(span(a.recv, esz, lo, lo+n), c.sc.srcs)
		c.last.add(Stats{Rounds: 1, Sent: uint64(p - 1), Received: uint64(p - 1), Reduced: uint64(p - 1)})
		c.full = true
		c.end(e)
	}
	return nil
}

// flatAllgather: each rank writes its own piece, every rank copies every
// other rank's piece. Blocks: a.counts/a.displs in recv; own block already
// in recv.
func (c *Comm) flatAllgather(ctx context.Context, a *call) error {
	esz, p := a.esz, c.size
	S := 1
	widest := slices.Max(a.counts)
	// Every rank writes and reads the same amount, so segments gain no
	// overlap between ranks, only a working set that stays in cache:
	// allgatherSegBytes, below the size from which Go's copy stores
	// non-temporally.
	cap := min(c.half, allgatherSegBytes) / esz
	for _, n := range a.counts {
		S = max(S, (n+cap-1)/cap)
	}
	own := a.displs[c.rank]
	tiny := S == 1 && widest*esz <= tinyBytes
	fuse := a.send != nil && a.counts[c.rank]*esz >= fuseOwnBytes && !c.ep.Oversubscribed()
	for k := range S {
		e, err := c.begin(ctx)
		if err != nil {
			return err
		}
		n := a.counts[c.rank]
		lo, hi := pieceLo(k, S, n), pieceLo(k+1, S, n)
		mine := span(a.recv, esz, own+lo, own+hi)
		src := mine
		if a.send != nil {
			src = span(a.send, esz, lo, hi)
		}
		fused := fuse && !c.adv.advised()
		if fused {
			c.adv.publishOwn(c.stepBuf(c.rank, e, tiny), mine, src)
		} else {
			c.adv.publish(c.stepBuf(c.rank, e, tiny), src)
		}
		c.post(e, 1)
		if a.send != nil && !fused {
			simd.Copy(mine, src) // the own piece, while it is in cache and the peers read
		}
		for i := 1; i < p; i++ {
			q := c.next(i)
			n := a.counts[q]
			lo, hi := pieceLo(k, S, n), pieceLo(k+1, S, n)
			src := c.stepBuf(q, e, tiny)[:(hi-lo)*esz]
			if err := c.waitData(ctx, q, e, 1, src); err != nil {
				return err
			}
			d := a.displs[q]
			c.adv.copyPeer(span(a.recv, esz, d+lo, d+hi), src)
		}
		c.last.add(Stats{Rounds: 1, Sent: uint64(p - 1), Received: uint64(p - 1)})
		c.full = true
		c.end(e)
	}
	return nil
}

func (c *Comm) flatBcast(ctx context.Context, a *call) error {
	esz, N, M := a.esz, a.count, a.count // M: pipeElems' whole vector, without the call
	if n := N * esz; uint(n-1) >= pipeFitBytes || n > c.half {
		M = c.pipeElems(esz, N)
	}
	for base, tiny := 0, N*esz <= tinyBytes; base == 0 || base < N; base += M {
		e, err := c.begin(ctx)
		if err != nil {
			return err
		}
		seg := span(a.recv, esz, base, min(base+M, N))
		if c.rank == a.root {
			c.adv.publish(c.stepBuf(c.rank, e, tiny), seg)
			c.post(e, 1)
			c.last.Sent += uint64(c.size - 1)
		} else {
			c.post(e, 1)
			src := c.stepBuf(a.root, e, tiny)[:len(seg)]
			if err := c.waitData(ctx, a.root, e, 1, oneLine(src)); err != nil {
				return err
			}
			c.adv.copyPeer(seg, src)
			c.last.Received++
		}
		c.last.Rounds++
		c.end(e)
	}
	return nil
}

// flatScan: rank r reduces the segments of ranks 0..r (0..r-1 for exscan)
// in rank order.
func (c *Comm) flatScan(ctx context.Context, a *call) error {
	esz, N := a.esz, a.count
	M := c.half / esz
	in := a.input()
	last := c.rank
	if a.coll == CollExscan {
		last--
	}
	for base := 0; base == 0 || base < N; base += M {
		m := min(M, N-base)
		e, err := c.begin(ctx)
		if err != nil {
			return err
		}
		simd.Copy(c.slotHalf(c.rank, e), span(in, esz, base, base+m))
		c.post(e, 1)
		for q := 0; q <= last; q++ {
			if q != c.rank {
				if err := c.wait(ctx, q, e, 1); err != nil {
					return err
				}
			}
			c.sc.srcs[q] = c.slotHalf(q, e)[:m*esz]
		}
		if last >= 0 {
			a.red.reduceK(span(a.recv, esz, base, base+m), c.sc.srcs[:last+1])
			c.last.add(Stats{Received: uint64(last), Reduced: uint64(max(0, last))})
		}
		c.last.Rounds++
		c.full = c.rank == c.size-1 && a.coll == CollScan
		c.end(e)
	}
	return nil
}

// flatBarrier posts and waits for every rank's post.
func (c *Comm) flatBarrier(ctx context.Context, _ *call) error {
	e, err := c.begin(ctx)
	if err != nil {
		return err
	}
	c.post(e, 1)
	for i := 1; i < c.size; i++ {
		if err := c.waitData(ctx, c.next(i), e, 1, nil); err != nil {
			return err
		}
	}
	c.last.Rounds++
	c.full = true
	c.end(e)
	return nil
}

// rootFirstBarrier is a barrier in the order of a gather and a release:
// every other rank posts and waits for rank 0, which posts once it has
// seen every rank's post, so that rank 0 leaves first and the others a
// handoff later. A symmetric barrier releases the rank that arrived last
// first; after this one a call rooted at rank 0 finds its root ahead, as
// after MPICH's barrier, at the cost of a second handoff for the ranks
// that arrived first. Rank 0 checks every rank's descriptor, the others
// rank 0's (a mismatch anywhere fails rank 0, whose abort ends the
// others' waits); rank 0's post follows every rank's, so every rank has
// then seen the whole step.
func (c *Comm) rootFirstBarrier(ctx context.Context, _ *call) error {
	e, err := c.begin(ctx)
	if err != nil {
		return err
	}
	if c.rank == 0 {
		for q := 1; q < c.size; q++ {
			if err := c.waitData(ctx, q, e, 1, nil); err != nil {
				return err
			}
		}
		c.post(e, 1)
	} else {
		c.post(e, 1)
		if err := c.waitData(ctx, 0, e, 1, nil); err != nil {
			return err
		}
	}
	c.last.Rounds += 2
	c.full = true
	c.end(e)
	return nil
}

// replicatedAllreduce (allreduce, reduce): every rank copies its segment
// into its half and posts phase 1; every rank (only the root for reduce)
// then reduces the whole segment from all p halves in rank order, straight
// into recv. One phase per step; slot reuse as the flat algorithms'.
func (c *Comm) replicatedAllreduce(ctx context.Context, a *call) error {
	esz, p, N := a.esz, c.size, a.count
	if n := N * esz; n <= c.half && (n < sampledReduceMin || a.coll == CollReduce && n <= smallRootedBytes) {
		return c.replicatedStep(ctx, a)
	}
	M := c.pipeElems(esz, N)
	if a.coll == CollAllreduce && N*esz <= pipelineBytes && !c.ep.Oversubscribed() {
		// Whole: every rank writes and reads, so the quarters of
		// pipeElems overlap nothing; since the reduction reads the own
		// input in place (below) they only add steps.
		M = c.fitElems(esz, N)
	}
	in := a.input()
	reads := a.coll == CollAllreduce || c.rank == a.root
	// A reduce root reads its own input where it is (unless in place,
	// where recv is both the input and the result) and publishes nothing.
	direct := a.coll == CollReduce && reads && a.send != nil
	tiny := N*esz <= tinyBytes
	// The own input is read where it is rather than from the copy just
	// made in the slot, which the peers are reading at the same time, so
	// that the lines are not shared. In place, recv is the input and the
	// result, which the kernel allows only as its first source: rank 0.
	// Not where ranks share CPUs, whose peers do not read at the same
	// time: there the copy is as near as the input.
	ownIn := (a.send != nil || c.rank == 0) && !c.ep.Oversubscribed()
	for base := 0; base == 0 || base < N; base += M {
		m := min(M, N-base)
		e, err := c.begin(ctx)
		if err != nil {
			return err
		}
		// An allreduce from sampledReduceMin to pipelineBytes/8 bytes copies in
		// with non-temporal stores when advised, and otherwise times its
		// reduction in one call of sampleReduceEvery (see sampledReduceMin).
		small := a.coll == CollAllreduce && m*esz >= sampledReduceMin && m*esz < pipelineBytes/8
		advised := small && c.adv.advised()
		sample := small && !advised && !c.ep.Oversubscribed() && c.adv.sample(sampleReduceEvery)
		switch {
		case direct:
			c.sc.srcs[c.rank] = span(in, esz, base, base+m)
		case m*esz < pipelineBytes/8 && a.coll == CollAllreduce:
			// The string copy from simd.StringCopyThreshold, now that
			// the reduction reads the own input where it is (below).
			if advised {
				simd.CopyNT(c.stepBuf(c.rank, e, tiny), span(in, esz, base, base+m))
			} else {
				simd.Copy(c.stepBuf(c.rank, e, tiny), span(in, esz, base, base+m))
			}
		default:
			c.adv.publish(c.stepBuf(c.rank, e, tiny), span(in, esz, base, base+m))
		}
		c.post(e, 1)
		c.last.add(Stats{Rounds: 1, Sent: uint64(p - 1)})
		if reads {
			for i := 1; i <= p; i++ {
				q := c.next(i)
				if q == c.rank && direct {
					continue
				}
				if q == c.rank {
					if ownIn {
						c.sc.srcs[q] = span(in, esz, base, base+m)
					} else {
						c.sc.srcs[q] = c.stepBuf(q, e, tiny)[:m*esz]
					}
					continue
				}
				src := c.stepBuf(q, e, tiny)[:m*esz]
				// What is kept in flight: nothing of a tiny vector,
				// which arrives with the counter; one line for reduce
				// (oneLine); the whole range for allreduce.
				touch := src
				if tiny {
					touch = nil
				} else if a.coll == CollReduce {
					touch = oneLine(src)
				}
				if err := c.waitData(ctx, q, e, 1, touch); err != nil {
					return err
				}
				// Not when sampling: the prefetch would hide what the
				// placement costs.
				if len(src) > prefetchMin && len(src) <= prefetchMax && !sample {
					simd.Prefetch(src)
				}
				c.sc.srcs[q] = src
			}
			// Reads below pipelineBytes/8 are not timed (storeAdvice.timed).
			var t0 int64
			if sample {
				t0 = clock.Nanotime()
			} else if m*esz >= pipelineBytes/8 {
				t0 = c.adv.readStart(m * esz)
			}
			a.red.reduceK(span(a.recv, esz, base, base+m), c.sc.srcs)
			if sample {
				// Advice for longer: sampling costs these
				// calls their Prefetch, and each sample after a window
				// may read data still written non-temporally.
				c.adv.sampledReduceDone(m*esz, t0)
			} else if t0 != 0 {
				c.adv.reduceDone(m*esz, t0)
			}
			c.last.add(Stats{Received: uint64(p - 1), Reduced: uint64(p - 1)})
			c.full = true
		}
		c.end(e)
	}
	return nil
}

// replicatedStep is replicatedAllreduce's one step of a small vector (an
// allreduce below sampledReduceMin bytes, a reduce up to smallRootedBytes)
// without the segment loop and the sampling. Each rank publishes its input
// (up to tinyBytes in the counter's line), but a reduce root that reads it
// in place; every reader reduces every rank's copy straight into recv.
func (c *Comm) replicatedStep(ctx context.Context, a *call) error {
	n, p := a.count*a.esz, c.size
	e, err := c.begin(ctx)
	if err != nil {
		return err
	}
	reduce := a.coll == CollReduce
	in, tiny := a.input(), n <= tinyBytes
	ownIn := (a.send != nil || c.rank == 0) && !c.ep.Oversubscribed()
	switch {
	case reduce && c.rank == a.root && a.send != nil:
		ownIn = true // publishes nothing
	case reduce:
		c.adv.publish(c.stepBuf(c.rank, e, tiny), in)
		ownIn = false
	case tiny:
		copy(c.tiny(c.rank, e), in)
	default:
		copy(c.slotHalf(c.rank, e), in)
	}
	c.post(e, 1)
	c.last.add(Stats{Rounds: 1, Sent: uint64(p - 1)})
	if reduce && c.rank != a.root {
		c.end(e)
		return nil
	}
	srcs := c.sc.srcs
	for q := range srcs {
		if q == c.rank && ownIn {
			srcs[q] = in
			continue
		}
		var src, touch []byte
		if tiny {
			src = c.tiny(q, e)[:n]
		} else {
			src = c.slotHalf(q, e)[:n]
			touch = src
			if reduce {
				touch = oneLine(src)
			}
		}
		if q != c.rank {
			if err := c.waitData(ctx, q, e, 1, touch); err != nil {
				return err
			}
			if n > prefetchMin && n <= prefetchMax {
				simd.Prefetch(src)
			}
		}
		srcs[q] = src
	}
	if k := a.red.k; k != nil && n > 0 {
		k.ReduceK(a.recv, srcs) // reduceK's kernel case, one frame fewer
	} else {
		a.red.reduceK(a.recv, srcs)
	}
	c.last.add(Stats{Received: uint64(p - 1), Reduced: uint64(p - 1)})
	c.full = true
	c.end(e)
	return nil
}

// Pipelining. Vectors of more than pipelineBytes/2 are cut into segments
// of a quarter of the vector, at least pipelineBytes/4 and at most
// pipelineBytes, so that the writer fills one slot half while the readers
// empty the other. How the segments are stored: advice.go.
const (
	pipelineBytes     = 256 << 10
	allgatherSegBytes = 512 << 10 // the flat allgather's segments (flatAllgather)
	pipeFitBytes      = 16 << 10  // pipeElems

	// The replicated reductions prefetch a peer's segment of more than
	// prefetchMin up to prefetchMax bytes whole (simd.Prefetch) as soon as its post is
	// seen: below, the reads are too few to gain; above, the lines would
	// not stay in L1.
	prefetchMin, prefetchMax = 1 << 10, 16 << 10

	// The copy-outs of the flat bcast and allgather prefetch from
	// copyPrefetchMin to copyPrefetchMax bytes (copyPeer), where it gains
	// across dies and costs nothing on one L3.
	copyPrefetchMin, copyPrefetchMax = 2 << 10, 8 << 10

	// The flat allgather copies its own block, where it has at least
	// fuseOwnBytes, into its slot and into its result together, in chunks
	// of fuseChunk (publishOwn), where the ranks have CPUs of their own:
	// the block, the slot and the result no longer fit in L2 together.
	fuseOwnBytes = 512 << 10
	fuseChunk    = 64 << 10
)

// pipeElems is the segment length in elements for a vector of N elements
// of esz bytes that one rank publishes and the others read: a
// quarter of the vector, from 64 KiB to pipelineBytes, above
// pipelineBytes/2. Where the ranks have CPUs of their own, vectors from
// pipeFitBytes are cut in quarters too (segments from pipeFitBytes/4):
// the readers' copies or reductions of one quarter then run while the
// writer publishes the next. The replicated allreduce, where every rank
// writes and reads, keeps vectors up to pipelineBytes whole there (see
// replicatedAllreduce). Ranks that share CPUs keep whole vectors up to
// pipelineBytes/2: each segment is a step, and a step is turns of the run
// queue.
func (c *Comm) pipeElems(esz, N int) int {
	from, least := pipelineBytes/2, pipelineBytes/4
	if !c.ep.Oversubscribed() {
		from, least = pipeFitBytes, pipeFitBytes/4
	}
	total := N * esz
	if total <= from {
		return c.fitElems(esz, N)
	}
	seg := min(max(alignUp((total+3)/4), least), pipelineBytes) // four steps, not five
	return min(c.half/esz, max(seg/esz, 1))
}

// fitElems is the segment length in elements for a vector of N elements
// of esz bytes sent whole: N (at least 1) if it fits a slot half, else
// what does; without a division in the usual case of one step.
func (c *Comm) fitElems(esz, N int) int {
	if N*esz <= c.half {
		return max(N, 1)
	}
	return c.half / esz
}

// flatAlltoall: in each step every rank writes piece k of each of its
// send blocks for the other ranks into its slot half and posts phase 1;
// every rank then copies its own piece from its input and its piece from
// every other rank's half. Segment k of S holds piece k of every block
// (see segment.go), in rank order (c.sc.pre). The pieces sit where every
// rank computes them (the counts are equal, and part of the descriptor),
// in the counter's line when the step's data fits tinyBytes, as
// flatReduceScatter's. Alltoallv has its own (alltoallv.go).
// Slot reuse: as the other flat algorithms'.
func (c *Comm) flatAlltoall(ctx context.Context, a *call) error {
	esz, p := a.esz, c.size
	if N := a.count * esz * p; N <= smallBytes && N <= c.half {
		return c.smallAlltoallStep(ctx, a)
	}
	S, err := numPieces(a.counts, c.half/esz)
	if err != nil {
		return c.fail(err)
	}
	in := a.input()
	for k := 0; k < S; k++ {
		e, err := c.begin(ctx)
		if err != nil {
			return err
		}
		pre, uoff := c.sc.pre, c.sc.uoff
		c.pieces(k, S, a.counts, a.displs)
		tiny := S == 1 && pre[p]*esz <= tinyBytes
		h := c.stepBuf(c.rank, e, tiny)
		for j := range p {
			n := pre[j+1] - pre[j]
			if j == c.rank || n == 0 {
				continue
			}
			// Not publish: every rank writes and reads here, so above
			// smallBytes a store per line gains nothing, and the
			// non-temporal advice of timed copies would send large
			// alltoalls to memory. Its prefetch for writing, though,
			// up to copyPrefetchMax bytes (see storeAdvice.publish).
			piece := h[pre[j]*esz : pre[j+1]*esz]
			if !tiny && len(piece) <= copyPrefetchMax && !c.ep.Oversubscribed() {
				simd.PrefetchW(piece)
			}
			simd.Copy(piece, span(in, esz, uoff[j], uoff[j]+n))
		}
		c.post(e, 1)
		// Own block: straight from the input (the same memory in place),
		// while the peers read.
		if n := pre[c.rank+1] - pre[c.rank]; n > 0 {
			lo := pieceLo(k, S, a.counts[c.rank])
			simd.Copy(span(a.recv, esz, a.rdispls[c.rank]+lo, a.rdispls[c.rank]+lo+n), span(in, esz, uoff[c.rank], uoff[c.rank]+n))
		}
		for i := 1; i < p; i++ {
			q := c.next(i)
			rn := a.rcounts[q]
			// pre is every rank's: the counts are equal.
			lo, hi := pieceLo(k, S, rn), pieceLo(k+1, S, rn)
			src := span(c.stepBuf(q, e, tiny), esz, pre[c.rank], pre[c.rank+1])
			if err := c.waitData(ctx, q, e, 1, src); err != nil {
				return err
			}
			// copyPeer's prefetch without its timing (see the publish),
			// written out: copyPeer does not inline.
			if len(src) >= copyPrefetchMin && len(src) <= copyPrefetchMax && !c.ep.Oversubscribed() {
				simd.Prefetch(src)
			}
			simd.Copy(span(a.recv, esz, a.rdispls[q]+lo, a.rdispls[q]+hi), src)
		}
		c.last.add(Stats{Rounds: 1, Sent: uint64(p - 1), Received: uint64(p - 1)})
		c.full = true
		c.end(e)
	}
	return nil
}

// smallAlltoallStep is flatAlltoall's one step of up to smallBytes, equal
// whole blocks in rank order: each rank publishes its blocks, copies its
// own while the others read, then its block out of each peer's.
func (c *Comm) smallAlltoallStep(ctx context.Context, a *call) error {
	p, n := c.size, a.count*a.esz
	e, err := c.begin(ctx)
	if err != nil {
		return err
	}
	in, tiny := a.input(), n*p <= tinyBytes
	h := c.stepBuf(c.rank, e, tiny)
	for j := range p {
		if j != c.rank {
			c.adv.publish(h[j*n:(j+1)*n], in[j*n:(j+1)*n])
		}
	}
	c.post(e, 1)
	lo := c.rank * n
	simd.Copy(a.recv[lo:lo+n], in[lo:lo+n]) // the same memory in place
	for i := 1; i < p; i++ {
		q := c.next(i)
		src := c.stepBuf(q, e, tiny)[lo : lo+n]
		if err := c.waitData(ctx, q, e, 1, src); err != nil {
			return err
		}
		simd.Copy(a.recv[q*n:(q+1)*n], src)
	}
	l := &c.last // field by field: a Stats value would go through the stack
	l.Rounds, l.Sent, l.Received = l.Rounds+1, l.Sent+uint64(p-1), l.Received+uint64(p-1)
	c.full = true
	c.end(e)
	return nil
}
