package collectives

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/shmcoll/shmcoll/simd"
)

func init() {
	register(CollAlltoall, Flat, (*Comm).flatAlltoall, true)
	register(CollAlltoallv, Flat, (*Comm).flatAlltoall, true)
}

// flatAlltoall (alltoall and alltoallv): in each step every rank writes
// piece k of each of its send blocks for the other ranks into its slot
// half and posts phase 1; every rank then copies its own piece from its
// input and its piece from every other rank's half. Segment k of S holds
// piece k of every block (see segment.go), in rank order (c.sc.pre).
//
// Alltoall's pieces sit where every rank computes them (the counts are
// equal, and part of the descriptor), in the counter's line when the step's
// data fits tinyBytes, as flatReduceScatter's. Alltoallv's sit behind a
// header in every step: the number of segments S_q the sender cuts its
// blocks into (what its send counts need), its send counts and its receive
// counts; a reader finds its piece from the sender's counts and S_q. In the
// first step every rank waits for every peer's header before it copies
// anything, checks the whole matrix (what each rank sends each rank against
// what that rank expects), so that every rank sees a mismatch in the same
// call and aborts, and takes the largest S_q as the number of steps; a
// rank's steps past its own S_q carry empty pieces. The counts travel with
// the data, so an alltoallv takes no step of its own to agree on them.
//
// Slot reuse: the half is written only before phase 1 of a step; halves
// alternate between steps and begin() orders the reuse (see step.go).
func (c *Comm) flatAlltoall(ctx context.Context, a *call) error {
	esz, p := a.esz, c.size
	v := a.coll == CollAlltoallv
	hdr := 0
	if v {
		hdr = alignUp(8 + 16*p)
		if hdr >= c.half {
			return c.fail(fmt.Errorf("%w: slot half of %d bytes too small for %d ranks", ErrInvalidArgument, c.half, p))
		}
	}
	own, err := numPieces(a.counts, (c.half-hdr)/esz)
	if err != nil {
		return c.fail(err)
	}
	le := binary.LittleEndian
	in := a.input()
	S := own // alltoall: the same on every rank; alltoallv: the largest, after the first step
	for k := 0; k < S; k++ {
		e, err := c.begin(ctx)
		if err != nil {
			return err
		}
		pre, uoff := c.sc.pre, c.sc.uoff
		if k < own {
			c.pieces(k, own, a.counts, a.displs)
		} else {
			clear(pre) // past this rank's segments: empty pieces
		}
		tiny := !v && S == 1 && pre[p]*esz <= tinyBytes
		h := c.stepBuf(c.rank, e, tiny)
		d := 0 // where the pieces start
		if v {
			d = a2avData(p, pre[p]*esz)
			le.PutUint64(h, uint64(own))
			for j := range p {
				le.PutUint64(h[8+8*j:], uint64(a.counts[j]))
				le.PutUint64(h[8+8*(p+j):], uint64(a.rcounts[j]))
			}
		}
		for j := range p {
			n := pre[j+1] - pre[j]
			if j == c.rank || n == 0 {
				continue
			}
			// Not publish: every rank writes and reads here, so a store
			// per line gains nothing, and the non-temporal advice of
			// timed copies would send large alltoalls to memory.
			simd.Copy(h[d+pre[j]*esz:d+pre[j+1]*esz], span(in, esz, uoff[j], uoff[j]+n))
		}
		c.post(e, 1)
		if v && k == 0 {
			if S, err = c.alltoallvCheck(ctx, e, own); err != nil {
				return err
			}
		}
		// Own block: straight from the input (the same memory in place),
		// while the peers read.
		if n := pre[c.rank+1] - pre[c.rank]; n > 0 {
			lo := pieceLo(k, own, a.counts[c.rank])
			simd.Copy(span(a.recv, esz, a.rdispls[c.rank]+lo, a.rdispls[c.rank]+lo+n), span(in, esz, uoff[c.rank], uoff[c.rank]+n))
		}
		for i := 1; i < p; i++ {
			q := (c.rank + i) % p
			rn := a.rcounts[q]
			var src []byte
			var lo, hi int
			if v {
				if err := c.wait(ctx, q, e, 1); err != nil {
					return err
				}
				qh := c.slotHalf(q, e)
				sq := int(le.Uint64(qh))
				off, all := 0, 0 // the sender's pieces before this rank's, and all of them
				if k < sq {
					for j := range p {
						m := int(le.Uint64(qh[8+8*j:]))
						if j == c.rank {
							off = all
						}
						all += pieceLo(k+1, sq, m) - pieceLo(k, sq, m)
					}
					lo, hi = pieceLo(k, sq, rn), pieceLo(k+1, sq, rn)
				}
				d := a2avData(p, all*esz)
				if d+(off+hi-lo)*esz > len(qh) {
					return c.mismatch(fmt.Sprintf("rank %d's header does not fit its slot", q))
				}
				src = qh[d+off*esz : d+(off+hi-lo)*esz]
			} else {
				// pre is every rank's: the counts are equal.
				lo, hi = pieceLo(k, S, rn), pieceLo(k+1, S, rn)
				src = span(c.stepBuf(q, e, tiny), esz, pre[c.rank], pre[c.rank+1])
				if err := c.waitData(ctx, q, e, 1, src); err != nil {
					return err
				}
			}
			// copyPeer's prefetch without its timing (see the publish),
			// written out: copyPeer does not inline.
			if len(src) >= copyPrefetchMin && len(src) <= copyPrefetchMax && !c.ep.Oversubscribed() {
				simd.Prefetch(src)
			}
			simd.Copy(span(a.recv, esz, a.rdispls[q]+lo, a.rdispls[q]+hi), src)
		}
		c.last.add(Stats{Rounds: 1, Sent: uint64(p - 1), Received: uint64(p - 1)})
		a.fully = true
		c.end(e)
	}
	return nil
}

