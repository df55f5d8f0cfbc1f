package collectives

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"

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
// Bcast, scatter, gather, allgather(v), scan: the ranks that provide data
// copy it into their half and post phase 1; the others read it after
// waiting for that phase.
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
	register(CollGather, Flat, (*Comm).flatGather, true)
	register(CollScatter, Flat, (*Comm).flatScatter, true)
	register(CollScan, Flat, (*Comm).flatScan, true)
	register(CollExscan, Flat, (*Comm).flatScan, true)
	register(CollBarrier, Flat, (*Comm).flatBarrier, true)
	register(CollAllreduce, Replicated, (*Comm).replicatedAllreduce, true)
	register(CollReduce, Replicated, (*Comm).replicatedAllreduce, true)
}

// alignUp rounds n up to a cache line.
func alignUp(n int) int { return (n + lineBytes - 1) &^ (lineBytes - 1) }

// flatSegElems is the largest segment m with m elements and a result area of
// ceil(m/p) elements (line-aligned) in one slot half.
func (c *Comm) flatSegElems() (int, error) {
	esz, p := c.cur.esz, c.size
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

func (c *Comm) flatAllreduce(ctx context.Context) error {
	a := &c.cur
	esz, p, N := a.esz, c.size, a.count
	M, err := c.flatSegElems()
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
		c.last.Rounds += 2
		c.last.Sent += 2 * uint64(p-1)
		c.last.Received += uint64(p - 1)
		c.last.Reduced += uint64(p - 1)
		if !root || c.rank == a.root {
			for i := 1; i <= p; i++ {
				q := (c.rank + i) % p
				if q != c.rank {
					if err := c.wait(ctx, q, e, 2); err != nil {
						return err
					}
				}
				n := pre[q+1] - pre[q]
				simd.Copy(span(a.recv, esz, base+pre[q], base+pre[q]+n), c.slotHalf(q, e)[res:res+n*esz])
			}
			c.last.Received += uint64(p - 1)
			a.fully = true
		}
		c.end(e)
	}
	return nil
}

func (c *Comm) flatReduceScatter(ctx context.Context) error {
	a := &c.cur
	esz, p := a.esz, c.size
	S, err := numPieces(a.counts, c.half/esz)
	if err != nil {
		return c.fail(err)
	}
	for k := range S {
		e, err := c.begin(ctx)
		if err != nil {
			return err
		}
		c.pieces(k, S, a.counts, a.displs)
		pre, uoff := c.sc.pre, c.sc.uoff
		tiny := S == 1 && pre[p]*esz <= tinyBytes
		h := c.stepBuf(c.rank, e, tiny)
		for j := range p {
			simd.Copy(span(h, esz, pre[j], pre[j+1]), span(a.send, esz, uoff[j], uoff[j]+pre[j+1]-pre[j]))
		}
		c.post(e, 1)
		for q := range p {
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
		c.last.Rounds++
		c.last.Sent += uint64(p - 1)
		c.last.Received += uint64(p - 1)
		c.last.Reduced += uint64(p - 1)
		a.fully = true
		c.end(e)
	}
	return nil
}

// flatAllgather: each rank writes its own piece, every rank copies every
// other rank's piece. Blocks: a.counts/a.displs in recv; own block already
// in recv.
func (c *Comm) flatAllgather(ctx context.Context) error {
	a := &c.cur
	esz, p := a.esz, c.size
	S := 1
	widest := slices.Max(a.counts)
	// Every rank writes and reads the same amount, so segments gain no
	// overlap between ranks, only a working set that stays in cache: 512
	// KiB (np=2, same-L3: 1 MiB 33 -> 31 µs, 4 MiB 115 -> 112 µs against
	// the quarter-vector segments of pipeElems), below the 1 MiB from which
	// Go's copy stores non-temporally.
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
		fused := fuse && !c.advisedNT()
		if fused {
			c.publishOwn(c.stepBuf(c.rank, e, tiny), mine, src)
		} else {
			c.publish(c.stepBuf(c.rank, e, tiny), src)
		}
		c.post(e, 1)
		if a.send != nil && !fused {
			simd.Copy(mine, src) // the own piece, while it is in cache and the peers read
		}
		for i := 1; i < p; i++ {
			q := (c.rank + i) % p
			n := a.counts[q]
			lo, hi := pieceLo(k, S, n), pieceLo(k+1, S, n)
			src := c.stepBuf(q, e, tiny)[:(hi-lo)*esz]
			if err := c.waitData(ctx, q, e, 1, src); err != nil {
				return err
			}
			d := a.displs[q]
			c.copyPeer(span(a.recv, esz, d+lo, d+hi), src)
		}
		c.last.Rounds++
		c.last.Sent += uint64(p - 1)
		c.last.Received += uint64(p - 1)
		a.fully = true
		c.end(e)
	}
	return nil
}

