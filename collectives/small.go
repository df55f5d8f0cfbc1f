package collectives

import (
	"context"

	"github.com/shmcoll/shmcoll/simd"
)

// The small-call path, the lean mode of the step protocol: the collectives
// and algorithms of smallPaths, where selection picks that algorithm at
// every size up to the call's (selector.smallUpTo). It runs the general
// path's algorithm functions, with the same descriptor, checks, counts and
// results, without its layers: no validation that can fail (anything else
// goes to the general path, which runs or reports it), no choice, the
// cached kernel of a built-in operator, no recover, and no wait in begin.
//
// Where ranks share CPUs every wait is a context switch, after which the
// rank finds its code and data evicted: every cache line a call touches
// costs a refill, so the path touches as few as it can.

// smallOK reports whether small-call path i may run a call of n bytes:
// selection picks its algorithm at every size from its smallest to n
// (learnSmall), and every rank has begun this rank's last step.
// It inlines; the first call of a path learns its range out of line.
func (c *Comm) smallOK(i, n int) bool {
	if m := &c.small[i]; m.known {
		return n <= int(m.upTo) && c.synced == c.step && !c.closed && c.ep.Ok()
	}
	return c.learnSmall(i, n)
}

// learnSmall learns the range of small-call path i (none with one rank)
// and is smallOK for the call of n bytes.
func (c *Comm) learnSmall(i, n int) bool {
	sp := &smallPaths[i]
	upTo := -1
	if c.size > 1 {
		upTo = c.selector().smallUpTo(sp.coll, sp.alg, sp.lo, sp.hi)
	}
	c.small[i] = smallMemo{known: true, upTo: int16(upTo)}
	return c.smallOK(i, n)
}

// smallMemo remembers up to which size selection picks the small-call path's
// algorithm (-1: not even the smallest); the pins do not change.
type smallMemo struct {
	known bool
	upTo  int16 // at most smallRootedBytes: the memos share one cache line
}

// The small-call paths (Comm.small), and the most bytes they take. Bcast
// and reduce take up to 8 KiB, sent whole as on the general path; the
// allreduce 1 KiB, from where its general path samples the placement.
const (
	smallAllreduceIdx = iota
	smallBarrierIdx
	smallBarrierRootIdx
	smallBcastIdx
	smallReduceIdx
	smallReduceScatterIdx
	smallAlltoallIdx
	smallReduceScatterVIdx
	smallGatherIdx
	smallScatterIdx
	numSmall

	smallBytes       = 1 << 10
	smallRootedBytes = 8 << 10
)

// smallPaths are the collective, algorithm and sizes (bytes, as selection
// counts them) of each small-call path.
var smallPaths = [numSmall]struct {
	coll   Collective
	alg    Algorithm
	lo, hi int
}{
	smallAllreduceIdx:      {CollAllreduce, Replicated, 1, smallBytes},
	smallBarrierIdx:        {CollBarrier, Flat, 0, 0},
	smallBarrierRootIdx:    {CollBarrier, ReduceBcast, 0, 0},
	smallBcastIdx:          {CollBcast, Flat, 1, smallRootedBytes},
	smallReduceIdx:         {CollReduce, Replicated, 1, smallRootedBytes},
	smallReduceScatterIdx:  {CollReduceScatterBlock, Flat, 1, smallBytes},
	smallAlltoallIdx:       {CollAlltoall, Flat, 1, smallBytes},
	smallReduceScatterVIdx: {CollReduceScatter, Flat, 1, smallBytes},
	smallGatherIdx:         {CollGather, Flat, 1, smallRootedBytes},
	smallScatterIdx:        {CollScatter, Flat, 1, smallRootedBytes},
}

// smallCall begins a call of small-call path i with the arguments the
// algorithm reads, counts and describes it (smallReduceScatterV: after the
// counts). k is the kernel of a built-in operator (nil: none). The block
// counts and displacements are left as they are, not cleared: the paths
// whose algorithm reads them set them, and the others' lines stay untouched.
func (c *Comm) smallCall(i int, t simd.Type, k *simd.Kernel, opID uint64, send, recv []byte, count, root int) *call {
	sp := &smallPaths[i]
	c.countCall(sp.coll, sp.alg, t)
	c.smalls++
	a := &c.args
	a.coll, a.alg, a.typ, a.esz, a.count, a.root, a.opID, a.aux = sp.coll, sp.alg, t, t.Size(), count, root, opID, 0
	a.red, a.send, a.recv = reducer{k: k, comm: true}, send, recv
	if i != smallReduceScatterVIdx {
		c.describe(a)
	}
	return a
}

