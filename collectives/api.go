package collectives

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/shmcoll/shmcoll/simd"
)

// start begins a call of coll on elements of type t: it waits for the
// rank's nonblocking calls (await), checks the communicator, counts the
// call and returns the call's arguments to fill, the Comm's own storage
// (calls do not allocate).
func (c *Comm) start(ctx context.Context, coll Collective, t simd.Type) (*call, error) {
	if err := c.await(ctx, coll); err != nil {
		return nil, err
	}
	if c.closed {
		return nil, &Error{Rank: c.rank, Coll: coll, Seq: c.seq, Err: ErrClosed}
	}
	c.countCall(coll, Auto, t)
	a := c.newCall(coll, Auto, t)
	if !c.ep.Ok() { // inlined; Err, which names the cause, is not
		return nil, c.fail(c.ep.Err())
	}
	return a, nil
}

// checkRoot fails the current call if root is not a rank.
func (c *Comm) checkRoot(root int) error {
	if root < 0 || root >= c.size {
		return c.bad("root %d out of range [0, %d)", root, c.size)
	}
	return nil
}

// bad fails the current call with an invalid-argument error.
func (c *Comm) bad(format string, args ...any) error {
	return c.fail(fmt.Errorf("%w: %s", ErrInvalidArgument, fmt.Sprintf(format, args...)))
}

// startOp is start for a reduction with operator op, which it binds to t.
func (c *Comm) startOp(ctx context.Context, coll Collective, t simd.Type, op Op) (*call, error) {
	a, err := c.start(ctx, coll, t)
	if err != nil {
		return nil, err
	}
	if a.red, err = op.bind(t); err != nil {
		return nil, c.fail(err)
	}
	a.opID = op.hash
	return a, nil
}

// pick chooses the algorithm for the call a of bytes and runs it
// (dispatch); with one rank it does nothing: the caller did what one rank
// does. It inlines, so a one-rank call makes no call for it.
func (c *Comm) pick(ctx context.Context, a *call, bytes int) error {
	if c.size == 1 {
		return nil
	}
	return c.dispatch(ctx, a, bytes)
}

func (c *Comm) dispatch(ctx context.Context, a *call, bytes int) error {
	// ctx.Err(), an atomic load in the standard library's cancelable
	// contexts, not a select on ctx.Done(), which calls the runtime's
	// channel receive and reads the channel's line: where ranks share
	// CPUs every line a call touches is a refill after each wait. Not
	// remembered per context: comparing contexts panics for a Context
	// whose type is not comparable.
	if err := ctx.Err(); err != nil {
		return c.fail(err)
	}
	alg, err := c.choose(a, bytes)
	if err != nil {
		return c.fail(err)
	}
	a.alg = alg
	if (a.coll == CollAllgather || a.coll == CollAllgatherv) && alg != Flat && alg != Direct && alg != Single {
		ownBlock(c.rank, a)
	}
	if err := c.run(ctx, a, algorithms[a.coll][alg]); err != nil {
		return err
	}
	c.averaged(a)
	return c.finish()
}

// finish ends a call: a rank whose last step did not make it depend on
// every rank returns early, and settle makes the final check later
// (early.go). An algorithm whose peers read the rank's own buffers in
// place (Direct) ends by waiting for every rank (endAll) instead.
func (c *Comm) finish() error {
	if !c.full {
		c.leave(c.step)
	}
	return nil
}

// bytesOf views s as bytes; nil stays nil (in place).
func bytesOf[T simd.Element](s []T) []byte {
	if s == nil {
		return nil
	}
	if len(s) == 0 {
		return []byte{}
	}
	return simd.AsBytes(s)
}

// unsafePtr is the address of b's first byte (b not empty).
func unsafePtr(b []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(b)) }

// same reports whether a and b are the same memory (an in-place call).
func same(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || unsafe.SliceData(a) == unsafe.SliceData(b))
}

// overlaps reports whether a and b share memory.
func overlaps(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa, pb := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}

// inPlace normalises send for a call whose send may be nil or recv itself
// (in place), and rejects a partial overlap.
func (c *Comm) inPlace(send, recv []byte) ([]byte, error) {
	if send == nil || same(send, recv) {
		return nil, nil
	}
	if overlaps(send, recv) {
		return nil, c.bad("send and receive buffers overlap without being the same")
	}
	return send, nil
}

