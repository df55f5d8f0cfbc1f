package collectives

import (
	"context"

	"github.com/shmcoll/shmcoll/simd"
)

// Gatherv and Scatterv: gather and scatter with a block of its own size
// per rank. They are not in the selection table (no Collective constant
// to pin or tune): each runs Single where it takes the call
// (vectorAlgorithm), else the flat algorithm, every rank's block
// through its own slot (gatherv) or the root's slot (scatterv), cut into
// as many segments as the largest block needs. The call descriptor
// carries the total count and a hash of the counts, so that ranks that
// pass different counts fail with ErrMismatch on every rank.

const (
	collGatherv Collective = collSplit + 1 + iota
	collScatterv
)

// Gatherv collects send (counts[r] elements on rank r) of every rank into
// recv on rank root, rank j's block at recv[displs[j]:][:counts[j]];
// displs nil means packed in rank order. counts are the same on every
// rank; recv and displs are used only at the root (they may be nil
// elsewhere). send nil at the root means in place: its block is already in
// recv.
func Gatherv[T simd.Element](ctx context.Context, c *Comm, send, recv []T, counts, displs []int, root int) error {
	a, total, err := c.vectorStart(ctx, collGatherv, simd.TypeOf[T](), counts, displs, root, "recv at the root", len(recv))
	if err != nil {
		return err
	}
	s, r := bytesOf(send), bytesOf(recv)
	if (s != nil || c.rank != root) && len(send) != counts[c.rank] {
		return c.bad("len(send) = %d, counts[%d] = %d", len(send), c.rank, counts[c.rank])
	}
	esz := a.esz
	if c.rank == root {
		d, n := a.displs[root], counts[root]
		if s != nil && same(s, r[d*esz:(d+n)*esz]) {
			s = nil
		} else if overlaps(s, r) {
			return c.bad("send and receive buffers overlap")
		}
		if s != nil {
			simd.Copy(r[d*esz:(d+n)*esz], s)
		}
	} else {
		r = nil
	}
	a.send, a.recv, a.count, a.root = s, r, total, root
	return c.runVector(ctx, a, (*Comm).flatGatherv)
}

// Scatterv sends send[displs[j]:][:counts[j]] of rank root to recv on rank
// j (counts[j] elements); displs nil means packed in rank order. counts are
// the same on every rank; send and displs are used only at the root (they
// may be nil elsewhere). recv nil at the root means in place: the root's
// block stays in send.
func Scatterv[T simd.Element](ctx context.Context, c *Comm, send, recv []T, counts, displs []int, root int) error {
	a, total, err := c.vectorStart(ctx, collScatterv, simd.TypeOf[T](), counts, displs, root, "send at the root", len(send))
	if err != nil {
		return err
	}
	s, r := bytesOf(send), bytesOf(recv)
	if (r != nil || c.rank != root) && len(recv) != counts[c.rank] {
		return c.bad("len(recv) = %d, counts[%d] = %d", len(recv), c.rank, counts[c.rank])
	}
	esz := a.esz
	if c.rank == root {
		d, n := a.displs[root], counts[root]
		if overlaps(s, r) {
			return c.bad("send and receive buffers overlap")
		}
		if r != nil {
			simd.Copy(r, s[d*esz:(d+n)*esz])
		}
	} else {
		s = nil
	}
	a.send, a.recv, a.count, a.root = s, r, total, root
	return c.runVector(ctx, a, (*Comm).flatScatterv)
}

// vectorStart starts a gatherv or scatterv: it checks root and counts
// (irregular puts them and packed displacements in the call) and, at the
// root, the root's buffer (what, of n elements) against counts and
// displs, which it puts into the call's displs. It returns the call and
// the sum of the counts.
func (c *Comm) vectorStart(ctx context.Context, coll Collective, t simd.Type, counts, displs []int, root int, what string, n int) (*call, int, error) {
	a, err := c.start(ctx, coll, t)
	if err != nil {
		return nil, 0, err
	}
	if err := c.checkRoot(root); err != nil {
		return nil, 0, err
	}
	total, err := c.irregular(a, counts)
	if err == nil && c.rank == root {
		err = c.vlayout(what, n, counts, displs, a.counts, a.displs)
	}
	return a, total, err
}