func (c *Comm) flatBcast(ctx context.Context) error {
	a := &c.cur
	esz, N := a.esz, a.count
	M := c.pipeElems(N)
	tiny := N*esz <= tinyBytes
	for base := 0; base == 0 || base < N; base += M {
		m := min(M, N-base)
		e, err := c.begin(ctx)
		if err != nil {
			return err
		}
		seg := span(a.recv, esz, base, base+m)
		if c.rank == a.root {
			c.publish(c.stepBuf(c.rank, e, tiny), seg)
			c.post(e, 1)
			c.last.Sent += uint64(c.size - 1)
		} else {
			c.post(e, 1)
			src := c.stepBuf(a.root, e, tiny)[:len(seg)]
			if err := c.waitData(ctx, a.root, e, 1, src); err != nil {
				return err
			}
			c.copyPeer(seg, src)
			c.last.Received++
		}
		c.last.Rounds++
		c.end(e)
	}
	return nil
}

func (c *Comm) flatGather(ctx context.Context) error {
	a := &c.cur
	esz, p, n := a.esz, c.size, a.count
	M := c.half / esz
	S := max(1, (n+M-1)/M)
	for k := range S {
		lo, hi := pieceLo(k, S, n), pieceLo(k+1, S, n)
		e, err := c.begin(ctx)
		if err != nil {
			return err
		}
		if c.rank != a.root {
			simd.Copy(c.slotHalf(c.rank, e), span(a.send, esz, lo, hi))
			c.post(e, 1)
			c.last.Sent++
		} else {
			c.post(e, 1)
			for i := 1; i < p; i++ {
				q := (c.rank + i) % p
				if err := c.wait(ctx, q, e, 1); err != nil {
					return err
				}
				simd.Copy(span(a.recv, esz, q*n+lo, q*n+hi), c.slotHalf(q, e))
			}
			c.last.Received += uint64(p - 1)
			a.fully = true
		}
		c.last.Rounds++
		c.end(e)
	}
	return nil
}

func (c *Comm) flatScatter(ctx context.Context) error {
	a := &c.cur
	esz, p, n := a.esz, c.size, a.count
	a.counts, a.displs = c.sc.counts, c.sc.displs
	for j := range p {
		a.counts[j], a.displs[j] = n, j*n
	}
	S, err := numPieces(a.counts, c.half/esz)
	if err != nil {
		return c.fail(err)
	}
	for k := range S {
		e, err := c.begin(ctx)
		if err != nil {
			return err
		}
		c.pieces(k, S, a.counts, a.displs)
		pre, uoff := c.sc.pre, c.sc.uoff
		if c.rank == a.root {
			h := c.slotHalf(c.rank, e)
			for j := range p {
				if j != c.rank {
					simd.Copy(span(h, esz, pre[j], pre[j+1]), span(a.send, esz, uoff[j], uoff[j]+pre[j+1]-pre[j]))
				}
			}
			c.post(e, 1)
			c.last.Sent += uint64(p - 1)
		} else {
			c.post(e, 1)
			if err := c.wait(ctx, a.root, e, 1); err != nil {
				return err
			}
			lo := pieceLo(k, S, n)
			simd.Copy(span(a.recv, esz, lo, lo+pre[c.rank+1]-pre[c.rank]), span(c.slotHalf(a.root, e), esz, pre[c.rank], pre[c.rank+1]))
			c.last.Received++
		}
		c.last.Rounds++
		c.end(e)
	}
	return nil
}

// flatScan: rank r reduces the segments of ranks 0..r (0..r-1 for exscan)
// in rank order.
func (c *Comm) flatScan(ctx context.Context) error {
	a := &c.cur
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
			c.last.Received += uint64(last)
			c.last.Reduced += uint64(max(0, last))
		}
		c.last.Rounds++
		a.fully = c.rank == c.size-1 && a.coll == CollScan
		c.end(e)
	}
	return nil
}

func (c *Comm) flatBarrier(ctx context.Context) error {
	e, err := c.begin(ctx)
	if err != nil {
		return err
	}
	c.last.Rounds++
	return c.endAll(ctx, e, 1)
}

