//go:build mpi

package hier

import (
	"context"
	"fmt"
	"slices"

	"github.com/shmcoll/shmcoll/collectives"
	"github.com/shmcoll/shmcoll/mpi"
	"github.com/shmcoll/shmcoll/simd"
)

// Allgather(v) and ReduceScatter(Block) work on the vector in node order:
// node j's ranks' blocks, in local-rank order, form its segment; segments
// follow each other by node index. With contiguous nodes that is world
// order; otherwise the blocks are permuted on the way in or out. A segment
// is cut into c.lanes sub-blocks (sub): sub-block i of every node is lane
// i's share. The cut is by elements of the segment, not by rank blocks, so
// irregular counts load the lanes evenly and lanes line up on every node.

// sub returns sub-block i of a segment of s elements.
func (c *Comm) sub(s, i int) (lo, hi int) { return i * s / c.lanes, (i + 1) * s / c.lanes }

// blockLayout places per-rank blocks of a vector in node order.
type blockLayout struct {
	counts []int // by world rank
	at     []int // at[q]: where rank q's block starts in node order
	seg    []int // seg[j]: where node j's segment starts; seg[nodes] is the total
}

// nodeLayout returns the node-order blockLayout of blocks of counts[q] elements.
func (c *Comm) nodeLayout(counts []int) blockLayout {
	p := len(c.where)
	byPos := make([]int, p) // world rank at each node-order position
	for q, w := range c.where {
		byPos[c.first[w.node]+w.local] = q
	}
	l := blockLayout{counts: counts, at: make([]int, p), seg: make([]int, len(c.nodeSizes)+1)}
	off := 0
	for _, q := range byPos {
		l.at[q] = off
		off += counts[q]
	}
	for j := range c.nodeSizes {
		l.seg[j] = l.at[byPos[c.first[j]]]
	}
	l.seg[len(c.nodeSizes)] = off
	return l
}

// segLen is the length of node j's segment.
func (l blockLayout) segLen(j int) int { return l.seg[j+1] - l.seg[j] }

// localCounts returns the counts of node j's ranks in local-rank order.
func (c *Comm) localCounts(l blockLayout, j int) []int {
	out := make([]int, c.nodeSizes[j])
	for q, w := range c.where {
		if w.node == j {
			out[w.local] = l.counts[q]
		}
	}
	return out
}

// toNodeOrder copies the blocks of src (rank q's at displs[q]) into dst in
// node order; fromNodeOrder does the reverse.
func toNodeOrder[T simd.Element](l blockLayout, dst, src []T, displs []int) {
	for q, n := range l.counts {
		copy(dst[l.at[q]:l.at[q]+n], src[displs[q]:displs[q]+n])
	}
}

func fromNodeOrder[T simd.Element](l blockLayout, dst, src []T, displs []int) {
	for q, n := range l.counts {
		copy(dst[displs[q]:displs[q]+n], src[l.at[q]:l.at[q]+n])
	}
}

// packed returns the displacements of blocks of counts packed in rank order.
func packed(counts []int) []int {
	d := make([]int, len(counts))
	for q := 1; q < len(counts); q++ {
		d[q] = d[q-1] + counts[q-1]
	}
	return d
}

// checkCounts checks one count per rank, none negative, and returns their sum.
func (c *Comm) checkCounts(coll string, counts []int) (int, error) {
	if len(counts) != c.world.Size() {
		return 0, fmt.Errorf("hier: %s: len(counts) %d for %d ranks", coll, len(counts), c.world.Size())
	}
	total := 0
	for q, n := range counts {
		if n < 0 {
			return 0, fmt.Errorf("hier: %s: counts[%d] = %d", coll, q, n)
		}
		total += n
	}
	return total, nil
}

// Allgather gathers send (n elements) of every rank into recv (Size()
// blocks of n, block q from rank q) on every rank. send nil means in place:
// block Rank() of recv holds the rank's contribution. It is [Allgatherv]
// with equal counts.
func Allgather[T simd.Element](ctx context.Context, c *Comm, send, recv []T) error {
	return c.finish("allgather", allgather(ctx, c, send, recv))
}

