package collectives

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/shmcoll/shmcoll/simd"
)

// Nonblocking collectives. An I-call (IAllreduce, ...) queues the call on
// the communicator and returns a [Request] at once; the communicator's
// progress goroutine runs the queued calls one after the other, in the
// order they were made, each exactly as the blocking form runs it on the
// calling goroutine (the same code, checks, descriptors, algorithms and
// results). The goroutine starts at the first I-call and stops at Close;
// there is one per communicator, never one per call.
//
// A blocking call made while I-calls are outstanding first waits for them
// (await), so that the calls of a rank run in program order whichever form
// each takes. The goroutine that runs a queued call is recognised by the
// context the call gets (*progressCtx), so that its own entry into the
// blocking form does not wait for itself.

// Request is the handle of a nonblocking call. Its buffers (and count and
// displacement slices) belong to the call until Wait or Test reports that
// it completed: the caller must neither read nor write them before.
//
// The call runs on the communicator's progress goroutine while the caller
// goes on, which hides its copies and reductions only where a CPU is free
// to run them: the collectives move the data with the CPU, so where every
// CPU computes, the call takes its time from the computation and gains
// nothing over the blocking form but the time spent waiting for slower
// ranks (see the package documentation).
type Request struct {
	coll Collective
	run  func(ctx context.Context) error
	ctx  progressCtx
	done chan struct{}
	err  error
}

// Wait blocks until the call completes and returns its error: the error
// the blocking form returns (an [*Error] wrapping [ErrMismatch],
// [ErrPeerDead], [ErrAborted], the context's error, ...). Wait may be called
// more than once, and from any goroutine.
func (r *Request) Wait() error {
	<-r.done
	return r.err
}

// Test reports whether the call has completed, and its error if so,
// without blocking.
func (r *Request) Test() (bool, error) {
	select {
	case <-r.done:
		return true, r.err
	default:
		return false, nil
	}
}

// progressCtx is the context a queued call runs with: the I-call's own,
// marked as the progress goroutine's.
type progressCtx struct {
	context.Context
	p *progress
}

// progress is a communicator's queue of nonblocking calls and the state of
// the goroutine that runs them.
type progress struct {
	c *Comm
	// pending counts the calls queued or running. The goroutine lowers it
	// after a call's last access to the Comm, so a blocking call that loads
	// 0 may use the Comm.
	pending atomic.Int64

	mu    sync.Mutex
	wake  sync.Cond
	queue []*Request // queued, not started, in program order
	last  *Request   // the last call queued
	stop  bool
	exit  chan struct{} // closed when the goroutine has returned
}

// enqueue queues run as a nonblocking call of coll and returns its request;
// it starts the progress goroutine at the first call.
func (c *Comm) enqueue(ctx context.Context, coll Collective, run func(ctx context.Context) error) *Request {
	r := &Request{coll: coll, run: run, done: make(chan struct{})}
	if c.closed { // the progress goroutine, if any, has stopped
		r.err = &Error{Rank: c.rank, Coll: coll, Seq: c.seq, Err: ErrClosed}
		close(r.done)
		return r
	}
	p := c.prog.Load()
	if p == nil {
		p = &progress{c: c, exit: make(chan struct{})}
		p.wake.L = &p.mu
		c.prog.Store(p)
		c.nb = true // before the goroutine starts, which reads it in await
		go p.loop()
	}
	r.ctx = progressCtx{Context: ctx, p: p}
	p.pending.Add(1)
	p.mu.Lock()
	p.queue = append(p.queue, r)
	p.last = r
	p.wake.Signal()
	p.mu.Unlock()
	return r
}

// loop runs the queued calls in order until stop, then returns.
func (p *progress) loop() {
	defer close(p.exit)
	for {
		p.mu.Lock()
		for len(p.queue) == 0 && !p.stop {
			p.wake.Wait()
		}
		if p.stop {
			p.mu.Unlock()
			return
		}
		r := p.queue[0]
		p.queue[0] = nil
		p.queue = p.queue[1:]
		p.mu.Unlock()
		r.err = r.run(&r.ctx)
		if r.err == nil {
			// A call that returned early completes once its check is made,
			// so that Wait reports its mismatch.
			r.err = p.c.settle(&r.ctx)
		}
		r.run, r.ctx = nil, progressCtx{}
		p.pending.Add(-1)
		close(r.done)
	}
}

