//go:build mpi

package hier

import (
	"context"
	"fmt"

	"github.com/shmcoll/shmcoll/collectives"
	"github.com/shmcoll/shmcoll/internal/mpi"
	"github.com/shmcoll/shmcoll/simd"
)

// Allgather and ReduceScatterBlock work on the vector in node order: node
// j's ranks' blocks form its segment, segments follow each other by node
// index. With contiguous nodes that is world order; otherwise the vector is
// permuted on the way in or out. A segment is cut into c.lanes sub-blocks
// (sub): sub-block i of every node is lane i's share.

// sub returns sub-block i of a segment of s elements.
func (c *Comm) sub(s, i int) (lo, hi int) { return i * s / c.lanes, (i + 1) * s / c.lanes }

// segment returns node j's segment of a node-ordered vector of blocks of n.
func segment[T simd.Element](c *Comm, v []T, j, n int) []T {
	return v[c.first[j]*n : (c.first[j]+c.nodeSizes[j])*n]
}

// toNodeOrder copies world-ordered blocks of n from src into dst in node
// order (fromNodeOrder does the reverse).
func toNodeOrder[T simd.Element](c *Comm, dst, src []T, n int) {
	for q, w := range c.where {
		k := c.first[w.node] + w.local
		copy(dst[k*n:(k+1)*n], src[q*n:(q+1)*n])
	}
}

func fromNodeOrder[T simd.Element](c *Comm, dst, src []T, n int) {
	for q, w := range c.where {
		k := c.first[w.node] + w.local
		copy(dst[q*n:(q+1)*n], src[k*n:(k+1)*n])
	}
}

// Allgather gathers send (n elements) of every rank into recv (Size()
// blocks of n, block q from rank q) on every rank. send nil means in place:
// block Rank() of recv holds the rank's contribution. Leader: shared-memory
// gather to the leader, MPI_Allgatherv of the node segments among the
// leaders, shared-memory broadcast. MultiLane: shared-memory allgather of
// the node segment, MPI_Allgatherv of sub-block i of every segment along
// lane i, and a shared-memory allgatherv per other node.
func Allgather[T simd.Element](ctx context.Context, c *Comm, send, recv []T) error {
	return c.finish("allgather", allgather(ctx, c, send, recv))
}

func allgather[T simd.Element](ctx context.Context, c *Comm, send, recv []T) error {
	p, r := c.world.Size(), c.world.Rank()
	if len(recv)%p != 0 {
		return fmt.Errorf("hier: allgather: len(recv) %d is not a multiple of %d ranks", len(recv), p)
	}
	n := len(recv) / p
	if send != nil && len(send) != n {
		return fmt.Errorf("hier: allgather: len(send) %d, want len(recv)/p = %d", len(send), n)
	}
	mine := send
	if mine == nil {
		mine = recv[r*n : (r+1)*n]
	}
	out := recv
	if !c.contiguous {
		out = work[T](c, p*n)
	}
	me, nodes := c.node.Rank(), len(c.nodeSizes)
	seg := segment(c, out, c.nodeIdx, n)
	own := seg[me*n : (me+1)*n]
	if sameStart(mine, own) {
		mine = nil
	}
	if nodes == 1 {
		return collectives.Allgather(ctx, c.local, mine, recv)
	}
	esz := simd.TypeOf[T]().Size()
	counts, displs := make([]int, nodes), make([]int, nodes)

	if c.choose(len(recv)*esz) == Leader {
		var dst []T
		if me == 0 {
			dst = seg
		}
		if mine == nil && me != 0 {
			mine = own
		}
		if err := collectives.Gather(ctx, c.local, mine, dst, 0); err != nil {
			return err
		}
		if me == 0 {
			for j := range counts {
				counts[j], displs[j] = c.nodeSizes[j]*n*esz, c.first[j]*n*esz
			}
			if err := c.lane.Allgatherv(nil, simd.AsBytes(out), mpi.Byte, counts, displs); err != nil {
				return err
			}
		}
		if err := collectives.Bcast(ctx, c.local, out, 0); err != nil {
			return err
		}
	} else {
		if err := collectives.Allgather(ctx, c.local, mine, seg); err != nil {
			return err
		}
		if me < c.lanes {
			for j := range counts {
				lo, hi := c.sub(c.nodeSizes[j]*n, me)
				counts[j], displs[j] = (hi-lo)*esz, (c.first[j]*n+lo)*esz
			}
			if err := c.lane.Allgatherv(nil, simd.AsBytes(out), mpi.Byte, counts, displs); err != nil {
				return err
			}
		}
		local := make([]int, c.node.Size())
		for j := range c.nodeSizes {
			if j == c.nodeIdx {
				continue
			}
			for i := 0; i < c.lanes; i++ {
				lo, hi := c.sub(c.nodeSizes[j]*n, i)
				local[i] = hi - lo
			}
			if err := collectives.Allgatherv(ctx, c.local, nil, segment(c, out, j, n), local, nil); err != nil {
				return err
			}
		}
	}
	if !c.contiguous {
		fromNodeOrder(c, recv, out, n)
	}
	return nil
}

