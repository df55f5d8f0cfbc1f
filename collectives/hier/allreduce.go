//go:build mpi

package hier

import (
	"context"
	"fmt"
	"os"
	"unsafe"

	"github.com/shmcoll/shmcoll/collectives"
	"github.com/shmcoll/shmcoll/mpi"
	"github.com/shmcoll/shmcoll/simd"
)

// mpiTypes maps the simd types MPI has; the others cross nodes as bytes.
var mpiTypes = map[simd.Type]mpi.Datatype{
	simd.Int8: mpi.Int8, simd.Int16: mpi.Int16, simd.Int32: mpi.Int32, simd.Int64: mpi.Int64,
	simd.Uint8: mpi.Uint8, simd.Uint16: mpi.Uint16, simd.Uint32: mpi.Uint32, simd.Uint64: mpi.Uint64,
	simd.Float32: mpi.Float32, simd.Float64: mpi.Float64,
	simd.Complex64: mpi.Complex64, simd.Complex128: mpi.Complex128,
}

var mpiOps = map[simd.Op]mpi.Op{
	simd.Sum: mpi.Sum, simd.Prod: mpi.Prod, simd.Min: mpi.Min, simd.Max: mpi.Max,
	simd.Band: mpi.BAnd, simd.Bor: mpi.BOr, simd.Bxor: mpi.BXor,
}

// operator is a call's operator bound to its element type.
type operator struct {
	op      collectives.Op
	t       simd.Type
	builtin simd.Op // when isBuiltin
	// isBuiltin: a built-in operator, which MPI may apply; user operators
	// always cross nodes as bytes.
	isBuiltin bool
}

// bind checks op for elements of type t in collective coll. A
// non-commutative operator needs node order to be rank order (see the
// package documentation): with nodes that are not consecutive rank ranges
// it is refused, on every rank alike.
func (c *Comm) bind(coll string, t simd.Type, op collectives.Op) (operator, error) {
	o := operator{op: op, t: t}
	o.builtin, o.isBuiltin = op.Builtin()
	if o.isBuiltin && !simd.Supports(t, o.builtin) {
		return o, fmt.Errorf("hier: %s: %v does not apply to %v: %w", coll, o.builtin, t, simd.ErrUnsupported)
	}
	if err := op.Check(t); err != nil {
		return o, fmt.Errorf("hier: %s: %w", coll, err)
	}
	if !op.Commutative() && !c.contiguous {
		return o, fmt.Errorf("hier: %s: operator %q is not commutative, and the emulated nodes are not consecutive rank ranges (Options.NodeOf), so node order is not rank order: %w",
			coll, op, collectives.ErrNotCommutative)
	}
	return o, nil
}

// byMPI returns the MPI datatype and operator for o, if MPI has both.
func byMPI(o operator) (mpi.Datatype, mpi.Op, bool) {
	if !o.isBuiltin {
		return 0, 0, false
	}
	dt, ok1 := mpiTypes[o.t]
	mop, ok2 := mpiOps[o.builtin]
	return dt, mop, ok1 && ok2 && mop.Applies(dt)
}

// HasMPIType reports whether (t, op) crosses nodes as an MPI reduction; the
// others (and every user operator) are allgathered as bytes and reduced
// with shmcoll's kernels or the operator's function.
func HasMPIType(t simd.Type, op simd.Op) bool {
	_, _, ok := byMPI(operator{t: t, builtin: op, isBuiltin: true})
	return ok
}

// crossReduce reduces block in place across the ranks of comm (a lane).
func (c *Comm) crossReduce(comm mpi.Comm, block []byte, o operator) error {
	return c.crossReduceFrom(comm, nil, block, o)
}

// crossReduceFrom reduces src across the ranks of comm into block (src nil:
// in place). Without an MPI reduction the lane's blocks are allgathered and
// combined left to right in lane order, which is node order: every member
// computes the same bits, and a non-commutative operator gets the node-order
// product.
func (c *Comm) crossReduceFrom(comm mpi.Comm, src, block []byte, o operator) error {
	if len(block) == 0 {
		return nil
	}
	if comm.Size() <= 1 {
		if src != nil {
			copy(block, src)
		}
		return nil
	}
	if dt, mop, ok := byMPI(o); ok {
		return comm.Allreduce(src, block, dt, mop)
	}
	if src != nil {
		copy(block, src)
	}
	n, nb := comm.Size(), len(block)
	if cap(c.scratch) < n*nb {
		c.scratch = make([]byte, n*nb)
	}
	all := c.scratch[:n*nb]
	if err := comm.Allgather(block, all, mpi.Byte); err != nil {
		return err
	}
	srcs := make([][]byte, n)
	for j := range srcs {
		srcs[j] = all[j*nb : (j+1)*nb]
	}
	if o.isBuiltin {
		k, err := simd.Lookup(o.t, o.builtin)
		if err != nil {
			return err
		}
		k.ReduceK(block, srcs)
		return nil
	}
	copy(block, srcs[0])
	for _, s := range srcs[1:] {
		if err := o.op.Apply(o.t, block, s); err != nil {
			return err
		}
	}
	return nil
}

