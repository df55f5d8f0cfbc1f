package collectives

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/shmcoll/shmcoll/simd"
)

// The Direct algorithms: the buffers of the call live in the ranks' heaps
// in the arena (Alloc), and every rank reads what it needs from the other
// ranks' buffers in place. Nothing is copied into a slot. One step per
// call; the first post of a rank carries the heap offsets of its buffers in
// the inline bytes of its counter's line (putOffsets).
//
//   - allreduce: every rank posts phase 1; rank r reduces block r of the p
//     inputs in rank order, one pass of the k-way kernel as in Flat, into
//     block r of its recv, and posts phase 2; it then copies block q from
//     rank q's recv for every q, and posts phase 3.
//   - reduce-scatter: phase 1; rank r reduces its block from the p sends
//     into recv; phase 2.
//   - allgather(v): phase 1; every rank copies every other rank's block;
//     phase 2.
//   - bcast: the root posts phase 1; every other rank copies the root's
//     buffer and posts phase 2.
//
// Buffer reuse: the caller owns its buffers again when the call returns,
// so a rank returns only once nobody reads them: it waits for the last
// phase of every rank that reads them (every rank; in bcast the root waits
// for the others). In place, rank r writes block r of its input, which only
// r reads, before phase 2, and block q only after rank q posted phase 2,
// after q's last read of it. The own slot half serves as scratch (see
// reduceDirect), as any algorithm writes it: begin ensures that nobody
// reads it any more.

func init() {
	register(CollAllreduce, Direct, (*Comm).directAllreduce, true)
	register(CollReduceScatterBlock, Direct, (*Comm).directReduceScatter, true)
	register(CollReduceScatter, Direct, (*Comm).directReduceScatter, true)
	register(CollAllgather, Direct, (*Comm).directAllgather, true)
	register(CollAllgatherv, Direct, (*Comm).directAllgather, true)
	register(CollBcast, Direct, (*Comm).directBcast, true)
}

// soloMax is the largest vector for which two ranks each reduce both
// blocks on advice (directAllreduce).
const soloMax = 4 << 20

// directChunk is the chunk of an in-place reduction that reduceDirect
// copies into the slot half at a time.
const directChunk = 64 << 10

// putOffsets writes the heap offsets of b0 and b1 (in this rank's heap,
// or empty) into the inline bytes of step e, for the first post.
func (c *Comm) putOffsets(e uint64, b0, b1 []byte) {
	t := c.tiny(c.rank, e)
	for i, b := range [2][]byte{b0, b1} {
		off := 0
		if len(b) > 0 {
			off, _ = c.heapOffset(unsafePtr(b), len(b))
		}
		binary.LittleEndian.PutUint64(t[8*i:], uint64(off))
	}
}

// peerBuf waits for rank q's phase of step e and returns n bytes of q's
// heap at the offset q put in place i of step e.
func (c *Comm) peerBuf(ctx context.Context, q int, e uint64, phase, i, n int) ([]byte, error) {
	if err := c.wait(ctx, q, e, phase); err != nil {
		return nil, err
	}
	off := binary.LittleEndian.Uint64(c.tiny(q, e)[8*i:])
	h := c.ep.Heap(q)
	if off > uint64(len(h)) || uint64(n) > uint64(len(h))-off {
		return nil, c.fail(fmt.Errorf("rank %d published %d bytes at %d of its %d-byte heap", q, n, off, len(h)))
	}
	return h[off : int(off)+n], nil
}

// reduceDirect reduces (with a's operator) srcs (srcs[c.rank] this rank's own) into dst in
// rank order. dst may be srcs[c.rank] exactly (in place), which the k-way
// kernel allows only for the first source: for a rank other than 0 each
// chunk of its own source is then first copied into tmp.
func (c *Comm) reduceDirect(a *call, dst []byte, srcs [][]byte, tmp []byte) {
	r, red := c.rank, &a.red
	own := srcs[r]
	if r == 0 || len(dst) == 0 || unsafePtr(dst) != unsafePtr(own) {
		red.reduceK(dst, srcs)
		return
	}
	step := min(len(tmp), directChunk) / a.esz * a.esz
	cs := c.sc.chunk
	for lo := 0; lo < len(dst); lo += step {
		hi := min(lo+step, len(dst))
		for q, s := range srcs {
			cs[q] = s[lo:hi]
		}
		cs[r] = tmp[:hi-lo]
		simd.Copy(cs[r], own[lo:hi])
		red.reduceK(dst[lo:hi], cs)
	}
}

// directSources sets the sources of this rank's reduction in step e:
// bytes [lo, hi) of every rank's input, this rank's being in (c.sc.srcs),
// and every rank's whole input (c.sc.whole).
func (c *Comm) directSources(ctx context.Context, e uint64, in []byte, lo, hi int) error {
	for q := range c.size {
		if q == c.rank {
			c.sc.srcs[q], c.sc.whole[q] = in[lo:hi], in
			continue
		}
		src, err := c.peerBuf(ctx, q, e, 1, 0, len(in))
		if err != nil {
			return err
		}
		c.sc.srcs[q], c.sc.whole[q] = src[lo:hi], src
	}
	return nil
}

