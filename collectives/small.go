package collectives

import (
	"context"
	"encoding/binary"

	"github.com/shmcoll/shmcoll/simd"
)

// The small-call path: a barrier, and an allreduce whose vector travels in
// the counter's line (tinyBytes), where choose picks the flat barrier and
// the replicated allreduce (for every size up to tinyBytes). They run the
// step of flatBarrier and replicatedAllreduce with the same descriptor,
// posts, waits, checks and counts, in one function each, without the
// layers of the general path (start, bindOp, pick, choose, run, begin,
// end, finish).
//
// What it saves is memory, not instructions. When ranks outnumber the
// CPUs, every wait is a context switch, and a rank that gets its CPU back
// finds its code and data evicted by the ranks that ran meanwhile: every
// cache line and page a call touches then costs a refill (np=8 on 2 CPUs,
// a loop that touched 64 more lines after each yield took 0.40 µs longer
// per barrier and allreduce, 64 more pages 0.78 µs). The general path
// touched about 290 lines of code and 140 of data in 45 and 50 pages per
// barrier and allreduce of 8 B; a loop of shm posts and waits with the
// same protocol took 5.0 against 6.6 µs.
//
// Anything else (a closed or aborted endpoint, a step that is not known
// synchronized, a user operator, an argument error, a size or pin that
// choose has not seen) takes the general path, which reports it.

// smallOK reports whether the small-call path may run coll (small[i]):
// choose picks alg for it at every size the path takes, and every rank has
// begun this rank's last step.
func (c *Comm) smallOK(i int, coll Collective, alg Algorithm) bool {
	m := &c.small[i]
	if !m.known || m.pin != c.pinned[coll] {
		c.learnSmall(m, coll, alg)
	}
	return m.ok && c.synced == c.step && !c.closed && c.ep.Ok()
}

// smallMemo remembers whether choose picks the small-call path's
// algorithm at every size the path takes, for the pin it was worked out
// with (tests change pins).
type smallMemo struct {
	known, ok bool
	pin       Algorithm
}

// The small-call paths (Comm.small).
const (
	smallAllreduceIdx = iota
	smallBarrierIdx
	numSmall
)

func (c *Comm) learnSmall(m *smallMemo, coll Collective, alg Algorithm) {
	*m = smallMemo{known: true, ok: true, pin: c.pinned[coll]}
	hi := 0
	if coll == CollAllreduce {
		hi = tinyBytes
	}
	for b := min(hi, 1); b <= hi; b++ {
		if a, err := c.chooseNew(coll, b, true); err != nil || a != alg {
			m.ok = false
		}
	}
}

// smallCall begins a small call of coll: it counts the call and its step,
// sets the fields the descriptor covers, writes the descriptor of step e
// and asks for the counter's line (begin's work).
func (c *Comm) smallCall(coll Collective, alg Algorithm, t simd.Type, count int, red reducer, opID uint64) uint64 {
	c.seq++
	c.total.add(c.last)
	p := uint64(c.size - 1)
	c.last = Stats{Calls: 1, Steps: 1, Rounds: 1}
	if coll == CollAllreduce {
		c.last.Sent, c.last.Received, c.last.Reduced = p, p, p
	}
	a := &c.cur
	a.coll, a.alg, a.typ, a.esz, a.count, a.root, a.red, a.opID, a.aux = coll, alg, t, t.Size(), count, 0, red, opID, 0
	a.send, a.recv = nil, nil
	a.fully = true
	e := c.step + 1
	c.step = e
	c.writeDesc(e)
	c.ep.Prepare(ctr(e))
	return e
}

// smallWait waits for peer q's phase 1 of step e and compares its
// descriptor hash (checkDesc names a mismatch).
func (c *Comm) smallWait(ctx context.Context, q int, e uint64) error {
	if err := c.ep.WaitData(ctx, q, ctr(e), stepVal(e, 1), nil); err != nil {
		return c.fail(err)
	}
	if binary.LittleEndian.Uint64(c.ep.Inline(q, ctr(e))) != c.dhash {
		return c.checkDesc(q, e)
	}
	return nil
}

// smallBarrier is flatBarrier on the small-call path; ok is false when it
// does not apply.
func (c *Comm) smallBarrier(ctx context.Context) (ok bool, err error) {
	if !c.smallOK(smallBarrierIdx, CollBarrier, Flat) {
		return false, nil
	}
	if err := ctxDone(ctx); err != nil {
		return false, nil // the general path fails the call
	}
	e := c.smallCall(CollBarrier, Flat, 0, 0, reducer{}, 0)
	c.post(e, 1)
	for i := 1; i < c.size; i++ {
		q := c.rank + i
		if q >= c.size {
			q -= c.size
		}
		if err := c.smallWait(ctx, q, e); err != nil {
			return true, err
		}
	}
	c.synced = e // every rank's step-e data was read: every rank has begun it
	return true, nil
}

// smallAllreduce is replicatedAllreduce on the small-call path for a
// vector of 1 to tinyBytes bytes and the built-in operator of the last
// bindOp; ok is false when it does not apply. send is nil or as long as
// recv.
func (c *Comm) smallAllreduce(ctx context.Context, t simd.Type, send, recv []byte, op Op) (ok bool, err error) {
	n := len(recv)
	if n == 0 || n > tinyBytes || op.hash != c.kernOp || t != c.kernType || op.user != nil || !c.smallOK(smallAllreduceIdx, CollAllreduce, Replicated) {
		return false, nil
	}
	in := send
	if in == nil || same(in, recv) {
		in, send = recv, nil
	} else if overlaps(in, recv) {
		return false, nil
	}
	if ctxDone(ctx) != nil {
		return false, nil
	}
	k := c.kern
	e := c.smallCall(CollAllreduce, Replicated, t, n/t.Size(), reducer{k: k, comm: true}, op.hash)
	c.cur.send, c.cur.recv = send, recv
	copy(c.tiny(c.rank, e), in)
	c.post(e, 1)
	srcs := c.sc.srcs
	for q := range c.size {
		if q != c.rank {
			if err := c.smallWait(ctx, q, e); err != nil {
				return true, err
			}
		}
		srcs[q] = c.tiny(q, e)[:n]
	}
	k.ReduceK(recv, srcs)
	c.synced = e // every rank's step-e data was read: every rank has begun it
	return true, nil
}