// await is the entry of every blocking call: it inlines and returns at
// once (two plain loads) on a communicator that never made a nonblocking
// call and has no early return to check, and otherwise (awaitOutstanding) waits
// until the outstanding nonblocking calls have completed.
// If ctx ends first, it aborts the communicator, so that the outstanding
// calls end too, and fails the call as a cancelled blocking call fails.
//
// It then makes the check that the rank's last call left out if it
// returned early (settle), which fails this call with that call's error.
//
// nb is tested first: once the communicator has made a nonblocking call the
// progress goroutine writes late (leave, settle), so late may be read only
// after awaitCalls has waited for that goroutine's calls.
func (c *Comm) await(ctx context.Context, coll Collective) error {
	if c.nb || c.late != 0 {
		return c.awaitOutstanding(ctx, coll)
	}
	return nil
}

// awaitOutstanding is await for a communicator with nonblocking calls or an early
// return to check, out of line so that await inlines.
func (c *Comm) awaitOutstanding(ctx context.Context, coll Collective) error {
	if c.prog.Load() != nil {
		if err := c.awaitCalls(ctx, coll); err != nil {
			return err
		}
	}
	if c.late != 0 {
		return c.settle(ctx)
	}
	return nil
}

func (c *Comm) awaitCalls(ctx context.Context, coll Collective) error {
	p := c.prog.Load()
	if p.pending.Load() == 0 {
		return nil
	}
	if pc, ok := ctx.(*progressCtx); ok && pc.p == p {
		return nil // the progress goroutine running a queued call
	}
	p.mu.Lock()
	last := p.last
	p.mu.Unlock()
	select {
	case <-last.done:
		return nil
	case <-ctx.Done():
	}
	cause := ctx.Err()
	c.ep.Abort(fmt.Errorf("rank %d: %v: %w while waiting for the rank's nonblocking calls", c.rank, coll, cause))
	<-last.done
	err := fmt.Errorf("%w (%w)", cause, c.ep.Err())
	return &Error{Rank: c.rank, Coll: coll, Seq: c.seq + 1, Err: err}
}

// stopProgress stops the progress goroutine (Close). Calls still
// outstanding abort the communicator, so that no rank waits for their
// counterparts here: the running one fails with ErrAborted, the queued ones
// with ErrClosed.
func (c *Comm) stopProgress() {
	p := c.prog.Load()
	if p == nil {
		return
	}
	p.mu.Lock()
	p.stop = true
	queued := p.queue
	p.queue = nil
	p.wake.Signal()
	p.mu.Unlock()
	if n := p.pending.Load(); n > 0 {
		c.ep.Abort(fmt.Errorf("rank %d closed the communicator with %d nonblocking calls outstanding", c.rank, n))
	}
	<-p.exit
	for i, r := range queued {
		r.err = &Error{Rank: c.rank, Coll: r.coll, Seq: c.seq + uint64(i) + 1, Err: ErrClosed}
		r.run = nil
		p.pending.Add(-1)
		close(r.done)
	}
}

// IAllreduce is the nonblocking [Allreduce]: it queues the call and
// returns at once; send and recv belong to the call until the [Request]
// completes.
func IAllreduce[T simd.Element](ctx context.Context, c *Comm, send, recv []T, op Op) *Request {
	return c.enqueue(ctx, CollAllreduce, func(ctx context.Context) error { return Allreduce(ctx, c, send, recv, op) })
}

// IReduceScatterBlock is the nonblocking [ReduceScatterBlock].
func IReduceScatterBlock[T simd.Element](ctx context.Context, c *Comm, send, recv []T, op Op) *Request {
	return c.enqueue(ctx, CollReduceScatterBlock, func(ctx context.Context) error { return ReduceScatterBlock(ctx, c, send, recv, op) })
}

// IReduceScatter is the nonblocking [ReduceScatter].
func IReduceScatter[T simd.Element](ctx context.Context, c *Comm, send, recv []T, counts []int, op Op) *Request {
	return c.enqueue(ctx, CollReduceScatter, func(ctx context.Context) error { return ReduceScatter(ctx, c, send, recv, counts, op) })
}