// hashInts hashes the values of xs in order, FNV-1a's step on whole
// words: one multiply per value, which is a bijection of the hash, so
// that vectors that differ in one value hash differently.
func hashInts(xs ...[]int) uint64 {
	h := uint64(14695981039346656037)
	for _, x := range xs {
		for _, v := range x {
			h = (h ^ uint64(v)) * 1099511628211
		}
	}
	return h
}

// Allreduce combines the vectors send of all ranks element-wise with op and
// stores the result in recv on every rank: recv[i] = send_0[i] op ... op
// send_{p-1}[i], in the operand order the algorithm documents (the same on
// every rank and in every run). send nil, or send the same slice as recv,
// means in place: recv holds the input. len(send) == len(recv) == count, the
// same on every rank.
func Allreduce[T simd.Element](ctx context.Context, c *Comm, send, recv []T, op Op) error {
	if err := c.await(ctx, CollAllreduce); err != nil {
		return err
	}
	if c.size > 1 && (send == nil || len(send) == len(recv)) {
		if ok, err := c.smallAllreduce(ctx, simd.TypeOf[T](), bytesOf(send), simd.AsBytes(recv), op); ok {
			return err
		}
	}
	if err := c.placed(ctx, CollAllreduce, len(recv)*simd.TypeOf[T]().Size()); err != nil {
		return err
	}
	return elementwise(ctx, c, CollAllreduce, send, recv, op)
}

// ReduceScatterBlock combines the vectors send (p blocks of len(recv)
// elements) of all ranks element-wise with op and stores block r of the
// result in recv on rank r. send nil means in place: recv holds the p
// blocks on input and block r of the result in its place, recv[r*n:(r+1)*n]
// with n = len(recv)/p, on output (the other blocks are left undefined).
func ReduceScatterBlock[T simd.Element](ctx context.Context, c *Comm, send, recv []T, op Op) error {
	if err := c.await(ctx, CollReduceScatterBlock); err != nil {
		return err
	}
	if ok, err := c.smallReduceScatter(ctx, simd.TypeOf[T](), bytesOf(send), simd.AsBytes(recv), op); ok {
		return err
	}
	whole := len(send) // the p blocks: the same on every rank
	if send == nil {
		whole = len(recv)
	}
	if err := c.placed(ctx, CollReduceScatterBlock, whole*simd.TypeOf[T]().Size()); err != nil {
		return err
	}
	a, err := c.startOp(ctx, CollReduceScatterBlock, simd.TypeOf[T](), op)
	if err != nil {
		return err
	}
	s, r := bytesOf(send), simd.AsBytes(recv)
	n := len(recv)
	if s == nil {
		if n%c.size != 0 {
			return c.bad("in place: len(recv) = %d is not a multiple of %d ranks", n, c.size)
		}
		n /= c.size
		s = r
		r = r[c.rank*n*a.esz : (c.rank+1)*n*a.esz]
	} else if len(send) != n*c.size {
		return c.bad("len(send) = %d, want %d ranks × len(recv) %d", len(send), c.size, n)
	} else if overlaps(s, r) {
		return c.bad("send and receive buffers overlap")
	}
	a.send, a.recv, a.count = s, r, n
	c.regular(a, n)
	if c.size == 1 {
		simd.Copy(r, s)
	}
	return c.pick(ctx, a, len(s))
}

// ReduceScatter combines the vectors send of all ranks element-wise with op;
// the result is cut into p blocks of counts[0], counts[1], ... elements (the
// same counts on every rank) and block r goes to recv on rank r. send nil
// means in place: recv holds the whole vector on input and block r in its
// place, recv[counts[0]+...+counts[r-1]:][:counts[r]], on output.
func ReduceScatter[T simd.Element](ctx context.Context, c *Comm, send, recv []T, counts []int, op Op) error {
	if err := c.await(ctx, CollReduceScatter); err != nil {
		return err
	}
	if ok, err := c.smallReduceScatterV(ctx, simd.TypeOf[T](), bytesOf(send), simd.AsBytes(recv), counts, op); ok {
		return err
	}
	if len(counts) == 2 { // placed looks at two ranks only
		if err := c.placed(ctx, CollReduceScatter, (counts[0]+counts[1])*simd.TypeOf[T]().Size()); err != nil {
			return err
		}
	}
	a, err := c.startOp(ctx, CollReduceScatter, simd.TypeOf[T](), op)
	if err != nil {
		return err
	}
	total, err := c.irregular(a, counts)
	if err != nil {
		return err
	}
	s, r := bytesOf(send), simd.AsBytes(recv)
	if s == nil {
		if len(recv) < total {
			return c.bad("in place: len(recv) = %d, counts sum to %d", len(recv), total)
		}
		s = r[:total*a.esz]
		d := a.displs[c.rank]
		r = r[d*a.esz : (d+counts[c.rank])*a.esz]
	} else if len(send) != total || len(recv) != counts[c.rank] {
		return c.bad("len(send) = %d, len(recv) = %d; counts sum to %d, counts[%d] = %d", len(send), len(recv), total, c.rank, counts[c.rank])
	} else if overlaps(s, r) {
		return c.bad("send and receive buffers overlap")
	}
	a.send, a.recv, a.count = s, r, total
	if c.size == 1 {
		simd.Copy(r, s)
	}
	return c.pick(ctx, a, len(s))
}