// lean finishes a small call that its algorithm (or the step a call this
// small takes) ended with err: finish without the recover. It inlines.
func (c *Comm) lean(err error) (bool, error) {
	if err == nil && !c.full {
		c.leave(c.step) // finish
	}
	return true, err
}

// kernel returns the cached kernel of the built-in op for t, nil if op is
// not one (see kernelCache); op by pointer, so that no call copies the Op.
func (c *Comm) kernel(t simd.Type, op *Op) *simd.Kernel {
	if k := c.kernels.get(t, op.hash); k != nil {
		return k
	}
	return c.kernels.fill(t, op)
}

// oneLine is data if one cache line or less, else nil: where one rank reads
// what one other writes, more lines are faster fetched after the post.
func oneLine(data []byte) []byte {
	if len(data) > lineBytes {
		return nil
	}
	return data
}

// smallBarrier is flatBarrier, or rootFirstBarrier where selection takes
// it (c.rootFirst), on the small-call path, begun without the arguments,
// which it does not read; ok is false when it does not apply.
func (c *Comm) smallBarrier(ctx context.Context) (ok bool, err error) {
	i, alg := smallBarrierIdx, Flat
	if c.rootFirst {
		i, alg = smallBarrierRootIdx, ReduceBcast
	}
	if !c.smallOK(i, 0) || ctx.Err() != nil {
		return false, nil // the general path runs it, or fails it
	}
	c.countCall(CollBarrier, alg, 0)
	c.smalls++
	c.hashDesc()
	if alg == ReduceBcast {
		return c.lean(c.rootFirstBarrier(ctx, nil))
	}
	return c.lean(c.flatBarrier(ctx, nil))
}

// smallAllreduce is replicatedAllreduce on the small-call path for a
// built-in operator; ok is false when it does not apply. send is nil or
// as long as recv.
func (c *Comm) smallAllreduce(ctx context.Context, t simd.Type, send, recv []byte, op Op) (ok bool, err error) {
	n := len(recv)
	if n == 0 || !c.smallOK(smallAllreduceIdx, n) {
		return false, nil
	}
	k := c.kernel(t, &op)
	if k == nil || ctx.Err() != nil {
		return false, nil
	}
	if send != nil && same(send, recv) {
		send = nil
	} else if overlaps(send, recv) {
		return false, nil
	}
	return c.lean(c.replicatedStep(ctx, c.smallCall(smallAllreduceIdx, t, k, op.hash, send, recv, n/t.Size(), 0)))
}

// smallBcast is flatBcast on the small-call path; ok is false when it does
// not apply.
func (c *Comm) smallBcast(ctx context.Context, t simd.Type, buf []byte, root int) (ok bool, err error) {
	c.prepareSend(c.rank == root, len(buf))
	n := len(buf)
	if n == 0 || n > c.half || uint(root) >= uint(c.size) || !c.smallOK(smallBcastIdx, n) || ctx.Err() != nil {
		return false, nil
	}
	return c.lean(c.flatBcast(ctx, c.smallCall(smallBcastIdx, t, nil, 0, nil, buf, n/t.Size(), root)))
}

// smallReduce is replicatedAllreduce's reduce on the small-call path for
// a built-in operator; ok is false when it does not apply (Reduce checks
// the arguments).
func (c *Comm) smallReduce(ctx context.Context, t simd.Type, send, recv []byte, op Op, root int) (ok bool, err error) {
	c.prepareSend(c.rank != root, len(send))
	if uint(root) >= uint(c.size) {
		return false, nil
	}
	n := len(send)
	if c.rank == root {
		if send != nil && same(send, recv) {
			send = nil
		}
		if send != nil && (len(send) != len(recv) || overlaps(send, recv)) {
			return false, nil
		}
		n = len(recv)
	} else if send == nil {
		return false, nil
	} else {
		recv = nil
	}
	if n == 0 || n > c.half || !c.smallOK(smallReduceIdx, n) || ctx.Err() != nil {
		return false, nil
	}
	k := c.kernel(t, &op)
	if k == nil {
		return false, nil
	}
	return c.lean(c.replicatedStep(ctx, c.smallCall(smallReduceIdx, t, k, op.hash, send, recv, n/t.Size(), root)))
}