// choose picks the algorithm for a call of the given size (equal on all ranks).
func (c *Comm) choose(bytes int) Algorithm {
	if c.alg != Auto {
		return c.alg
	}
	if bytes < leaderBelow || c.lanes == 1 {
		return Leader
	}
	return MultiLane
}

// blocks cuts n elements into the node's blocks: c.lanes nearly equal ones,
// then empty blocks for the local ranks beyond the smallest node's size.
func (c *Comm) blocks(n int) (counts []int, displ int) {
	counts = make([]int, c.node.Size())
	for i := 0; i < c.lanes; i++ {
		lo, hi := i*n/c.lanes, (i+1)*n/c.lanes
		counts[i] = hi - lo
		if i < c.node.Rank() {
			displ += counts[i]
		}
	}
	return counts, displ
}

// finish ends a collective call. On failure it aborts the node's arena, so
// that the node's other ranks, waiting in shared memory, return too, and
// then (unless Options.ReturnErrors) the MPI job, as MPI_ERRORS_ARE_FATAL
// would: ranks of other nodes may be waiting in MPI for this one.
func (c *Comm) finish(coll string, err error) error {
	if err == nil {
		return nil
	}
	err = fmt.Errorf("hier: %s on rank %d (node %d): %w", coll, c.world.Rank(), c.nodeIdx, err)
	c.local.Abort(err)
	if !c.returnErrors {
		fmt.Fprintf(os.Stderr, "%v; aborting the MPI job\n", err)
		c.world.Abort(1)
	}
	return err
}

func sameStart[T simd.Element](a, b []T) bool {
	return len(a) > 0 && len(b) > 0 && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// Allreduce combines send of all ranks element-wise with op into recv on
// every rank: recv[i] = send_0[i] op send_1[i] op ... op send_{p-1}[i] in
// rank order, so op may be non-commutative (with nodes of consecutive
// ranks). send nil (or send == recv) means in place. The algorithm is
// [Options].Algorithm, or by size (see the package documentation).
func Allreduce[T simd.Element](ctx context.Context, c *Comm, send, recv []T, op collectives.Op) error {
	return c.finish("allreduce", allreduce(ctx, c, send, recv, op))
}

func allreduce[T simd.Element](ctx context.Context, c *Comm, send, recv []T, op collectives.Op) error {
	o, err := c.bind("allreduce", simd.TypeOf[T](), op)
	if err != nil {
		return err
	}
	if send != nil && len(send) != len(recv) {
		return fmt.Errorf("hier: allreduce: len(send) %d != len(recv) %d", len(send), len(recv))
	}
	if sameStart(send, recv) {
		send = nil
	}
	if len(c.nodeSizes) == 1 {
		return collectives.Allreduce(ctx, c.local, send, recv, op)
	}
	if c.node.Size() == 1 {
		// One rank on this node: no shared-memory stage, straight into recv
		// (lane 0 is every node's leader, as the other nodes' stages use).
		return c.crossReduceFrom(c.lane, simd.AsBytes(send), simd.AsBytes(recv), o)
	}
	switch c.choose(len(recv) * o.t.Size()) {
	case Leader:
		return allreduceLeader(ctx, c, send, recv, o)
	default:
		return allreduceMultiLane(ctx, c, send, recv, o)
	}
}

func allreduceLeader[T simd.Element](ctx context.Context, c *Comm, send, recv []T, o operator) error {
	var err error
	if c.node.Rank() == 0 {
		err = collectives.Reduce(ctx, c.local, send, recv, o.op, 0)
	} else {
		s := send
		if s == nil {
			s = recv
		}
		err = collectives.Reduce(ctx, c.local, s, nil, o.op, 0)
	}
	if err != nil {
		return err
	}
	if c.node.Rank() == 0 {
		if err := c.crossReduce(c.lane, simd.AsBytes(recv), o); err != nil {
			return err
		}
	}
	return collectives.Bcast(ctx, c.local, recv, 0)
}

func allreduceMultiLane[T simd.Element](ctx context.Context, c *Comm, send, recv []T, o operator) error {
	counts, d := c.blocks(len(recv))
	me := c.node.Rank()
	block := recv[d : d+counts[me]]
	var err error
	if send != nil {
		err = collectives.ReduceScatter(ctx, c.local, send, block, counts, o.op)
	} else {
		err = collectives.ReduceScatter(ctx, c.local, nil, recv, counts, o.op)
	}
	if err != nil {
		return err
	}
	if me < c.lanes {
		if err := c.crossReduce(c.lane, simd.AsBytes(block), o); err != nil {
			return err
		}
	}
	return collectives.Allgatherv(ctx, c.local, nil, recv, counts, nil)
}