// Allgather gathers the blocks send (n elements) of all ranks into recv (p
// blocks of n) on every rank, block j from rank j. send nil means in place:
// block r of recv holds the rank's contribution.
func Allgather[T simd.Element](ctx context.Context, c *Comm, send, recv []T) error {
	if err := c.placed(ctx, CollAllgather, len(recv)*simd.TypeOf[T]().Size()); err != nil {
		return err
	}
	a, err := c.start(ctx, CollAllgather, simd.TypeOf[T]())
	if err != nil {
		return err
	}
	s, r := bytesOf(send), simd.AsBytes(recv)
	if len(recv)%c.size != 0 {
		return c.bad("len(recv) = %d is not a multiple of %d ranks", len(recv), c.size)
	}
	n := len(recv) / c.size
	if s != nil && len(send) != n {
		return c.bad("len(send) = %d, want len(recv)/p = %d", len(send), n)
	}
	if s != nil && same(s, r[c.rank*n*a.esz:(c.rank+1)*n*a.esz]) {
		s = nil
	} else if overlaps(s, r) {
		return c.bad("send and receive buffers overlap")
	}
	a.send, a.recv, a.count = s, r, n
	c.regular(a, n)
	if c.size == 1 {
		ownBlock(c.rank, a)
	}
	return c.pick(ctx, a, c.size*n*a.esz)
}

// Allgatherv gathers send (counts[r] elements on rank r) of all ranks into
// recv on every rank, rank j's at recv[displs[j]:]; displs nil means packed
// in rank order. counts are the same on every rank, displs may differ.
// send nil means in place.
func Allgatherv[T simd.Element](ctx context.Context, c *Comm, send, recv []T, counts, displs []int) error {
	if len(counts) == 2 { // placed looks at two ranks only
		if err := c.placed(ctx, CollAllgatherv, (counts[0]+counts[1])*simd.TypeOf[T]().Size()); err != nil {
			return err
		}
	}
	a, err := c.start(ctx, CollAllgatherv, simd.TypeOf[T]())
	if err != nil {
		return err
	}
	total, err := c.irregular(a, counts)
	if err != nil {
		return err
	}
	if err := c.vlayout("recv", len(recv), counts, displs, a.counts, a.displs); err != nil {
		return err
	}
	s, r := bytesOf(send), simd.AsBytes(recv)
	me := r[a.displs[c.rank]*a.esz : (a.displs[c.rank]+counts[c.rank])*a.esz]
	if s != nil && len(send) != counts[c.rank] {
		return c.bad("len(send) = %d, counts[%d] = %d", len(send), c.rank, counts[c.rank])
	}
	if s != nil && same(s, me) {
		s = nil
	} else if overlaps(s, r) {
		return c.bad("send and receive buffers overlap")
	}
	a.send, a.recv, a.count = s, r, total
	if c.size == 1 {
		ownBlock(c.rank, a)
	}
	return c.pick(ctx, a, total*a.esz)
}

// ownBlock copies the own block of an allgather(v) from send into recv
// (nothing in place). Every algorithm but flat finds it there when it
// starts (pick); flat copies it piece by piece after publishing the
// piece, while the piece is in cache.
func ownBlock(rank int, a *call) {
	if a.send != nil {
		d := a.displs[rank] * a.esz
		simd.Copy(a.recv[d:d+a.counts[rank]*a.esz], a.send)
	}
}