// ReduceScatterBlock combines send (Size() blocks of len(recv) elements) of
// all ranks element-wise with op and stores block q of the result in recv on
// rank q. send nil means in place: recv holds the Size() blocks on input and
// block Rank() of the result in its place on output. Leader: shared-memory
// reduce to the leader, MPI_Reduce_scatter of the node segments among the
// leaders, shared-memory scatter. MultiLane: the vector rearranged so that
// lane i's sub-blocks of every segment are adjacent, shared-memory
// reduce-scatter, MPI_Reduce_scatter along lane i (each node keeps its
// sub-block), shared-memory allgatherv of the node segment.
func ReduceScatterBlock[T simd.Element](ctx context.Context, c *Comm, send, recv []T, op simd.Op) error {
	return c.finish("reduce_scatter_block", reduceScatterBlock(ctx, c, send, recv, op))
}

func reduceScatterBlock[T simd.Element](ctx context.Context, c *Comm, send, recv []T, op simd.Op) error {
	t := simd.TypeOf[T]()
	if !simd.Supports(t, op) {
		return fmt.Errorf("hier: reduce_scatter_block: %v does not apply to %v: %w", op, t, simd.ErrUnsupported)
	}
	p, r := c.world.Size(), c.world.Rank()
	var n int
	var in, out []T
	if send == nil {
		if len(recv)%p != 0 {
			return fmt.Errorf("hier: reduce_scatter_block in place: len(recv) %d is not a multiple of %d ranks", len(recv), p)
		}
		n = len(recv) / p
		in, out = recv, recv[r*n:(r+1)*n]
	} else {
		n = len(recv)
		if len(send) != p*n {
			return fmt.Errorf("hier: reduce_scatter_block: len(send) %d != %d ranks * len(recv) %d", len(send), p, n)
		}
		in, out = send, recv
	}
	me, nodes := c.node.Rank(), len(c.nodeSizes)
	cop := collectives.Builtin(op)
	if nodes == 1 {
		if send == nil {
			return collectives.ReduceScatterBlock(ctx, c.local, nil, recv, cop)
		}
		return collectives.ReduceScatterBlock(ctx, c.local, send, recv, cop)
	}
	segLen := c.nodeSizes[c.nodeIdx] * n
	buf := work[T](c, 3*p*n+segLen)
	v := in
	if !c.contiguous {
		v = buf[:p*n]
		toNodeOrder(c, v, in, n)
	}
	buf = buf[p*n:]

	if c.choose(p*n*t.Size()) == Leader {
		var acc []T
		if me == 0 {
			acc = buf[:p*n]
		}
		if err := collectives.Reduce(ctx, c.local, v, acc, cop, 0); err != nil {
			return err
		}
		if me == 0 {
			if dt, mop, ok := byMPI(t, op); ok {
				segs := make([]int, nodes)
				for j := range segs {
					segs[j] = c.nodeSizes[j] * n
				}
				if err := c.lane.ReduceScatter(nil, simd.AsBytes(acc), dt, mop, segs); err != nil {
					return err
				}
			} else {
				if err := c.crossReduce(c.lane, simd.AsBytes(acc), t, op); err != nil {
					return err
				}
				copy(acc, segment(c, acc, c.nodeIdx, n))
			}
		}
		var from []T
		if me == 0 {
			from = acc[:segLen]
		}
		return collectives.Scatter(ctx, c.local, from, out, 0)
	}

	// Lane-major: sub-block i of every segment, for i = 0, 1, ...
	w, mineW := buf[:p*n], buf[p*n:2*p*n]
	local := make([]int, c.node.Size())
	k := 0
	for i := 0; i < c.lanes; i++ {
		for j := range c.nodeSizes {
			lo, hi := c.sub(c.nodeSizes[j]*n, i)
			k += copy(w[k:], segment(c, v, j, n)[lo:hi])
			local[i] += hi - lo
		}
	}
	mineW = mineW[:local[me]]
	if err := collectives.ReduceScatter(ctx, c.local, w, mineW, local, cop); err != nil {
		return err
	}
	lo, hi := c.sub(segLen, me)
	if me < c.lanes {
		if dt, mop, ok := byMPI(t, op); ok {
			parts := make([]int, nodes)
			for j := range parts {
				plo, phi := c.sub(c.nodeSizes[j]*n, me)
				parts[j] = phi - plo
			}
			if err := c.lane.ReduceScatter(nil, simd.AsBytes(mineW), dt, mop, parts); err != nil {
				return err
			}
		} else {
			if err := c.crossReduce(c.lane, simd.AsBytes(mineW), t, op); err != nil {
				return err
			}
			off := 0
			for j := 0; j < c.nodeIdx; j++ {
				plo, phi := c.sub(c.nodeSizes[j]*n, me)
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
	seg := buf[2*p*n : 2*p*n+segLen]
	if err := collectives.Allgatherv(ctx, c.local, part, seg, segCounts, nil); err != nil {
		return err
	}
	copy(out, seg[me*n:(me+1)*n])
	return nil
}