func allgather[T simd.Element](ctx context.Context, c *Comm, send, recv []T) error {
	p := c.world.Size()
	if len(recv)%p != 0 {
		return fmt.Errorf("hier: allgather: len(recv) %d is not a multiple of %d ranks", len(recv), p)
	}
	n := len(recv) / p
	if send != nil && len(send) != n {
		return fmt.Errorf("hier: allgather: len(send) %d, want len(recv)/p = %d", len(send), n)
	}
	counts := make([]int, p)
	for q := range counts {
		counts[q] = n
	}
	return allgatherv(ctx, c, "allgather", send, recv, counts, nil)
}

// Allgatherv gathers send (counts[q] elements on rank q) of every rank into
// recv on every rank, rank q's block at recv[displs[q]:]; displs nil means
// packed in rank order. counts are the same on every rank. send nil means
// in place: the rank's block is already in recv. Leader: shared-memory
// allgatherv of the node segment, MPI_Allgatherv of the segments among the
// leaders, shared-memory broadcast. MultiLane: shared-memory allgatherv of
// the node segment, MPI_Allgatherv of sub-block i of every segment along
// lane i, and a shared-memory allgatherv of the lanes' sub-blocks per other
// node.
func Allgatherv[T simd.Element](ctx context.Context, c *Comm, send, recv []T, counts, displs []int) error {
	return c.finish("allgatherv", allgatherv(ctx, c, "allgatherv", send, recv, counts, displs))
}

func allgatherv[T simd.Element](ctx context.Context, c *Comm, coll string, send, recv []T, counts, displs []int) error {
	total, err := c.checkCounts(coll, counts)
	if err != nil {
		return err
	}
	r := c.world.Rank()
	if displs == nil {
		if len(recv) < total {
			return fmt.Errorf("hier: %s: len(recv) %d, counts sum to %d", coll, len(recv), total)
		}
	} else {
		if len(displs) != len(counts) {
			return fmt.Errorf("hier: %s: len(displs) %d for %d ranks", coll, len(displs), len(counts))
		}
		for q, d := range displs {
			if d < 0 || d > len(recv) || counts[q] > len(recv)-d {
				return fmt.Errorf("hier: %s: block %d of %d elements at %d exceeds len(recv) %d", coll, q, counts[q], d, len(recv))
			}
		}
	}
	if send != nil && len(send) != counts[r] {
		return fmt.Errorf("hier: %s: len(send) %d, counts[%d] = %d", coll, len(send), r, counts[r])
	}
	wd := displs
	if wd == nil {
		wd = packed(counts)
	}
	if send != nil && sameStart(send, recv[wd[r]:]) {
		send = nil
	}
	if len(c.nodeSizes) == 1 {
		return collectives.Allgatherv(ctx, c.local, send, recv, counts, displs) // local ranks are world ranks
	}
	mine := send
	if mine == nil {
		mine = recv[wd[r] : wd[r]+counts[r]]
	}
	l := c.nodeLayout(counts)
	out := recv
	permuted := !c.contiguous || displs != nil // out is not recv
	if permuted {
		out = work[T](c, total)
	}
	me, nodes := c.node.Rank(), len(c.nodeSizes)
	seg := out[l.seg[c.nodeIdx]:l.seg[c.nodeIdx+1]]
	local := c.localCounts(l, c.nodeIdx)
	if sameStart(mine, out[l.at[r]:]) {
		mine = nil
	}
	if err := collectives.Allgatherv(ctx, c.local, mine, seg, local, nil); err != nil {
		return err
	}
	esz := simd.TypeOf[T]().Size()
	bc, bd := make([]int, nodes), make([]int, nodes) // byte counts and displacements along a lane
	if c.choose(total*esz) == Leader {
		if me == 0 {
			for j := range bc {
				bc[j], bd[j] = l.segLen(j)*esz, l.seg[j]*esz
			}
			if err := c.lane.Allgatherv(nil, simd.AsBytes(out), mpi.Byte, bc, bd); err != nil {
				return err
			}
		}
		if err := collectives.Bcast(ctx, c.local, out, 0); err != nil {
			return err
		}
	} else {
		if me < c.lanes {
			for j := range bc {
				lo, hi := c.sub(l.segLen(j), me)
				bc[j], bd[j] = (hi-lo)*esz, (l.seg[j]+lo)*esz
			}
			if err := c.lane.Allgatherv(nil, simd.AsBytes(out), mpi.Byte, bc, bd); err != nil {
				return err
			}
		}
		subs := make([]int, c.node.Size())
		for j := range c.nodeSizes {
			if j == c.nodeIdx {
				continue
			}
			for i := 0; i < c.lanes; i++ {
				lo, hi := c.sub(l.segLen(j), i)
				subs[i] = hi - lo
			}
			if err := collectives.Allgatherv(ctx, c.local, nil, out[l.seg[j]:l.seg[j+1]], subs, nil); err != nil {
				return err
			}
		}
	}
	if permuted {
		fromNodeOrder(l, recv, out, wd)
	}
	return nil
}

