package collectives

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/shmcoll/shmcoll/simd"
)

// flatAlltoall (alltoall and alltoallv): in each step every rank writes
// piece k of each of its send blocks for the other ranks into its slot
// half and posts phase 1; every rank then copies its own piece from its
// input and its piece from every other rank's half. Segment k of S holds
// piece k of every block (see segment.go), in rank order (c.sc.pre).
//
// Alltoall's pieces sit where every rank computes them (the counts are
// equal, and part of the descriptor), in the counter's line when the step's
// data fits tinyBytes, as flatReduceScatter's. Alltoallv's sit behind a
// table of (offset, length) per destination, and it first agrees on S in a
// step of its own: every rank publishes the S its own blocks need and its
// send counts, all take the largest S, and each checks that what every
// source sends it is what it expects to receive, so that mismatched counts
// abort the call on every rank (all wait for all in the data steps) before
// data moves.
//
// Slot reuse: the half is written only before phase 1 of a step; halves
// alternate between steps and begin() orders the reuse (see step.go).
func (c *Comm) flatAlltoall(ctx context.Context) error {
	a := &c.cur
	esz, p := a.esz, c.size
	v := a.coll == CollAlltoallv
	hdr := 0
	if v {
		hdr = alignUp(16 * p)
		if hdr >= c.half || 8*(p+1) > c.half {
			return c.fail(fmt.Errorf("%w: slot half of %d bytes too small for %d ranks", ErrInvalidArgument, c.half, p))
		}
	}
	S, err := numPieces(a.counts, (c.half-hdr)/esz)
	if err != nil {
		return c.fail(err)
	}
	le := binary.LittleEndian
	if v {
		e, err := c.begin(ctx)
		if err != nil {
			return err
		}
		h := c.slotHalf(c.rank, e)
		le.PutUint64(h, uint64(S))
		for j, n := range a.counts {
			le.PutUint64(h[8+8*j:], uint64(n))
		}
		c.post(e, 1)
		for i := 1; i < p; i++ {
			q := (c.rank + i) % p
			if err := c.wait(ctx, q, e, 1); err != nil {
				return err
			}
			qh := c.slotHalf(q, e)
			S = max(S, int(le.Uint64(qh)))
			if n := int(le.Uint64(qh[8+8*c.rank:])); n != a.rcounts[q] {
				return c.mismatch(fmt.Sprintf("rank %d expects %d elements from rank %d, which sends %d", c.rank, a.rcounts[q], q, n))
			}
		}
		c.last.Rounds++
		a.fully = true
		c.end(e)
	}
	in := a.input()
	for k := range S {
		e, err := c.begin(ctx)
		if err != nil {
			return err
		}
		c.pieces(k, S, a.counts, a.displs)
		pre, uoff := c.sc.pre, c.sc.uoff
		tiny := !v && S == 1 && pre[p]*esz <= tinyBytes
		h := c.stepBuf(c.rank, e, tiny)
		for j := range p {
			n := pre[j+1] - pre[j]
			if v {
				le.PutUint64(h[16*j:], uint64(pre[j]))
				le.PutUint64(h[16*j+8:], uint64(n))
			}
			if j == c.rank || n == 0 {
				continue
			}
			// Not publish: below the string copy's threshold its store
			// per line lost (np=2, 2 KiB blocks, interleaved: one L3 0.180
			// -> 0.200 µs, different dies 0.575 -> 0.696; 0.5-1.5 KiB
			// blocks even), and above it the non-temporal advice of its
			// timed copies slowed 16 MiB and 64 MiB on one L3 (1034 ->
			// 1282 µs, 5586 -> 8154).
			simd.Copy(h[hdr+pre[j]*esz:hdr+pre[j+1]*esz], span(in, esz, uoff[j], uoff[j]+n))
		}
		c.post(e, 1)
		// Own block: straight from the input (the same memory in place),
		// while the peers read.
		myLo := uoff[c.rank]
		myN := pre[c.rank+1] - pre[c.rank]
		rn := a.rcounts[c.rank]
		lo, hi := pieceLo(k, S, rn), pieceLo(k+1, S, rn)
		if myN != hi-lo {
			return c.mismatch(fmt.Sprintf("rank %d sends %d elements to itself but receives %d", c.rank, a.counts[c.rank], rn))
		}
		simd.Copy(span(a.recv, esz, a.rdispls[c.rank]+lo, a.rdispls[c.rank]+hi), span(in, esz, myLo, myLo+myN))
		for i := 1; i < p; i++ {
			q := (c.rank + i) % p
			rn := a.rcounts[q]
			lo, hi := pieceLo(k, S, rn), pieceLo(k+1, S, rn)
			dst := span(a.recv, esz, a.rdispls[q]+lo, a.rdispls[q]+hi)
			var src []byte
			if v {
				if err := c.wait(ctx, q, e, 1); err != nil {
					return err
				}
				qh := c.slotHalf(q, e)
				off, n := int(le.Uint64(qh[16*c.rank:])), int(le.Uint64(qh[16*c.rank+8:]))
				if n != hi-lo || hdr+(off+n)*esz > len(qh) {
					return c.mismatch(fmt.Sprintf("rank %d expects %d elements from rank %d, which sends a different number", c.rank, rn, q))
				}
				src = qh[hdr+off*esz : hdr+(off+n)*esz]
			} else {
				// pre is every rank's: the counts are equal.
				src = span(c.stepBuf(q, e, tiny), esz, pre[c.rank], pre[c.rank+1])
				if err := c.waitData(ctx, q, e, 1, src); err != nil {
					return err
				}
			}
			if len(src) >= copyPrefetchMin && len(src) <= copyPrefetchMax && !c.ep.Oversubscribed() {
				simd.Prefetch(src) // as copyPeer, which also times large copies (see the publish)
			}
			simd.Copy(dst, src)
		}
		c.last.Rounds++
		c.last.Sent += uint64(p - 1)
		c.last.Received += uint64(p - 1)
		a.fully = true
		c.end(e)
	}
	return nil
}

// mismatch aborts the communicator with a descriptor-mismatch cause.
func (c *Comm) mismatch(what string) error {
	c.ep.Abort(fmt.Errorf("%w: %v call %d: %s", ErrMismatch, c.cur.coll, c.seq, what))
	return c.fail(c.ep.Err())
}