// replicatedAllreduce (allreduce, reduce): every rank copies its segment
// into its half and posts phase 1; every rank (only the root for reduce)
// then reduces the whole segment from all p halves in rank order, straight
// into recv. One phase per step. Slot reuse: the half is written only
// before phase 1 (structure); across steps see step.go.
func (c *Comm) replicatedAllreduce(ctx context.Context) error {
	a := &c.cur
	esz, p, N := a.esz, c.size, a.count
	M := c.pipeElems(N)
	if a.coll == CollAllreduce && N*esz <= pipelineBytes && !c.ep.Oversubscribed() {
		// Whole: every rank writes and reads, so the quarters of
		// pipeElems overlap nothing; since the reduction reads the own
		// input in place (below) they only add steps. np=2, -algo
		// replicated, interleaved: one L3 32K 1.46 -> 1.29 µs, 64K
		// 2.55 -> 2.47-2.64, 256K 10.5 -> 9.6; different dies 32K 3.76
		// -> 2.73, 64K 5.50 -> 4.83, 128K 10.3 -> 8.8, 256K 19.3 -> 16.4.
		M = max(1, min(N, c.half/esz))
	}
	in := a.input()
	reads := a.coll == CollAllreduce || c.rank == a.root
	// A reduce root reads its own input where it is (unless in place,
	// where recv is both the input and the result) and publishes nothing.
	direct := a.coll == CollReduce && reads && a.send != nil
	tiny := N*esz <= tinyBytes
	// The own input is read where it is rather than from the copy just
	// made in the slot, which the peers are reading at the same time:
	// np=2, one L3, allreduce of 16 KiB, per rank: reduction 430 -> 210
	// ns. In place, recv is the input and the result, which the kernel
	// allows only as its first source: rank 0.
	ownIn := a.send != nil || c.rank == 0
	for base := 0; base == 0 || base < N; base += M {
		m := min(M, N-base)
		e, err := c.begin(ctx)
		if err != nil {
			return err
		}
		// An allreduce from ntSmall to pipelineBytes/8 bytes copies in
		// with non-temporal stores when advised, and otherwise times its
		// reduction in one call of sampleSmallEvery (see ntSmall).
		small := a.coll == CollAllreduce && m*esz >= ntSmall && m*esz < pipelineBytes/8
		advised := small && c.advisedNT()
		sample := small && !advised && !c.ep.Oversubscribed() && c.sample(sampleSmallEvery)
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
			c.publish(c.stepBuf(c.rank, e, tiny), span(in, esz, base, base+m))
		}
		c.post(e, 1)
		c.last.Rounds++
		c.last.Sent += uint64(p - 1)
		if reads {
			for i := 1; i <= p; i++ {
				q := (c.rank + i) % p
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
				if err := c.waitData(ctx, q, e, 1, src); err != nil {
					return err
				}
				// Not when sampling: the prefetch would hide what the
				// placement costs.
				if len(src) >= prefetchMin && len(src) <= prefetchMax && !sample {
					simd.Prefetch(src)
				}
				c.sc.srcs[q] = src
			}
			var t0 int64
			if sample {
				t0 = clock.Nanotime()
			} else {
				t0 = c.copyStart(m * esz)
			}
			a.red.reduceK(span(a.recv, esz, base, base+m), c.sc.srcs)
			if sample {
				// A window longer than ntCalls: sampling costs these
				// calls their Prefetch, and each sample after a window
				// may read data still written non-temporally.
				c.judgeFor(&c.slow[0], m*esz, t0, slowReduce, ntSmallCalls)
			} else {
				c.reduceDone(m*esz, t0)
			}
			c.last.Received += uint64(p - 1)
			c.last.Reduced += uint64(p - 1)
			a.fully = true
		}
		c.end(e)
	}
	return nil
}