// IAllgather is the nonblocking [Allgather].
func IAllgather[T simd.Element](ctx context.Context, c *Comm, send, recv []T) *Request {
	return c.enqueue(ctx, CollAllgather, func(ctx context.Context) error { return Allgather(ctx, c, send, recv) })
}

// IAllgatherv is the nonblocking [Allgatherv].
func IAllgatherv[T simd.Element](ctx context.Context, c *Comm, send, recv []T, counts, displs []int) *Request {
	return c.enqueue(ctx, CollAllgatherv, func(ctx context.Context) error { return Allgatherv(ctx, c, send, recv, counts, displs) })
}

// IBcast is the nonblocking [Bcast].
func IBcast[T simd.Element](ctx context.Context, c *Comm, buf []T, root int) *Request {
	return c.enqueue(ctx, CollBcast, func(ctx context.Context) error { return Bcast(ctx, c, buf, root) })
}

// IReduce is the nonblocking [Reduce].
func IReduce[T simd.Element](ctx context.Context, c *Comm, send, recv []T, op Op, root int) *Request {
	return c.enqueue(ctx, CollReduce, func(ctx context.Context) error { return Reduce(ctx, c, send, recv, op, root) })
}

// IScatter is the nonblocking [Scatter].
func IScatter[T simd.Element](ctx context.Context, c *Comm, send, recv []T, root int) *Request {
	return c.enqueue(ctx, CollScatter, func(ctx context.Context) error { return Scatter(ctx, c, send, recv, root) })
}

// IGather is the nonblocking [Gather].
func IGather[T simd.Element](ctx context.Context, c *Comm, send, recv []T, root int) *Request {
	return c.enqueue(ctx, CollGather, func(ctx context.Context) error { return Gather(ctx, c, send, recv, root) })
}

// IScan is the nonblocking [Scan].
func IScan[T simd.Element](ctx context.Context, c *Comm, send, recv []T, op Op) *Request {
	return c.enqueue(ctx, CollScan, func(ctx context.Context) error { return Scan(ctx, c, send, recv, op) })
}

// IExscan is the nonblocking [Exscan].
func IExscan[T simd.Element](ctx context.Context, c *Comm, send, recv []T, op Op) *Request {
	return c.enqueue(ctx, CollExscan, func(ctx context.Context) error { return Exscan(ctx, c, send, recv, op) })
}

// IBarrier is the nonblocking [Barrier]: its request completes once every
// rank has called it.
func IBarrier(ctx context.Context, c *Comm) *Request {
	return c.enqueue(ctx, CollBarrier, func(ctx context.Context) error { return Barrier(ctx, c) })
}

// IAlltoall is the nonblocking [Alltoall].
func IAlltoall[T simd.Element](ctx context.Context, c *Comm, send, recv []T) *Request {
	return c.enqueue(ctx, CollAlltoall, func(ctx context.Context) error { return Alltoall(ctx, c, send, recv) })
}

// IAlltoallv is the nonblocking [Alltoallv].
func IAlltoallv[T simd.Element](ctx context.Context, c *Comm, send []T, scounts, sdispls []int, recv []T, rcounts, rdispls []int) *Request {
	return c.enqueue(ctx, CollAlltoallv, func(ctx context.Context) error {
		return Alltoallv(ctx, c, send, scounts, sdispls, recv, rcounts, rdispls)
	})
}

// IGatherv is the nonblocking [Gatherv].
func IGatherv[T simd.Element](ctx context.Context, c *Comm, send, recv []T, counts, displs []int, root int) *Request {
	return c.enqueue(ctx, collGatherv, func(ctx context.Context) error { return Gatherv(ctx, c, send, recv, counts, displs, root) })
}

// IScatterv is the nonblocking [Scatterv].
func IScatterv[T simd.Element](ctx context.Context, c *Comm, send, recv []T, counts, displs []int, root int) *Request {
	return c.enqueue(ctx, collScatterv, func(ctx context.Context) error { return Scatterv(ctx, c, send, recv, counts, displs, root) })
}