// regular fills a's block counts and displacements: p blocks of n.
func (c *Comm) regular(a *call, n int) {
	a.counts, a.displs = c.sc.counts, c.sc.displs
	for j := range c.size {
		a.counts[j], a.displs[j] = n, j*n
	}
}

// irregular checks counts and fills a's counts, packed displacements
// and count hash.
func (c *Comm) irregular(a *call, counts []int) (int, error) {
	if len(counts) != c.size {
		return 0, c.bad("len(counts) = %d for %d ranks", len(counts), c.size)
	}
	a.counts, a.displs = c.sc.counts, c.sc.displs
	total := 0
	for j, n := range counts {
		if n < 0 || total+n < total {
			return 0, c.bad("counts[%d] = %d", j, n)
		}
		a.counts[j], a.displs[j] = n, total
		total += n
	}
	a.aux = hashInts(counts)
	return total, nil
}

// Bcast copies buf of rank root into buf of every rank.
//
// The root, and a rank that has its copy, may return before the other
// ranks have made the call, as may the ranks of Reduce, Scatter, Gather
// and Scan whose part is done: a mismatch between the ranks' calls then
// fails the rank's next call on the communicator, or its Close, with the
// error of the mismatched call.
func Bcast[T simd.Element](ctx context.Context, c *Comm, buf []T, root int) error {
	if err := c.await(ctx, CollBcast); err != nil {
		return err
	}
	if ok, err := c.smallBcast(ctx, simd.TypeOf[T](), bytesOf(buf), root); ok {
		return err
	}
	if err := c.placed(ctx, CollBcast, len(buf)*simd.TypeOf[T]().Size()); err != nil {
		return err
	}
	a, err := c.start(ctx, CollBcast, simd.TypeOf[T]())
	if err != nil {
		return err
	}
	if err := c.checkRoot(root); err != nil {
		return err
	}
	a.recv, a.count, a.root = simd.AsBytes(buf), len(buf), root
	return c.pick(ctx, a, len(a.recv))
}

// Reduce combines the vectors send of all ranks element-wise with op into
// recv on rank root; recv is not used on the other ranks (it may be nil).
// send nil means in place on the root (recv holds its input); other ranks
// must pass send.
func Reduce[T simd.Element](ctx context.Context, c *Comm, send, recv []T, op Op, root int) error {
	if err := c.await(ctx, CollReduce); err != nil {
		return err
	}
	if ok, err := c.smallReduce(ctx, simd.TypeOf[T](), bytesOf(send), bytesOf(recv), op, root); ok {
		return err
	}
	vec := len(send) // the vector's length: the same on every rank
	if send == nil {
		vec = len(recv) // in place, at the root
	}
	if err := c.placed(ctx, CollReduce, vec*simd.TypeOf[T]().Size()); err != nil {
		return err
	}
	a, err := c.startOp(ctx, CollReduce, simd.TypeOf[T](), op)
	if err != nil {
		return err
	}
	if err := c.checkRoot(root); err != nil {
		return err
	}
	s, r := bytesOf(send), bytesOf(recv)
	n := len(send)
	if c.rank == root {
		if s != nil && len(send) != len(recv) {
			return c.bad("len(send) = %d, len(recv) = %d at the root", len(send), len(recv))
		}
		if s, err = c.inPlace(s, r); err != nil {
			return err
		}
		n = len(recv)
	} else {
		if s == nil {
			return c.bad("send is nil on a rank other than the root")
		}
		r = nil
	}
	a.send, a.recv, a.count, a.root = s, r, n, root
	if c.size == 1 && s != nil {
		simd.Copy(r, s)
	}
	return c.pick(ctx, a, n*a.esz)
}

// Scatter sends block j (len(recv) elements) of send on rank root to recv
// on rank j. send is used only at the root (p blocks). recv nil at the root
// means in place: the root's own block stays in send.
func Scatter[T simd.Element](ctx context.Context, c *Comm, send, recv []T, root int) error {
	if err := c.await(ctx, CollScatter); err != nil {
		return err
	}
	return c.rootedBlocks(ctx, simd.TypeOf[T](), root, bytesOf(recv), bytesOf(send), false)
}

