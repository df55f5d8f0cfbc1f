package collectives

import (
	"context"

	"github.com/shmcoll/shmcoll/simd"
)

// The small-call path, the lean mode of the step protocol: barrier,
// allreduce, reduce_scatter(_block) and alltoall of at most smallBytes,
// bcast and reduce of at most smallRootedBytes, where selection picks the
// flat barrier, the replicated allreduce and reduce and the flat bcast,
// reduce_scatter(_block) and alltoall at every size up to the call's
// (selector.smallUpTo). Each runs the one step of flatBarrier,
// replicatedAllreduce, flatBcast, flatReduceScatter or flatAlltoall with
// the step protocol's own primitives (countCall, open, post,
// waitChecked), the same descriptor, checks, counts and results, in one
// function, without the general path's layers (start, bindOp, pick,
// choose, run, begin's check, end, finish): a call that begins with every
// rank known to have begun the last step needs none of them.
//
// Where ranks share CPUs, what it saves is memory more than instructions:
// every wait is a context switch, and a rank that gets its CPU back finds
// its code and data evicted by the ranks that ran meanwhile, so every
// cache line and page a call touches costs a refill. Where each rank has
// a CPU, the sender's call path is on the receiver's clock.
//
// Anything else (a closed or aborted endpoint, a step that is not known
// synchronized, a user operator, an argument error, another algorithm)
// takes the general path, which runs or reports it.

// smallOK reports whether small-call path i may run a call of n bytes:
// selection picks its algorithm at every size from its smallest to n
// (learnSmall), and every rank has begun this rank's last step.
func (c *Comm) smallOK(i, n int) bool {
	if m := &c.small[i]; !m.known || m.pin != c.pinned[smallPaths[i].coll] {
		c.learnSmall(i)
	}
	return n <= c.small[i].upTo && c.size > 1 && c.synced == c.step && !c.closed && c.ep.Ok()
}

func (c *Comm) learnSmall(i int) {
	sp := &smallPaths[i]
	c.small[i] = smallMemo{known: true, pin: c.pinned[sp.coll], upTo: c.selector().smallUpTo(sp.coll, sp.alg, sp.lo, sp.hi)}
}

// smallMemo remembers up to which size selection picks the small-call path's
// algorithm (-1: not even the smallest), for the pin it was worked out with
// (tests change pins).
type smallMemo struct {
	known bool
	pin   Algorithm
	upTo  int
}

// The small-call paths (Comm.small), and the most bytes they take: the
// vector travels in the counter's line up to tinyBytes, above in the slot
// half. Bcast and reduce take up to 8 KiB, where the flat bcast and the
// replicated reduce send the vector whole too; above, the general path's
// copies gain from the store advice. The allreduce keeps 1 KiB: from
// sampledReduceMin its general path samples the placement (non-temporal
// copy-in on advice).
const (
	smallAllreduceIdx = iota
	smallBarrierIdx
	smallBcastIdx
	smallReduceIdx
	smallReduceScatterIdx
	smallAlltoallIdx
	smallReduceScatterVIdx
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
	smallBcastIdx:          {CollBcast, Flat, 1, smallRootedBytes},
	smallReduceIdx:         {CollReduce, Replicated, 1, smallRootedBytes},
	smallReduceScatterIdx:  {CollReduceScatterBlock, Flat, 1, smallBytes},
	smallAlltoallIdx:       {CollAlltoall, Flat, 1, smallBytes},
	smallReduceScatterVIdx: {CollReduceScatter, Flat, 1, smallBytes},
}

// smallCall begins a small call of coll, its one step: it counts the call
// and the step (countCall), sets the fields the descriptor covers and
// opens step e (open) without begin's check, which smallOK made.
func (c *Comm) smallCall(coll Collective, alg Algorithm, t simd.Type, count, root int, k *simd.Kernel, opID, aux uint64, send, recv []byte) uint64 {
	c.countCall(coll, t, Stats{Calls: 1, Steps: 1, Rounds: 1})
	c.smalls++
	c.setDesc(coll, alg, t, root, count, opID, aux)
	c.full = true
	e := c.step + 1
	c.open(e)
	return e
}