// runVector runs the gatherv or scatterv a with the flat algorithm f, as
// pick runs the others.
func (c *Comm) runVector(ctx context.Context, a *call, f impl) error {
	if c.size == 1 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return c.fail(err)
	}
	a.alg, f = c.vectorAlgorithm(a, f)
	if err := c.run(ctx, a, f); err != nil {
		return err
	}
	return c.finish()
}

// segments is the number of steps that cut the largest of a's blocks into
// pieces that fit a slot half.
func (c *Comm) segments(a *call) int {
	most := 0
	for _, n := range a.counts {
		most = max(most, n)
	}
	M := max(1, c.half/a.esz)
	return max(1, (most+M-1)/M)
}

// flatGatherv: in step k, every rank but the root puts piece k of its
// block in its slot half and posts; the root copies the pieces out. A
// block of one step that fits tinyBytes goes in the rank's counter line
// instead, which the root's wait brings with the counter (the writer and
// the root both know the block's count). A rank rewrites its slot half
// (and its counter line's bytes) two steps later, after begin has seen
// every rank (the root too) begin the step between, so the root has read
// it.
func (c *Comm) flatGatherv(ctx context.Context, a *call) error {
	esz, p := a.esz, c.size
	S := c.segments(a)
	for k := range S {
		e, err := c.begin(ctx)
		if err != nil {
			return err
		}
		if c.rank != a.root {
			n := a.counts[c.rank]
			lo, hi := pieceLo(k, S, n), pieceLo(k+1, S, n)
			simd.Copy(c.stepBuf(c.rank, e, S == 1 && n*esz <= tinyBytes)[:(hi-lo)*esz], span(a.send, esz, lo, hi))
			c.post(e, 1)
			c.last.Sent++
		} else {
			c.post(e, 1)
			for i := 1; i < p; i++ {
				q := c.next(i)
				n, d := a.counts[q], a.displs[q]
				lo, hi := pieceLo(k, S, n), pieceLo(k+1, S, n)
				src := c.stepBuf(q, e, S == 1 && n*esz <= tinyBytes)[:(hi-lo)*esz]
				if err := c.waitData(ctx, q, e, 1, src); err != nil {
					return err
				}
				simd.Copy(span(a.recv, esz, d+lo, d+hi), src)
			}
			c.last.Received += uint64(p - 1)
			c.full = true
		}
		c.last.Rounds++
		c.end(e)
	}
	return nil
}

// flatScatterv: in step k the root packs piece k of every other rank's
// block into its slot half (c.pieces: the packed offsets, the same on
// every rank, and the root's user offsets) and posts; each rank copies its
// piece out. Packed pieces of one step that fit tinyBytes go in the root's
// counter line instead, which each rank's wait brings with the counter.
func (c *Comm) flatScatterv(ctx context.Context, a *call) error {
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
		pre := c.sc.pre
		tiny := S == 1 && pre[p]*esz <= tinyBytes
		if c.rank == a.root {
			c.copyPieces(c.stepBuf(c.rank, e, tiny), a.send, esz, c.rank)
			c.post(e, 1)
			c.last.Sent += uint64(p - 1)
		} else {
			c.post(e, 1)
			src := span(c.stepBuf(a.root, e, tiny), esz, pre[c.rank], pre[c.rank+1])
			if err := c.waitData(ctx, a.root, e, 1, src); err != nil {
				return err
			}
			lo := pieceLo(k, S, a.counts[c.rank])
			m := pre[c.rank+1] - pre[c.rank]
			simd.Copy(span(a.recv, esz, lo, lo+m), src)
			c.last.Received++
		}
		c.last.Rounds++
		c.end(e)
	}
	return nil
}