// Pipelining and publishing. Vectors of more than pipelineBytes/2 are cut
// into segments of a quarter of the vector, at least pipelineBytes/4 and at
// most pipelineBytes, so that the writer fills one slot half while the
// readers empty the other (np=2, same-L3 placement: bcast at 1 MiB 66 ->
// 33 µs, reduce 67 -> 38 µs, allgather at 4 MiB 396 -> 230 µs).
//
// How the writer should store depends on where the hypervisor put the
// vCPUs. When the two share an L3, a reader gets lines that sit modified
// in the writer's cache at 50-60 bytes/ns, and non-temporal stores (the
// reader then reads memory) halve that. When they sit on different dies,
// vector loads of those lines crawl (a memmove bcast at 1 MiB: 140 µs,
// 44 µs with non-temporal stores). Copies use the string copy
// (simd.Copy), which reads them at 25-36 bytes/ns even there, so what
// still crawls are the reductions that read a peer's slot (5-7 bytes/ns
// of result against about 20 on one L3). So readers time their large
// reads (copies and those reductions), and writers time their regular
// stores; two reads or two writes in a row (counted apart, see judge)
// slower than slowRead (copies) or slowReduce (reductions) advise
// non-temporal stores for the next ntCalls calls, through a word in the
// rank's descriptor area that every writer checks before a large publish
// (and the circulant allreduce before the reduction its peers read next);
// then regular stores are tried again. The slow side need not be the same
// for both ranks. Ranks that share CPUs (oversubscribed processes) always
// store regularly: the reader most likely runs on the writer's CPU.
const (
	pipelineBytes     = 256 << 10
	allgatherSegBytes = 512 << 10
	pipeFitBytes      = 16 << 10 // pipeElems
	observeBytes      = 64 << 10 // copies timed from this size
	sampleEvery       = 8        // and smaller ones in one call out of this many
	slowRead          = 14       // bytes/ns: below, the peers are on another die
	slowReduce        = 10       // bytes/ns of result, for a reduction reading a peer's slot
	ntCalls           = 64

	// A replicated allreduce from ntSmall bytes also times its reduction
	// in one call of sampleSmallEvery (that call without Prefetch), and its
	// copy-in takes non-temporal stores when advised: with the vCPUs on
	// different dies, its reduction then reads the peers' halves from
	// memory instead of the other die's caches. Below 2 KiB the reading
	// is too short to tell the placement.
	ntSmall          = 2 << 10
	ntSmallCalls     = 1024 // the advice these samples give, in calls
	sampleSmallEvery = 32   // calls per sample: each costs its Prefetch and two clock reads

	// The replicated reductions prefetch a peer's segment of prefetchMin
	// to prefetchMax bytes whole (simd.Prefetch) as soon as its post is
	// seen. np=2, vCPUs on different dies: allreduce 2-8 KiB 1.01-2.40 ->
	// 0.98-2.19 µs, reduce 2-16 KiB 0.70-1.63 -> 0.63-1.35; on one L3:
	// allreduce 4 KiB 0.37 -> 0.34, reduce 16 KiB 0.52 -> 0.55, the rest
	// within 0.01 µs.
	prefetchMin, prefetchMax = 1 << 10, 16 << 10

	// The copy-outs of the flat bcast and allgather prefetch 2-8 KiB
	// (copyPeer). np=2, vCPUs on different dies: bcast of 2-8 KiB
	// 0.706-0.971 -> 0.621-0.881 µs, allgather of 4-8 KiB (blocks of 2-4
	// KiB) 0.701-0.942 -> 0.621-0.861; on one L3 the same sizes within
	// 0.01 µs. Outside that range it lost: allgather of 2 KiB (1 KiB
	// blocks) 0.671 -> 0.722 on different dies, and on one L3 copies of
	// 16 KiB 4-6 % (bcast of 16 KiB 0.485 -> 0.511, allgather of 32 KiB
	// 0.626 -> 0.666), where on different dies bcast of 16 KiB gained 10 %.
	copyPrefetchMin, copyPrefetchMax = 2 << 10, 8 << 10

	// The flat allgather copies its own block, where it has at least
	// fuseOwnBytes, into its slot and into its result together, in chunks
	// of fuseChunk (publishOwn), where the ranks have CPUs of their own.
	// np=2, interleaved runs: one L3, 1M 22.7-23.4 -> 22.0-23.4 µs, 2M
	// 45.4-51.7 -> 42.7-44.4, 4M 88.8-97.0 -> 84.7-87.3; different dies,
	// 1M even (32.8-33.9 against 32.2-34.0), 4M 130.3-134.1 -> 126.3-130.9.
	// Blocks of 256 KiB (allgather of 512 KiB) were 3-4 % slower at both
	// placements, 8M and 16M within 2 % either way, np=4 (ranks sharing
	// CPUs) within 2.5 %. Chunks of 32 and 128-256 KiB were slower on
	// different dies, and 4 KiB chunks took twice as long there; so did
	// PREFETCHW of the next chunk's slot lines (16-64 KiB ahead: 1M 32.7 ->
	// 35.4-38.7), and non-temporal stores into the slot gained nothing.
	fuseOwnBytes = 512 << 10
	fuseChunk    = 64 << 10
)