// smallWait is waitChecked for phase 1: the small-call path waits for
// each peer once in its step, so it keeps no record in checked.
func (c *Comm) smallWait(ctx context.Context, q int, e uint64, data []byte) error {
	return c.waitChecked(ctx, q, e, 1, data)
}

// oneLine is data if it is one cache line or less, else nil: bcast and
// reduce keep at most one line of what they wait for in flight (see
// smallWait). Where one rank reads what one other writes, more lines are
// faster fetched after the post than taken back by the writer's stores
// from the reader. Allreduce, where every rank writes and reads, keeps
// them all in flight.
func oneLine(data []byte) []byte {
	if len(data) > lineBytes {
		return nil
	}
	return data
}

// smallFinish waits for every peer but skip (-1: none) to post step e
// (finish's work: the step's descriptors are compared everywhere, and every
// rank has begun the step).
func (c *Comm) smallFinish(ctx context.Context, e uint64, skip int) error {
	for i := 1; i < c.size; i++ {
		q := c.rank + i
		if q >= c.size {
			q -= c.size
		}
		if q != skip {
			if err := c.smallWait(ctx, q, e, nil); err != nil {
				return err
			}
		}
	}
	c.synced = e
	return nil
}

// smallBarrier is flatBarrier on the small-call path; ok is false when it
// does not apply.
func (c *Comm) smallBarrier(ctx context.Context) (ok bool, err error) {
	if !c.smallOK(smallBarrierIdx, 0) || ctx.Err() != nil {
		return false, nil // the general path runs it, or fails it
	}
	e := c.smallCall(CollBarrier, Flat, 0, 0, 0, nil, 0, 0, nil, nil)
	c.post(e, 1)
	return true, c.smallFinish(ctx, e, -1)
}

// smallAllreduce is replicatedAllreduce on the small-call path for a
// built-in operator; ok is false when it does not apply. send is nil or as long as recv.
func (c *Comm) smallAllreduce(ctx context.Context, t simd.Type, send, recv []byte, op Op) (ok bool, err error) {
	n := len(recv)
	if n == 0 || !c.smallOK(smallAllreduceIdx, n) {
		return false, nil
	}
	k := c.kernels.get(t, op)
	if k == nil {
		if k = c.kernels.fill(t, op); k == nil {
			return false, nil
		}
	}
	in := send
	if in == nil || same(in, recv) {
		in, send = recv, nil
	} else if overlaps(in, recv) {
		return false, nil
	}
	if ctx.Err() != nil {
		return false, nil
	}
	e := c.smallCall(CollAllreduce, Replicated, t, n/t.Size(), 0, k, op.hash, 0, send, recv)
	p := uint64(c.size - 1)
	c.last.Sent, c.last.Received, c.last.Reduced = p, p, p
	// stepBuf by hand (it does not inline), here and for each peer just
	// before its wait, and a tiny vector (in the counter's line) not kept
	// in flight: it arrives with the counter.
	tiny := n <= tinyBytes
	if tiny {
		copy(c.tiny(c.rank, e), in) // as replicatedAllreduce: not publish
	} else {
		copy(c.slotHalf(c.rank, e), in)
	}
	c.post(e, 1)
	// The own input where it is, not the copy that the peers are reading
	// (see replicatedAllreduce); in place, only as the kernel's first
	// source. Not where ranks share CPUs, whose peers do not read at the
	// same time: there the copy is as near as the input.
	ownIn := (send != nil || c.rank == 0) && !c.ep.Oversubscribed()
	srcs := c.sc.srcs
	for q := range srcs {
		if q == c.rank && ownIn {
			srcs[q] = in
			continue
		}
		var src, touch []byte
		if tiny {
			src = c.tiny(q, e)[:n]
		} else {
			src = c.slotHalf(q, e)[:n]
			touch = src
		}
		if q != c.rank {
			if err := c.smallWait(ctx, q, e, touch); err != nil {
				return true, err
			}
		}
		srcs[q] = src
	}
	k.ReduceK(recv, srcs)
	c.synced = e // every rank's step-e data was read: every rank has begun it
	return true, nil
}

