package collectives

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/shmcoll/shmcoll/simd"
)

// Alltoallv, Flat and Single alike (docs/DESIGN.md, Cross-memory attach):
// an alltoallv's sizes differ per rank, so no rank can choose how blocks
// travel for the others; each sender chooses for its own and says so in a
// header its readers read before copying anything. In each step a rank
// writes into its slot half the header (S_q, the segments it cuts its
// blocks into, then its send and receive counts), then either its pieces
// of segment k for every peer, or, with a2avAttach set in the header's
// first word (S_q = 1), a Single table (single.go) offering each peer its
// block in the send buffer, which that peer reads by cross-memory attach
// in the first step; and posts phase 1. In the first step every rank
// checks the whole matrix of counts from the headers, so that every rank
// finds a mismatch in the same call, and runs max S_q steps. If any
// header offers, every rank posts phase 2 of the first step after its
// copies, and an offering rank returns only after every peer's phase 2; a
// failed call withdraws its offers as Single's calls do.
//
// A sender offers (a2avOffers) where cross-memory attach is on and the
// call is pinned to Single, or not pinned and its bytes are from
// singleMin(CollAlltoallv) to below singleMax (singleTakes). The
// algorithm in the descriptor is the pin's or decide's, which do not
// depend on the sizes. Slot reuse: as flat.go's; an offering rank's table
// is read before phase 2, which it waits for.

func init() {
	register(CollAlltoallv, Flat, (*Comm).alltoallv, true)
	register(CollAlltoallv, Single, (*Comm).alltoallv, true)
}

// a2avAttach marks the first word of a header whose sender offers its
// blocks by cross-memory attach; the rest of the word is S_q.
const a2avAttach = 1 << 62

// a2avHeader is the room of an alltoallv header of p ranks in a slot
// half, whole cache lines: where a sender's pieces of more than a line
// start, and where every Single table starts (singleTable).
func a2avHeader(p int) int { return alignUp(8 + 16*p) }

// a2avData is where a step's pieces (n bytes, p ranks) start: right after
// the header when they fit in the rest of its line, so that they travel
// with it, else on the next line, so that their copies are aligned.
func a2avData(p, n int) int {
	if d := 8 + 16*p; d+n <= lineBytes {
		return d
	}
	return a2avHeader(p)
}

// a2avOffers reports whether this rank offers its blocks of alltoallv a
// by cross-memory attach (see above).
func (c *Comm) a2avOffers(a *call) bool {
	if a.alg != Single {
		n := 0
		for _, k := range a.counts {
			n += k
		}
		// First against the smaller threshold, a constant: a small call
		// reads no line of the communicator for the choice, which costs
		// where ranks share CPUs and find their caches evicted.
		if n*a.esz < singleMin(CollAlltoallv, false, PlacementUnknown) || c.pinned[CollAlltoallv] != Auto ||
			!singleTakes(CollAlltoallv, n*a.esz, Auto, c.ep.Oversubscribed(), PlacementUnknown) {
			return false
		}
	}
	return c.singleOn()
}