// pipeElems is the segment length in elements for a vector of N elements
// of the current call that one rank publishes and the others read: a
// quarter of the vector, from 64 KiB to pipelineBytes, above
// pipelineBytes/2. Where the ranks have CPUs of their own, vectors from
// pipeFitBytes are cut in quarters too (segments from pipeFitBytes/4):
// the readers' copies or reductions of one quarter then run while the
// writer publishes the next, which pays from 32 KiB (np=2, one L3, -algo
// runs: flat bcast 32K-128K 0.86-3.16 -> 0.78-2.55 µs, replicated reduce
// 1.19-4.48 -> 1.06-3.89). The replicated allreduce, where every rank
// writes and reads, keeps vectors up to pipelineBytes whole there (see
// replicatedAllreduce). Ranks that share CPUs keep whole vectors up to
// pipelineBytes/2: each segment is a step, and a step is turns of the run
// queue.
func (c *Comm) pipeElems(N int) int {
	esz := c.cur.esz
	M := c.half / esz
	from, least := pipelineBytes/2, pipelineBytes/4
	if !c.ep.Oversubscribed() {
		from, least = pipeFitBytes, pipeFitBytes/4
	}
	if total := N * esz; total > from {
		seg := min(max(alignUp((total+3)/4), least), pipelineBytes) // four steps, not five
		M = min(M, max(seg/esz, 1))
	}
	return M
}

// advice is rank q's non-temporal advice word (its shm hint word): the
// call number up to which it asks writers for non-temporal stores. It used
// to sit in the line of q's descriptor for odd steps, which q writes at
// every such step: each check by another rank then moved that line away
// and back.
func (c *Comm) advice(q int) *atomic.Uint64 { return c.ep.Hint(q) }

// advisedNT reports whether some rank (this one included) asks for
// non-temporal stores in this call.
func (c *Comm) advisedNT() bool {
	for q := range c.size {
		if c.advice(q).Load() >= c.seq {
			return true
		}
	}
	return false
}

// publish copies src into this rank's slot (dst) for other ranks to read.
func (c *Comm) publish(dst, src []byte) {
	if len(src) > lineBytes && len(src) < simd.StringCopyThreshold {
		// One store per line of the slot, which the readers poll
		// (WaitData), up to where the string copy takes over: np=2,
		// same-L3, interleaved runs: allgather 512 B 0.140 -> 0.110 µs,
		// reduce 256 B 0.161 -> 0.141, bcast 512 B 0.140 -> 0.120. From 1
		// KiB to 4 KiB it took the place of memmove: np=2, different dies,
		// allgather of 3 KiB (1.5 KiB blocks) 0.631-0.641 -> 0.521-0.530
		// µs, bcast of 1.5 KiB 0.591-0.601 -> 0.561, of 3 KiB 0.741-0.781
		// -> 0.681-0.691, reduce_scatter_block of 3 and 6 KiB 0.621-0.641
		// -> 0.561-0.566 and 0.961-0.981 -> 0.886-0.891, reduce of 1.5 KiB
		// 0.591-0.601 -> 0.561-0.591, of 3 KiB 0.691-0.701 -> 0.681-0.691;
		// one L3 within 5 ns (reduce of 1.5-3 KiB 0-5 ns slower, allgather
		// of 3 KiB 5 ns and reduce_scatter_block of 6 KiB 15-25 ns
		// faster); np=4 and np=8 (ranks sharing CPUs) within 1-3 % either
		// way. From 4 KiB the string copy stays ahead (bcast of 4 KiB on
		// different dies: 0.72 against 0.81 µs). The small-call path keeps
		// its 1 KiB (smallBytes).
		simd.CopyLines(dst, src)
		return
	}
	if len(src) < pipelineBytes/8 || c.ep.Oversubscribed() {
		simd.Copy(dst, src)
		return
	}
	if c.advisedNT() {
		simd.CopyNT(dst, src)
		return
	}
	var t0 int64
	if c.observed(len(src)) {
		t0 = clock.Nanotime()
	}
	simd.Copy(dst, src)
	c.judge(&c.slow[1], len(src), t0, slowRead)
}

