//go:build mpi

package hier

import (
	"context"
	"fmt"

	"github.com/shmcoll/shmcoll/collectives"
	"github.com/shmcoll/shmcoll/mpi"
	"github.com/shmcoll/shmcoll/simd"
)

// work returns a scratch slice of n elements of T, valid until the next
// call that uses work (crossReduce has its own scratch).
func work[T simd.Element](c *Comm, n int) []T {
	nb := n * simd.TypeOf[T]().Size()
	if cap(c.work) < nb {
		c.work = make([]byte, nb)
	}
	if nb == 0 {
		return []T{}
	}
	return simd.FromBytes[T](c.work[:nb])
}

func (c *Comm) checkRoot(coll string, root int) error {
	if root < 0 || root >= c.world.Size() {
		return fmt.Errorf("hier: %s: root %d out of range [0, %d)", coll, root, c.world.Size())
	}
	return nil
}

// Bcast copies buf of rank root into buf of every rank: a shared-memory
// broadcast on the root's node, MPI broadcasts across nodes (by the leaders,
// or block i by lane i), and a shared-memory broadcast (or allgather of the
// blocks) on the other nodes.
func Bcast[T simd.Element](ctx context.Context, c *Comm, buf []T, root int) error {
	return c.finish("bcast", bcast(ctx, c, buf, root))
}

func bcast[T simd.Element](ctx context.Context, c *Comm, buf []T, root int) error {
	if err := c.checkRoot("bcast", root); err != nil {
		return err
	}
	w := c.where[root]
	if w.node == c.nodeIdx {
		if err := collectives.Bcast(ctx, c.local, buf, w.local); err != nil {
			return err
		}
	}
	if len(c.nodeSizes) == 1 {
		return nil
	}
	switch c.choose(len(buf) * simd.TypeOf[T]().Size()) {
	case Leader:
		if c.node.Rank() == 0 && len(buf) > 0 {
			if err := c.lane.Bcast(simd.AsBytes(buf), mpi.Byte, w.node); err != nil {
				return err
			}
		}
		if w.node != c.nodeIdx {
			return collectives.Bcast(ctx, c.local, buf, 0)
		}
	default:
		counts, d := c.blocks(len(buf))
		if me := c.node.Rank(); me < c.lanes && counts[me] > 0 {
			if err := c.lane.Bcast(simd.AsBytes(buf[d:d+counts[me]]), mpi.Byte, w.node); err != nil {
				return err
			}
		}
		if w.node != c.nodeIdx {
			return collectives.Allgatherv(ctx, c.local, nil, buf, counts, nil)
		}
	}
	return nil
}

// crossReduceTo reduces block across the lane onto the lane member of node
// root (in place there); the other members' blocks are left undefined.
func (c *Comm) crossReduceTo(block []byte, o operator, root int) error {
	if c.lane.Size() <= 1 || len(block) == 0 {
		return nil
	}
	dt, mop, ok := byMPI(o)
	if !ok {
		return c.crossReduce(c.lane, block, o)
	}
	if c.lane.Rank() == root {
		return c.lane.Reduce(nil, block, dt, mop, root)
	}
	return c.lane.Reduce(block, nil, dt, mop, root)
}

// Reduce combines send of all ranks element-wise with op into recv on rank
// root, in rank order (op may be non-commutative, with nodes of consecutive
// ranks); recv is not used elsewhere (it may be nil). send nil means in
// place on the root. Leader: shared-memory reduce to each leader, MPI_Reduce among
// the leaders to the root's node, handed to the root in its node. MultiLane:
// shared-memory reduce-scatter, MPI_Reduce of block i along lane i to the
// root's node, gathered there in shared memory.
func Reduce[T simd.Element](ctx context.Context, c *Comm, send, recv []T, op collectives.Op, root int) error {
	return c.finish("reduce", reduce(ctx, c, send, recv, op, root))
}

func reduce[T simd.Element](ctx context.Context, c *Comm, send, recv []T, op collectives.Op, root int) error {
	o, err := c.bind("reduce", simd.TypeOf[T](), op)
	if err != nil {
		return err
	}
	t := o.t
	if err := c.checkRoot("reduce", root); err != nil {
		return err
	}
	amRoot := c.world.Rank() == root
	if amRoot && sameStart(send, recv) {
		send = nil
	}
	n := len(send)
	switch {
	case amRoot && send == nil:
		n = len(recv)
	case send == nil:
		return fmt.Errorf("hier: reduce: nil send on rank %d, not the root", c.world.Rank())
	case amRoot && len(recv) != len(send):
		return fmt.Errorf("hier: reduce: len(send) %d != len(recv) %d at the root", len(send), len(recv))
	}
	in := send // this rank's input
	if in == nil {
		in = recv
	}
	if in == nil {
		in = []T{} // in place with nothing to reduce: still not "no send"
	}
	w := c.where[root]
	onRootNode := w.node == c.nodeIdx
	me := c.node.Rank()
	if len(c.nodeSizes) == 1 {
		if amRoot {
			return collectives.Reduce(ctx, c.local, send, recv, op, w.local)
		}
		return collectives.Reduce(ctx, c.local, in, nil, op, w.local)
	}

	if c.choose(n*t.Size()) == Leader {
		// acc: where the node's partial result lands on the leader.
		var acc []T
		if me == 0 {
			if amRoot {
				acc = recv
			} else {
				acc = work[T](c, n)
			}
			src := in
			if amRoot && send == nil {
				src = nil // in place
			}
			if err := collectives.Reduce(ctx, c.local, src, acc, op, 0); err != nil {
				return err
			}
			if err := c.crossReduceTo(simd.AsBytes(acc), o, w.node); err != nil {
				return err
			}
		} else if err := collectives.Reduce(ctx, c.local, in, nil, op, 0); err != nil {
			return err
		}
		if !onRootNode || w.local == 0 {
			return nil
		}
		// Hand the result from the root node's leader to the root.
		buf := acc
		if amRoot {
			buf = recv
		} else if me != 0 {
			buf = work[T](c, n)
		}
		return collectives.Bcast(ctx, c.local, buf, 0)
	}

	counts, d := c.blocks(n)
	var block []T
	if amRoot && send == nil {
		block = recv[d : d+counts[me]]
		if err := collectives.ReduceScatter(ctx, c.local, nil, recv, counts, op); err != nil {
			return err
		}
	} else {
		block = work[T](c, n+counts[me])[n:]
		if err := collectives.ReduceScatter(ctx, c.local, in, block, counts, op); err != nil {
			return err
		}
	}
	if me < c.lanes {
		if err := c.crossReduceTo(simd.AsBytes(block), o, w.node); err != nil {
			return err
		}
	}
	if !onRootNode {
		return nil
	}
	dst := recv
	if !amRoot {
		dst = work[T](c, n+counts[me])[:n]
	}
	return collectives.Allgatherv(ctx, c.local, block, dst, counts, nil)
}