// smallReduceScatter is flatReduceScatter on the small-call path for
// ReduceScatterBlock, out of place, with a built-in operator; ok is false
// when it does not apply (ReduceScatterBlock checks the arguments). The
// sizes are the whole input's, as selection sees them.
func (c *Comm) smallReduceScatter(ctx context.Context, t simd.Type, send, recv []byte, op Op) (ok bool, err error) {
	p, n := c.size, len(recv)
	k := c.smallReduceKernel(t, send, recv, op)
	if k == nil || n == 0 || len(send) != p*n ||
		!c.smallOK(smallReduceScatterIdx, len(send)) || ctx.Err() != nil {
		return false, nil
	}
	a := c.smallCall(smallReduceScatterIdx, t, k, op.hash, send, recv, n/t.Size(), 0)
	c.regular(a, a.count)
	return c.lean(c.flatReduceScatter(ctx, a))
}

// smallReduceScatterV is smallReduceScatter for ReduceScatter, whose
// blocks have counts elements; ok is false when it does not apply, and
// ReduceScatter checks the arguments.
func (c *Comm) smallReduceScatterV(ctx context.Context, t simd.Type, send, recv []byte, counts []int, op Op) (ok bool, err error) {
	if len(counts) != c.size {
		return false, nil
	}
	k := c.smallReduceKernel(t, send, recv, op)
	if k == nil {
		return false, nil
	}
	esz := t.Size()
	most, total := len(send)/esz, 0
	for _, m := range counts {
		if m < 0 || m > most {
			return false, nil
		}
		total += m
	}
	if total*esz != len(send) || counts[c.rank]*esz != len(recv) ||
		!c.smallOK(smallReduceScatterVIdx, len(send)) || ctx.Err() != nil {
		return false, nil
	}
	a := c.smallCall(smallReduceScatterVIdx, t, k, op.hash, send, recv, total, 0)
	_, _ = c.irregular(a, counts) // counts checked above: no error
	c.describe(a)
	return c.lean(c.flatReduceScatter(ctx, a))
}

// smallReduceKernel is what the small-call reduce-scatters need of their
// arguments: an input out of place that fits the slot half, a result
// apart from it, and the kernel of a built-in operator (nil if not).
func (c *Comm) smallReduceKernel(t simd.Type, send, recv []byte, op Op) *simd.Kernel {
	if len(send) == 0 || len(send) > c.half || overlaps(send, recv) {
		return nil
	}
	return c.kernel(t, &op)
}

// smallAlltoall is flatAlltoall on the small-call path, out of place (ok
// is false when it does not apply; Alltoall checks the arguments).
func (c *Comm) smallAlltoall(ctx context.Context, t simd.Type, send, recv []byte) (ok bool, err error) {
	p, N := c.size, len(recv)
	if send == nil || N == 0 || len(send) != N || N%(p*t.Size()) != 0 || N > c.half || overlaps(send, recv) ||
		!c.smallOK(smallAlltoallIdx, N) || ctx.Err() != nil {
		return false, nil
	}
	return c.lean(c.smallAlltoallStep(ctx, c.smallCall(smallAlltoallIdx, t, nil, 0, send, recv, N/p/t.Size(), 0)))
}

// smallRooted is flatScatterv (gather false) or flatGatherv on small-call
// path i, out of place (see rootedBlocks); ok is false when it does not
// apply. The sizes are whole's, as selection sees them.
func (c *Comm) smallRooted(ctx context.Context, i int, t simd.Type, part, whole []byte, root int, gather bool) (ok bool, err error) {
	n := len(part)
	if uint(root) >= uint(c.size) || n == 0 {
		return false, nil
	}
	if c.rank != root {
		whole = nil
	} else if len(whole) != n*c.size || overlaps(part, whole) {
		return false, nil
	}
	if !c.smallOK(i, n*c.size) || ctx.Err() != nil {
		return false, nil
	}
	send, recv := whole, part
	if gather {
		send, recv = part, whole
	}
	a := c.smallCall(i, t, nil, 0, send, recv, n/t.Size(), root)
	if whole != nil {
		if own := whole[root*n : (root+1)*n]; gather {
			simd.Copy(own, part)
		} else {
			simd.Copy(part, own)
		}
	}
	c.regular(a, a.count)
	return c.lean(algorithms[a.coll][a.alg](c, ctx, a))
}