// smallBcast is flatBcast on the small-call path; ok is false when it does
// not apply.
func (c *Comm) smallBcast(ctx context.Context, t simd.Type, buf []byte, root int) (ok bool, err error) {
	n := len(buf)
	if n == 0 || n > c.half || uint(root) >= uint(c.size) || !c.smallOK(smallBcastIdx, n) || ctx.Err() != nil {
		return false, nil
	}
	e := c.smallCall(CollBcast, Flat, t, n/t.Size(), root, nil, 0, 0, nil, buf)
	tiny := n <= tinyBytes
	if c.rank == root {
		c.adv.publish(c.stepBuf(c.rank, e, tiny), buf)
		c.post(e, 1)
		c.last.Sent = uint64(c.size - 1)
		return true, c.smallFinish(ctx, e, -1)
	}
	c.post(e, 1)
	src := c.stepBuf(root, e, tiny)[:n]
	if err := c.smallWait(ctx, root, e, oneLine(src)); err != nil {
		return true, err
	}
	if n >= copyPrefetchMin && !c.ep.Oversubscribed() { // as copyPeer (smallRootedBytes is copyPrefetchMax)
		simd.Prefetch(src)
	}
	simd.Copy(buf, src)
	c.last.Received = 1
	return true, c.smallFinish(ctx, e, root)
}

// smallReduce is replicatedAllreduce's reduce on the small-call path for
// a built-in operator; ok is false when it does not apply (Reduce checks the arguments).
func (c *Comm) smallReduce(ctx context.Context, t simd.Type, send, recv []byte, op Op, root int) (ok bool, err error) {
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
	k := c.kernels.get(t, op)
	if k == nil {
		if k = c.kernels.fill(t, op); k == nil {
			return false, nil
		}
	}
	e := c.smallCall(CollReduce, Replicated, t, n/t.Size(), root, k, op.hash, 0, send, recv)
	p := c.size
	c.last.Sent = uint64(p - 1)
	tiny := n <= tinyBytes
	if send == nil {
		c.adv.publish(c.stepBuf(c.rank, e, tiny), recv) // the root in place
	} else if c.rank != root {
		c.adv.publish(c.stepBuf(c.rank, e, tiny), send)
	}
	c.post(e, 1)
	if c.rank != root {
		return true, c.smallFinish(ctx, e, -1)
	}
	srcs := c.sc.srcs
	c.stepBufs(srcs, e, tiny, n)
	if send != nil {
		srcs[c.rank] = send // the root reads its input where it is
	}
	for q, src := range srcs {
		if q != c.rank {
			if err := c.smallWait(ctx, q, e, oneLine(src)); err != nil {
				return true, err
			}
			if n > smallBytes { // as replicatedAllreduce's (prefetchMin)
				simd.Prefetch(src)
			}
		}
	}
	k.ReduceK(recv, srcs)
	c.last.Received, c.last.Reduced = uint64(p-1), uint64(p-1)
	c.synced = e
	return true, nil
}

// smallReduceScatter is flatReduceScatter on the small-call path for
// ReduceScatterBlock, out of place, with a built-in operator; ok is false
// when it does not apply (ReduceScatterBlock checks the arguments). The
// sizes are the whole input's, as selection sees them. Like
// smallAllreduce it reduces the own block where it is, where ranks have
// CPUs of their own.
func (c *Comm) smallReduceScatter(ctx context.Context, t simd.Type, send, recv []byte, op Op) (ok bool, err error) {
	p, n := c.size, len(recv)
	k := c.smallReduceKernel(t, send, recv, op)
	if k == nil || n == 0 || len(send) != p*n ||
		!c.smallOK(smallReduceScatterIdx, len(send)) || ctx.Err() != nil {
		return false, nil
	}
	return true, c.smallReduceBlocks(ctx, CollReduceScatterBlock, t, k, op.hash, send, recv, c.rank*n, n/t.Size(), 0)
}

// smallReduceScatterV is smallReduceScatter for ReduceScatter, whose
// blocks have counts elements (the descriptor hashes them, as the general
// path's irregular does); ok is false when it does not apply, and
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
	most, total, lo := len(send)/esz, 0, 0
	for j, m := range counts {
		if m < 0 || m > most {
			return false, nil
		}
		if j == c.rank {
			lo = total
		}
		total += m
	}
	if total*esz != len(send) || counts[c.rank]*esz != len(recv) ||
		!c.smallOK(smallReduceScatterVIdx, len(send)) || ctx.Err() != nil {
		return false, nil
	}
	return true, c.smallReduceBlocks(ctx, CollReduceScatter, t, k, op.hash, send, recv, lo*esz, total, hashInts(counts))
}