// rootedBlocks runs a scatter (gather false) or gather: part is this rank's
// block (scatter's recv, gather's send; nil at the root: in place), whole
// the root's p blocks, used only at the root, which copies its own here.
func (c *Comm) rootedBlocks(ctx context.Context, t simd.Type, root int, part, whole []byte, gather bool) error {
	coll, i, partName, wholeName := CollScatter, smallScatterIdx, "recv", "send"
	if gather {
		coll, i, partName, wholeName = CollGather, smallGatherIdx, "send", "recv"
	}
	if c.size > 1 && part != nil {
		if ok, err := c.smallRooted(ctx, i, t, part, whole, root, gather); ok {
			return err
		}
	}
	bytes := len(part) * c.size // the root's p blocks: the same on every rank
	if c.rank == root {
		bytes = len(whole)
	}
	if err := c.placed(ctx, coll, bytes); err != nil {
		return err
	}
	a, err := c.start(ctx, coll, t)
	if err != nil {
		return err
	}
	if err := c.checkRoot(root); err != nil {
		return err
	}
	esz := a.esz
	n := len(part) / esz
	if c.rank == root {
		if len(whole)/esz%c.size != 0 {
			return c.bad("len(%s) = %d at the root is not a multiple of %d ranks", wholeName, len(whole)/esz, c.size)
		}
		n = len(whole) / esz / c.size
		if part != nil && len(part)/esz != n {
			return c.bad("len(%s) = %d, want %d", partName, len(part)/esz, n)
		}
		own := whole[root*n*esz : (root+1)*n*esz]
		if overlaps(part, whole) && !(gather && same(part, own)) {
			return c.bad("send and receive buffers overlap")
		}
		if part != nil && gather {
			simd.Copy(own, part)
		} else if part != nil {
			simd.Copy(part, own)
		}
	} else {
		if gather && part == nil {
			return c.bad("send is nil on a rank other than the root")
		}
		whole = nil
	}
	if a.send, a.recv = whole, part; gather {
		a.send, a.recv = part, whole
	}
	a.count, a.root = n, root
	c.regular(a, n)
	return c.pick(ctx, a, n*c.size*a.esz)
}

// Gather collects send (n elements) of every rank into recv (p blocks of n)
// on rank root, block j from rank j. recv is used only at the root. send
// nil at the root means in place (its block is already in recv).
func Gather[T simd.Element](ctx context.Context, c *Comm, send, recv []T, root int) error {
	if err := c.await(ctx, CollGather); err != nil {
		return err
	}
	return c.rootedBlocks(ctx, simd.TypeOf[T](), root, bytesOf(send), bytesOf(recv), true)
}

// Scan computes the inclusive prefix reduction: recv on rank r = send_0 op
// ... op send_r, in rank order (correct for non-commutative operators).
// send nil means in place.
func Scan[T simd.Element](ctx context.Context, c *Comm, send, recv []T, op Op) error {
	return elementwise(ctx, c, CollScan, send, recv, op)
}

// Exscan computes the exclusive prefix reduction: recv on rank r = send_0
// op ... op send_{r-1} for r > 0; recv on rank 0 is left unchanged. send
// nil means in place.
func Exscan[T simd.Element](ctx context.Context, c *Comm, send, recv []T, op Op) error {
	return elementwise(ctx, c, CollExscan, send, recv, op)
}

// elementwise runs a reduction whose send and recv have the same length on
// every rank: allreduce, scan and exscan. With one rank the result is the
// input (allreduce, scan) or recv left unchanged (exscan).
func elementwise[T simd.Element](ctx context.Context, c *Comm, coll Collective, send, recv []T, op Op) error {
	a, err := c.startOp(ctx, coll, simd.TypeOf[T](), op)
	if err != nil {
		return err
	}
	s, r := bytesOf(send), simd.AsBytes(recv)
	if s != nil && len(s) != len(r) {
		return c.bad("len(send) = %d, len(recv) = %d", len(send), len(recv))
	}
	s, err = c.inPlace(s, r)
	if err != nil {
		return err
	}
	a.send, a.recv, a.count = s, r, len(recv)
	if c.size == 1 && s != nil && coll != CollExscan {
		simd.Copy(r, s)
	}
	return c.pick(ctx, a, len(r))
}

// Barrier returns on every rank only after every rank has called it.
func Barrier(ctx context.Context, c *Comm) error {
	if err := c.await(ctx, CollBarrier); err != nil {
		return err
	}
	c.prepareSend(true, 0)
	if ok, err := c.smallBarrier(ctx); ok {
		return err
	}
	a, err := c.start(ctx, CollBarrier, 0)
	if err != nil {
		return err
	}
	return c.pick(ctx, a, 0)
}