func (c *Comm) directAllreduce(ctx context.Context, a *call) error {
	esz, p, r := a.esz, c.size, c.rank
	in := a.input()
	e, err := c.begin(ctx)
	if err != nil {
		return err
	}
	pre := c.sc.pre
	evenSplit(pre, p, a.count)
	lo, hi := pre[r]*esz, pre[r+1]*esz
	c.putOffsets(e, in, a.recv)
	c.post(e, 1)
	if err := c.directSources(ctx, e, in, lo, hi); err != nil {
		return err
	}
	t0 := c.adv.readStart(hi - lo)
	c.reduceDirect(a, a.recv[lo:hi], c.sc.srcs, c.slotHalf(r, e))
	c.adv.reduceDone(hi-lo, t0)
	c.post(e, 2)
	// Where the store advice is on (vCPUs on different dies, where reading
	// lines another core wrote is slow), two ranks not in place each reduce
	// the other block too, from the inputs, rather than copy the peer's
	// result: the same operands in the same order, so the same bits; phase 3
	// covers the reads either way. Up to soloMax: larger reductions run at
	// the memory's pace, where the second one's reads cost more than a copy.
	solo := p == 2 && a.send != nil && len(in) <= soloMax && c.adv.advised()
	for i := 1; i < p; i++ {
		q := c.next(i)
		qlo, qhi := pre[q]*esz, pre[q+1]*esz
		if solo {
			cs := c.sc.chunk
			for j := range p {
				cs[j] = c.sc.whole[j][qlo:qhi]
			}
			a.red.reduceK(a.recv[qlo:qhi], cs)
			c.last.Reduced++
			continue
		}
		src, err := c.peerBuf(ctx, q, e, 2, 1, qhi)
		if err != nil {
			return err
		}
		simd.Copy(a.recv[qlo:qhi], src[qlo:])
	}
	c.last.add(Stats{Rounds: 2, Sent: 2 * uint64(p-1), Received: 2 * uint64(p-1), Reduced: uint64(p - 1)})
	return c.endAll(ctx, e, 3)
}

func (c *Comm) directReduceScatter(ctx context.Context, a *call) error {
	esz, p, r := a.esz, c.size, c.rank
	e, err := c.begin(ctx)
	if err != nil {
		return err
	}
	c.putOffsets(e, a.send, nil)
	c.post(e, 1)
	lo, hi := a.displs[r]*esz, (a.displs[r]+a.counts[r])*esz
	if err := c.directSources(ctx, e, a.send, lo, hi); err != nil {
		return err
	}
	c.reduceDirect(a, a.recv, c.sc.srcs, c.slotHalf(r, e))
	c.last.add(Stats{Rounds: 1, Sent: uint64(p - 1), Received: uint64(p - 1), Reduced: uint64(p - 1)})
	return c.endAll(ctx, e, 2)
}

func (c *Comm) directAllgather(ctx context.Context, a *call) error {
	esz, p, r := a.esz, c.size, c.rank
	mine := span(a.recv, esz, a.displs[r], a.displs[r]+a.counts[r])
	own := mine
	if a.send != nil {
		own = a.send
	}
	e, err := c.begin(ctx)
	if err != nil {
		return err
	}
	c.putOffsets(e, own, nil)
	c.post(e, 1)
	if a.send != nil {
		simd.Copy(mine, a.send) // while the peers read theirs
	}
	for i := 1; i < p; i++ {
		q := c.next(i)
		src, err := c.peerBuf(ctx, q, e, 1, 0, a.counts[q]*esz)
		if err != nil {
			return err
		}
		simd.Copy(span(a.recv, esz, a.displs[q], a.displs[q]+a.counts[q]), src)
	}
	c.last.add(Stats{Rounds: 1, Sent: uint64(p - 1), Received: uint64(p - 1)})
	return c.endAll(ctx, e, 2)
}

func (c *Comm) directBcast(ctx context.Context, a *call) error {
	e, err := c.begin(ctx)
	if err != nil {
		return err
	}
	if c.rank == a.root {
		c.putOffsets(e, a.recv, nil)
		c.post(e, 1)
		if err := c.waitAll(ctx, e, 2); err != nil {
			return err
		}
		c.last.Sent += uint64(c.size - 1)
		c.full = true
	} else {
		c.post(e, 1)
		src, err := c.peerBuf(ctx, a.root, e, 1, 0, len(a.recv))
		if err != nil {
			return err
		}
		simd.Copy(a.recv, src)
		c.post(e, 2)
		c.last.Received++
	}
	c.last.Rounds++
	c.end(e)
	return nil
}