// smallReduceKernel is what the small-call reduce-scatters need of their
// arguments: an input out of place that fits the slot half, a result
// apart from it, and the kernel of a built-in operator (nil if not).
func (c *Comm) smallReduceKernel(t simd.Type, send, recv []byte, op Op) *simd.Kernel {
	if len(send) == 0 || len(send) > c.half || overlaps(send, recv) {
		return nil
	}
	if k := c.kernels.get(t, op); k != nil {
		return k
	}
	return c.kernels.fill(t, op)
}

// smallReduceBlocks runs flatReduceScatter's one step for coll with the
// descriptor's count and aux: the whole input in the slot half (or the
// counter's line up to tinyBytes), then the reduction of the blocks at lo
// (bytes, as long as recv) of every rank into recv.
func (c *Comm) smallReduceBlocks(ctx context.Context, coll Collective, t simd.Type, k *simd.Kernel, opID uint64, send, recv []byte, lo, count int, aux uint64) error {
	p := c.size
	e := c.smallCall(coll, Flat, t, count, 0, k, opID, aux, send, recv)
	c.last.Sent, c.last.Received, c.last.Reduced = uint64(p-1), uint64(p-1), uint64(p-1)
	tiny := len(send) <= tinyBytes
	simd.Copy(c.stepBuf(c.rank, e, tiny), send) // the blocks in rank order, as flatReduceScatter's
	c.post(e, 1)
	hi := lo + len(recv)
	ownIn := !c.ep.Oversubscribed()
	srcs := c.sc.srcs
	for q := range srcs {
		if q == c.rank && ownIn {
			srcs[q] = send[lo:hi]
			continue
		}
		src := c.stepBuf(q, e, tiny)[lo:hi]
		if q != c.rank {
			if err := c.smallWait(ctx, q, e, src); err != nil {
				return err
			}
		}
		srcs[q] = src
	}
	k.ReduceK(recv, srcs)
	c.synced = e // every rank's step-e data was read: every rank has begun it
	return nil
}

// smallAlltoall is flatAlltoall's one step on the small-call path (ok is
// false when it does not apply; Alltoall checks the arguments): the pieces
// for the other ranks in rank order in the slot half, or in the counter's
// line up to tinyBytes, the own block copied while the peers read.
// Its pieces are published with a store per line (publish), which the
// readers poll; the general path's larger pieces take the string copy.
func (c *Comm) smallAlltoall(ctx context.Context, t simd.Type, send, recv []byte) (ok bool, err error) {
	p, N := c.size, len(recv)
	if send == nil || N == 0 || len(send) != N || N%(p*t.Size()) != 0 || N > c.half || overlaps(send, recv) ||
		!c.smallOK(smallAlltoallIdx, N) || ctx.Err() != nil {
		return false, nil
	}
	n := N / p
	e := c.smallCall(CollAlltoall, Flat, t, n/t.Size(), 0, nil, 0, 0, send, recv)
	c.last.Sent, c.last.Received = uint64(p-1), uint64(p-1)
	tiny := N <= tinyBytes
	h := c.stepBuf(c.rank, e, tiny)
	for j := range p {
		if j != c.rank {
			c.adv.publish(h[j*n:(j+1)*n], send[j*n:(j+1)*n])
		}
	}
	c.post(e, 1)
	lo := c.rank * n
	simd.Copy(recv[lo:lo+n], send[lo:lo+n])
	for i := 1; i < p; i++ {
		q := c.rank + i
		if q >= p {
			q -= p
		}
		src := c.stepBuf(q, e, tiny)[lo : lo+n]
		if err := c.smallWait(ctx, q, e, src); err != nil {
			return true, err
		}
		simd.Copy(recv[q*n:(q+1)*n], src)
	}
	c.synced = e // every rank's step-e data was read: every rank has begun it
	return true, nil
}