// ReduceScatterBlock combines send (Size() blocks of len(recv) elements) of
// all ranks element-wise with op and stores block q of the result in recv on
// rank q. send nil means in place: recv holds the Size() blocks on input and
// block Rank() of the result in its place on output. It is [ReduceScatter]
// with equal counts.
func ReduceScatterBlock[T simd.Element](ctx context.Context, c *Comm, send, recv []T, op collectives.Op) error {
	return c.finish("reduce_scatter_block", reduceScatterBlock(ctx, c, send, recv, op))
}

func reduceScatterBlock[T simd.Element](ctx context.Context, c *Comm, send, recv []T, op collectives.Op) error {
	p := c.world.Size()
	n := len(recv)
	if send == nil {
		if len(recv)%p != 0 {
			return fmt.Errorf("hier: reduce_scatter_block in place: len(recv) %d is not a multiple of %d ranks", len(recv), p)
		}
		n /= p
	} else if len(send) != p*n {
		return fmt.Errorf("hier: reduce_scatter_block: len(send) %d != %d ranks * len(recv) %d", len(send), p, n)
	}
	counts := make([]int, p)
	for q := range counts {
		counts[q] = n
	}
	return reduceScatter(ctx, c, "reduce_scatter_block", send, recv, counts, op)
}

// ReduceScatter combines send of all ranks element-wise with op, in rank
// order (op may be non-commutative, with nodes of consecutive ranks); the
// result is cut into blocks of counts[0], counts[1], ... elements (the same
// counts on every rank) and block q goes to recv on rank q. send nil means
// in place: recv holds the whole vector on input and block Rank() in its
// place, recv[counts[0]+...+counts[Rank()-1]:][:counts[Rank()]], on output.
// Leader: shared-memory reduce to the leader, MPI_Reduce_scatter of the
// node segments among the leaders, shared-memory scatter (or broadcast of
// the segment when the node's counts differ). MultiLane: the vector
// rearranged so that lane i's sub-blocks of every segment are adjacent,
// shared-memory reduce-scatter, MPI_Reduce_scatter along lane i (each node
// keeps its sub-block), shared-memory allgatherv of the node segment.
func ReduceScatter[T simd.Element](ctx context.Context, c *Comm, send, recv []T, counts []int, op collectives.Op) error {
	return c.finish("reduce_scatter", reduceScatter(ctx, c, "reduce_scatter", send, recv, counts, op))
}