// publishOwn copies src both into this rank's slot (dst) and into its own
// block of the result (mine), fuseChunk bytes at a time, so that src is
// read once, from the nearest cache: the flat allgather's publish and own
// copy of each piece of an own block of at least fuseOwnBytes, where src,
// the slot and the result no longer fit in L2 together. Both copies are
// the string copy: an AVX-512 loop that stored each load twice took three
// times as long on vCPUs on different dies (np=2, 1 MiB: 96.7 µs against
// 31.8). The pair of copies is timed as a publish of twice the bytes
// (judge).
func (c *Comm) publishOwn(dst, mine, src []byte) {
	var t0 int64
	if c.observed(len(src)) {
		t0 = clock.Nanotime()
	}
	for lo := 0; lo < len(src); lo += fuseChunk {
		hi := min(lo+fuseChunk, len(src))
		simd.Copy(dst[lo:hi], src[lo:hi])
		simd.Copy(mine[lo:hi], src[lo:hi])
	}
	c.judge(&c.slow[1], 2*len(src), t0, slowRead)
}

// observed reports whether a copy of n bytes is timed: from observeBytes
// always, from pipelineBytes/8 (the smallest copy published
// non-temporally) in one call out of sampleEvery, where two clock reads
// would cost up to a tenth of the copy (np=2, vCPUs on different dies:
// allgather of 64 KiB copies 32 KiB blocks and was never advised).
func (c *Comm) observed(n int) bool {
	return n >= observeBytes || n >= pipelineBytes/8 && c.sample(sampleEvery)
}

// copyStart returns the time of a copy of n bytes out of a peer's slot
// that copyDone should judge, or 0.
func (c *Comm) copyStart(n int) int64 {
	if !c.observed(n) || c.ep.Oversubscribed() || c.advisedNT() {
		return 0
	}
	return clock.Nanotime()
}

// sample reports true once in every of its calls. Counted apart from the
// call number, whose remainder is the same at every call of a program that
// alternates two collectives (a barrier and an allreduce): sampling on it
// timed either all of them or none.
func (c *Comm) sample(every uint64) bool {
	c.samples++
	return c.samples%every == 0
}

// copyPeer copies src, out of a peer's slot whose post was just seen,
// into dst (as long): the copy-outs of the flat bcast and allgather. From
// copyPrefetchMin to copyPrefetchMax bytes it first asks for every line of src
// (simd.Prefetch), as the replicated reductions do, unless the ranks share
// CPUs (np=8 on 2 CPUs, allgather of 16-32 KiB, 2-4 KiB blocks: 2-3 %
// slower with it); large copies are timed (copyStart, copyDone).
func (c *Comm) copyPeer(dst, src []byte) {
	n := len(src)
	if n >= copyPrefetchMin && n <= copyPrefetchMax && !c.ep.Oversubscribed() {
		simd.Prefetch(src)
	}
	t0 := c.copyStart(n)
	simd.Copy(dst, src)
	c.copyDone(n, t0)
}

// copyDone judges a copy of n bytes out of a peer's slot that began at
// t0 (0: not timed).
func (c *Comm) copyDone(n int, t0 int64) { c.judge(&c.slow[0], n, t0, slowRead) }

// reduceDone is copyDone for a reduction of n bytes (the result) that
// read a peer's slot.
func (c *Comm) reduceDone(n int, t0 int64) { c.judge(&c.slow[0], n, t0, slowReduce) }

// judge judges a timed copy: two slow ones of a kind in a row (reads, or
// publishing writes) ask for non-temporal stores. The kinds are counted
// apart: on vCPUs on different dies the reads of lines another core wrote
// crawl while the writes need not, and one count that each fast write
// reset never reached two for an allreduce that alternates them (np=2,
// 1 MiB: 159 µs, against 107 with non-temporal stores).
func (c *Comm) judge(slow *int, n int, t0 int64, rate int64) {
	c.judgeFor(slow, n, t0, rate, ntCalls)
}

// judgeFor is judge with advice for the next calls calls.
func (c *Comm) judgeFor(slow *int, n int, t0 int64, rate int64, calls uint64) {
	if t0 != 0 {
		c.judgeRate(slow, n, clock.Nanotime()-t0, rate, calls)
	}
}

// judgeRate judges n bytes in d ns against rate (bytes/ns): a fast one
// resets the count slow, the second slow one in a row asks for
// non-temporal stores for the next calls calls (judge, probeRead).
func (c *Comm) judgeRate(slow *int, n int, d int64, rate int64, calls uint64) {
	if d <= 0 || int64(n) >= rate*d {
		*slow = 0
		return
	}
	if *slow++; *slow >= 2 {
		*slow = 0
		c.advice(c.rank).Store(c.seq + calls)
	}
}