func (c *Comm) alltoallv(ctx context.Context, a *call) (err error) {
	esz, p, r := a.esz, c.size, c.rank
	hdr := a2avHeader(p)
	if hdr >= c.half {
		return c.fail(fmt.Errorf("%w: slot half of %d bytes too small for %d ranks", ErrInvalidArgument, c.half, p))
	}
	offers := c.a2avOffers(a)
	own := 1 // this rank's S_q
	if !offers {
		if own, err = numPieces(a.counts, (c.half-hdr)/esz); err != nil {
			return c.fail(err)
		}
	}
	var offered uint64 // the step whose table peers may still read
	defer func() {
		if offered != 0 {
			c.withdraw(offered, &err)
		}
	}()
	le := binary.LittleEndian
	S := own // the largest S_q, after the first step
	for k := 0; k < S; k++ {
		var e uint64
		if e, err = c.begin(ctx); err != nil {
			return err
		}
		pre, uoff := c.sc.pre, c.sc.uoff
		h := c.slotHalf(r, e)
		w := uint64(own)
		if offers {
			w |= a2avAttach
		}
		le.PutUint64(h, w)
		for j := range p {
			le.PutUint64(h[8+8*j:], uint64(a.counts[j]))
			le.PutUint64(h[8+8*(p+j):], uint64(a.rcounts[j]))
		}
		switch {
		case offers && k == 0:
			for j := range p {
				if j != r {
					c.offer(e, j, span(a.send, esz, a.displs[j], a.displs[j]+a.counts[j]))
				}
			}
			offered = e
		case offers || k >= own:
			// nothing in this step
		default:
			c.pieces(k, own, a.counts, a.displs)
			d := a2avData(p, pre[p]*esz)
			for j := range p {
				if n := pre[j+1] - pre[j]; j != r && n > 0 {
					// Not publish: every rank writes and reads here, so
					// above smallBytes a store per line gains nothing,
					// and the non-temporal advice of timed copies would
					// send large alltoalls to memory.
					simd.Copy(h[d+pre[j]*esz:d+pre[j+1]*esz], span(a.send, esz, uoff[j], uoff[j]+n))
				}
			}
		}
		c.post(e, 1)
		attach := false // some rank offers its blocks in this step
		if k == 0 {
			if S, attach, err = c.a2avCheck(ctx, e, own, esz); err != nil {
				return err
			}
		}
		// Own block: straight from send, while the peers read.
		switch {
		case offers && k == 0:
			simd.Copy(span(a.recv, esz, a.rdispls[r], a.rdispls[r]+a.rcounts[r]), span(a.send, esz, a.displs[r], a.displs[r]+a.counts[r]))
		case !offers && k < own:
			if n := pre[r+1] - pre[r]; n > 0 {
				lo := pieceLo(k, own, a.counts[r])
				simd.Copy(span(a.recv, esz, a.rdispls[r]+lo, a.rdispls[r]+lo+n), span(a.send, esz, uoff[r], uoff[r]+n))
			}
		}
		// Every peer's piece: from its slot half, or, if it offers its
		// blocks, its whole block from its send buffer in the first step.
		for i := 1; i < p; i++ {
			q := c.next(i)
			if err = c.wait(ctx, q, e, 1); err != nil {
				return err
			}
			qh := c.slotHalf(q, e)
			w := le.Uint64(qh)
			if w&a2avAttach != 0 {
				if k == 0 {
					if err = c.a2avAttached(a, e, q); err != nil {
						return err
					}
				}
				continue
			}
			sq, rn := int(w), a.rcounts[q]
			off, all, lo, hi := 0, 0, 0, 0 // the sender's pieces before this rank's, all of them, and this rank's
			if k < sq {
				for j := range p {
					m := int(le.Uint64(qh[8+8*j:]))
					if j == r {
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
			src := qh[d+off*esz : d+(off+hi-lo)*esz]
			// copyPeer's prefetch without its timing (see the publish),
			// written out: copyPeer does not inline.
			if len(src) >= copyPrefetchMin && len(src) <= copyPrefetchMax && !c.ep.Oversubscribed() {
				simd.Prefetch(src)
			}
			simd.Copy(span(a.recv, esz, a.rdispls[q]+lo, a.rdispls[q]+hi), src)
		}
		if attach {
			c.post(e, 2)
			if offers {
				if err = c.waitAll(ctx, e, 2); err != nil {
					return err
				}
				offered = 0
			}
		}
		c.last.add(Stats{Rounds: 1, Sent: uint64(p - 1), Received: uint64(p - 1)})
		c.full = true
		c.end(e)
	}
	return nil
}

// a2avAttached reads q's block for this rank from q's send buffer, which
// q offers in step e.
func (c *Comm) a2avAttached(a *call, e uint64, q int) error {
	b := span(a.recv, a.esz, a.rdispls[q], a.rdispls[q]+a.rcounts[q])
	if m := c.singleTable(q, e)[2*c.rank+1]; m != uint64(len(b)) {
		return c.mismatch(fmt.Sprintf("rank %d offers %d bytes to rank %d, which expects %d", q, m, c.rank, len(b)))
	}
	return c.move(q, e, 0, b, false)
}

// a2avCheck waits for every peer's header of alltoallv's first step e and
// checks the matrix of counts (each rank's sends against what their
// receivers expect): every rank reads the same headers, so all find a
// mismatch, or decline the call (declined.go), alike. It returns the
// steps (the largest S_q; own is this rank's) and whether a header offers.
func (c *Comm) a2avCheck(ctx context.Context, e uint64, own, esz int) (S int, attach bool, err error) {
	p, le := c.size, binary.LittleEndian
	hs := c.sc.srcs // the headers, rank by rank
	S = own
	for q := range p {
		if q != c.rank {
			if err := c.wait(ctx, q, e, 1); err != nil {
				return 0, false, err
			}
		}
		hs[q] = c.slotHalf(q, e)
		w := le.Uint64(hs[q])
		attach = attach || w&a2avAttach != 0
		sq := int(w &^ a2avAttach)
		if sq < 1 || w&a2avAttach != 0 && sq != 1 {
			return 0, false, c.mismatch(fmt.Sprintf("rank %d cuts its blocks into %d segments", q, sq))
		}
		S = max(S, sq)
	}
	for q := range p {
		for t := range p {
			if sent, want := le.Uint64(hs[q][8+8*t:]), le.Uint64(hs[t][8+8*(p+q):]); sent != want {
				return 0, false, c.mismatch(fmt.Sprintf("rank %d expects %d elements from rank %d, which sends %d", t, int(want), q, int(sent)))
			}
		}
	}
	return S, attach, c.a2avDecline(e, esz)
}