func reduceScatter[T simd.Element](ctx context.Context, c *Comm, coll string, send, recv []T, counts []int, op collectives.Op) error {
	o, err := c.bind(coll, simd.TypeOf[T](), op)
	if err != nil {
		return err
	}
	total, err := c.checkCounts(coll, counts)
	if err != nil {
		return err
	}
	r := c.world.Rank()
	wd := packed(counts)
	in, out := send, recv
	if send == nil {
		if len(recv) < total {
			return fmt.Errorf("hier: %s in place: len(recv) %d, counts sum to %d", coll, len(recv), total)
		}
		in, out = recv[:total], recv[wd[r]:wd[r]+counts[r]]
	} else if len(send) != total || len(recv) != counts[r] {
		return fmt.Errorf("hier: %s: len(send) %d, len(recv) %d; counts sum to %d, counts[%d] = %d", coll, len(send), len(recv), total, r, counts[r])
	}
	me, nodes := c.node.Rank(), len(c.nodeSizes)
	if nodes == 1 {
		if send == nil {
			return collectives.ReduceScatter(ctx, c.local, nil, recv, counts, op)
		}
		return collectives.ReduceScatter(ctx, c.local, send, recv, counts, op)
	}
	l := c.nodeLayout(counts)
	segLen := l.segLen(c.nodeIdx)
	mineAt := l.at[r] - l.seg[c.nodeIdx] // my block within the node segment
	buf := work[T](c, 3*total+segLen)
	v := in
	if !c.contiguous {
		v = buf[:total]
		toNodeOrder(l, v, in, wd)
	}
	buf = buf[total:]

	if c.choose(total*o.t.Size()) == Leader {
		var acc []T
		if me == 0 {
			acc = buf[:total]
		}
		if err := collectives.Reduce(ctx, c.local, v, acc, op, 0); err != nil {
			return err
		}
		if me == 0 {
			if dt, mop, ok := byMPI(o); ok {
				segs := make([]int, nodes)
				for j := range segs {
					segs[j] = l.segLen(j)
				}
				if err := c.lane.ReduceScatter(nil, simd.AsBytes(acc), dt, mop, segs); err != nil {
					return err
				}
			} else {
				if err := c.crossReduce(c.lane, simd.AsBytes(acc), o); err != nil {
					return err
				}
				copy(acc, acc[l.seg[c.nodeIdx]:l.seg[c.nodeIdx+1]])
			}
		}
		local := c.localCounts(l, c.nodeIdx)
		if slices.Min(local) == slices.Max(local) {
			var from []T
			if me == 0 {
				from = acc[:segLen]
			}
			return collectives.Scatter(ctx, c.local, from, out, 0)
		}
		seg := buf[total : total+segLen]
		if me == 0 {
			copy(seg, acc[:segLen])
		}
		if err := collectives.Bcast(ctx, c.local, seg, 0); err != nil {
			return err
		}
		copy(out, seg[mineAt:mineAt+counts[r]])
		return nil
	}

	// Lane-major: sub-block i of every segment, for i = 0, 1, ...
	w, mineW := buf[:total], buf[total:2*total]
	local := make([]int, c.node.Size())
	k := 0
	for i := 0; i < c.lanes; i++ {
		for j := range c.nodeSizes {
			lo, hi := c.sub(l.segLen(j), i)
			k += copy(w[k:], v[l.seg[j]+lo:l.seg[j]+hi])
			local[i] += hi - lo
		}
	}
	mineW = mineW[:local[me]]
	if err := collectives.ReduceScatter(ctx, c.local, w, mineW, local, op); err != nil {
		return err
	}
	lo, hi := c.sub(segLen, me)
	if me < c.lanes {
		if dt, mop, ok := byMPI(o); ok {
			parts := make([]int, nodes)
			for j := range parts {
				plo, phi := c.sub(l.segLen(j), me)
				parts[j] = phi - plo
			}
			if err := c.lane.ReduceScatter(nil, simd.AsBytes(mineW), dt, mop, parts); err != nil {
				return err
			}
		} else {
			if err := c.crossReduce(c.lane, simd.AsBytes(mineW), o); err != nil {
				return err
			}
			off := 0
			for j := 0; j < c.nodeIdx; j++ {
				plo, phi := c.sub(l.segLen(j), me)
				off += phi - plo
			}
			copy(mineW, mineW[off:off+hi-lo])
		}
	}
	segCounts := make([]int, c.node.Size())
	for i := 0; i < c.lanes; i++ {
		slo, shi := c.sub(segLen, i)
		segCounts[i] = shi - slo
	}
	var part []T
	if me < c.lanes {
		part = mineW[:hi-lo]
	} else {
		part = mineW[:0]
	}
	seg := buf[2*total : 2*total+segLen]
	if err := collectives.Allgatherv(ctx, c.local, part, seg, segCounts, nil); err != nil {
		return err
	}
	copy(out, seg[mineAt:mineAt+counts[r]])
	return nil
}