// a2avData is where alltoallv's pieces start in a step whose pieces take
// n bytes, p ranks: right after the header when they fit in the rest of
// its line (up to 24 bytes at p=2), so that they travel with it, else at
// the next line. Both the sender and, from the sender's header, its
// readers work it out. Larger pieces start on a line of their own, so
// that their copies are aligned.
func a2avData(p, n int) int {
	if d := 8 + 16*p; d+n <= lineBytes {
		return d
	}
	return alignUp(8 + 16*p)
}

// alltoallvCheck waits for every peer's header of alltoallv's first step
// e and checks the whole matrix of counts: what each rank sends each rank
// against what that rank expects from it. Every rank reads the same
// headers, so every rank finds a mismatch and fails with the same cause.
// It returns the number of steps: the largest S_q of the headers (own is
// this rank's).
func (c *Comm) alltoallvCheck(ctx context.Context, e uint64, own int) (int, error) {
	p, le := c.size, binary.LittleEndian
	hs := c.sc.srcs // the headers, rank by rank
	S := own
	for q := range p {
		if q != c.rank {
			if err := c.wait(ctx, q, e, 1); err != nil {
				return 0, err
			}
		}
		hs[q] = c.slotHalf(q, e)
		sq := int(le.Uint64(hs[q]))
		if sq < 1 {
			return 0, c.mismatch(fmt.Sprintf("rank %d cuts its blocks into %d segments", q, sq))
		}
		S = max(S, sq)
	}
	for q := range p {
		for t := range p {
			if sent, want := le.Uint64(hs[q][8+8*t:]), le.Uint64(hs[t][8+8*(p+q):]); sent != want {
				return 0, c.mismatch(fmt.Sprintf("rank %d expects %d elements from rank %d, which sends %d", t, int(want), q, int(sent)))
			}
		}
	}
	return S, nil
}