// Alltoall sends block j (len(send)/p elements) of send to rank j, which
// stores it as block r of recv. send nil means in place (recv holds the
// blocks to send).
func Alltoall[T simd.Element](ctx context.Context, c *Comm, send, recv []T) error {
	if err := c.await(ctx, CollAlltoall); err != nil {
		return err
	}
	if ok, err := c.smallAlltoall(ctx, simd.TypeOf[T](), bytesOf(send), simd.AsBytes(recv)); ok {
		return err
	}
	if err := c.placed(ctx, CollAlltoall, len(recv)*simd.TypeOf[T]().Size()); err != nil {
		return err
	}
	a, err := c.start(ctx, CollAlltoall, simd.TypeOf[T]())
	if err != nil {
		return err
	}
	s, r := bytesOf(send), simd.AsBytes(recv)
	if len(recv)%c.size != 0 {
		return c.bad("len(recv) = %d is not a multiple of %d ranks", len(recv), c.size)
	}
	if s != nil && len(s) != len(r) {
		return c.bad("len(send) = %d, len(recv) = %d", len(send), len(recv))
	}
	s, err = c.inPlace(s, r)
	if err != nil {
		return err
	}
	n := len(recv) / c.size
	a.send, a.recv, a.count = s, r, n
	if s == nil {
		// In place decides the algorithm (Single does not serve it), so
		// the descriptor carries it: ranks that differ fail with
		// ErrMismatch, never with a split choice.
		a.aux = alltoallInPlace
	}
	c.regular(a, n)
	a.rcounts, a.rdispls = a.counts, a.displs
	if c.size == 1 && s != nil {
		simd.Copy(r, s)
	}
	return c.pick(ctx, a, len(r))
}

// Alltoallv sends send[sdispls[j]:][:scounts[j]] to rank j, which stores it
// at recv[rdispls[r]:][:rcounts[r]]; scounts[j] on rank r must equal
// rcounts[r] on rank j. nil displacements mean packed in rank order.
func Alltoallv[T simd.Element](ctx context.Context, c *Comm, send []T, scounts, sdispls []int, recv []T, rcounts, rdispls []int) error {
	a, err := c.start(ctx, CollAlltoallv, simd.TypeOf[T]())
	if err != nil {
		return err
	}
	a.counts, a.displs, a.rcounts, a.rdispls = c.sc.counts, c.sc.displs, c.sc.rcounts, c.sc.rdispls
	if err := c.vlayout("send", len(send), scounts, sdispls, a.counts, a.displs); err != nil {
		return err
	}
	if err := c.vlayout("recv", len(recv), rcounts, rdispls, a.rcounts, a.rdispls); err != nil {
		return err
	}
	s, r := bytesOf(send), simd.AsBytes(recv)
	if overlaps(s, r) {
		return c.bad("send and receive buffers overlap")
	}
	a.send, a.recv = s, r
	if c.size == 1 {
		if a.counts[0] != a.rcounts[0] {
			return c.bad("sends %d elements to itself, receives %d", a.counts[0], a.rcounts[0])
		}
		simd.Copy(r[a.rdispls[0]*a.esz:(a.rdispls[0]+a.rcounts[0])*a.esz], s[a.displs[0]*a.esz:])
		return nil
	}
	// The bytes of an alltoallv differ per rank: decide does not use
	// them, and with 0 choose's remembered decision serves every size.
	// Each sender chooses for its own blocks (alltoallv.go).
	return c.pick(ctx, a, 0)
}

// vlayout checks that the blocks of counts at displs (nil: packed in rank
// order) lie in a buffer (what) of n elements, and copies them to cs, ds.
func (c *Comm) vlayout(what string, n int, counts, displs []int, cs, ds []int) error {
	if len(counts) != c.size || (displs != nil && len(displs) != c.size) {
		return c.bad("%s: %d counts and %d displacements for %d ranks", what, len(counts), len(displs), c.size)
	}
	off := 0
	for j, k := range counts {
		d := off
		if displs != nil {
			d = displs[j]
		}
		if k < 0 || d < 0 || d > n || k > n-d {
			return c.bad("%s: block %d of %d elements at %d exceeds %d elements", what, j, k, d, n)
		}
		cs[j], ds[j] = k, d
		off += k
	}
	return nil
}
