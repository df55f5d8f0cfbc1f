package collectives

import (
	"context"

	"github.com/shmcoll/shmcoll/simd"
)

// Bruck's concatenation allgather (the latency-optimized allgather of 001
// for any p), on read schedules (see schedule.go). Rank r's
// half holds the rotated buffer R, R[i] = block (r+i) mod p, R[0] its own.
// In round k, with s = 2^k, rank r copies R[0 .. min(s, p-s)) of rank
// (r+s) mod p, which are blocks r+s ..., into its own R[s ..]. After
// ceil(log2 p) rounds R holds all p blocks, and the rotation is undone on
// the copy out. p-1 blocks received.
//
// Allreduce (the bandwidth-optimized "ring" of 001 for odd p, any p):
// the segment is cut into p blocks; every rank copies its segment into W
// and posts phase 1, reduces block r of all p ranks' W in rank order with
// the k-way kernel into R[0] (buffer X) — the alltoall and local reduction
// in one pass — and the Bruck allgather runs on R: 1 + ceil(log2 p)
// rounds, 2(p-1) blocks received, p-1 reduced; correct for
// non-commutative operators.
//
// Slot reuse: a round writes R[s ..], above every range read so far, and
// its readers read R[0 .. s) (structure); W is written only before phase 1
// and R[0] only before phase 2.

func init() {
	register(CollAllgather, Bruck, onSchedule(Bruck, CollAllgather), true)
	register(CollAllgatherv, Bruck, onSchedule(Bruck, CollAllgather), true)
	register(CollAllreduce, Bruck, (*Comm).bruckAllreduce, true)
}

// bruckSchedule: the allgather rounds; with reduce, an empty round 0 comes
// first (the k-way reduction, done by the driver) and R is buffer X.
func bruckSchedule(p int, reduce bool) *schedule {
	b := newSchedBuilder(p, p, true)
	buf := bufW
	if reduce {
		buf = bufX
		b.endRound()
	}
	for s := 1; s < p; s *= 2 {
		n := min(s, p-s)
		for r := range p {
			b.read(r, (r+s)%p, buf, 0, n, buf, 0, buf, s, xCopy)
		}
		b.endRound()
	}
	return b.done(nil)
}

func (c *Comm) bruckAllreduce(ctx context.Context, a *call) error {
	esz, p, r := a.esz, c.size, c.rank
	s := c.sched(schedKey{alg: Bruck, coll: CollAllreduce})
	M := c.half / esz / 2
	in := a.input()
	return c.vectorSteps(ctx, a.count, M, func(e uint64, base, m int) error {
		h := c.slotHalf(r, e)
		simd.Copy(h[:m*esz], span(in, esz, base, base+m))
		c.post(e, 1)
		pre := c.sc.pre
		evenSplit(pre, p, m)
		for q := range p {
			if q != r {
				if err := c.wait(ctx, q, e, 1); err != nil {
					return err
				}
			}
			c.sc.srcs[q] = span(c.slotHalf(q, e), esz, pre[r], pre[r+1])
		}
		a.red.reduceK(span(h, esz, M, M+pre[r+1]-pre[r]), c.sc.srcs)
		c.last.add(Stats{Rounds: 1, Sent: uint64(p - 1), Received: uint64(p - 1), Reduced: uint64(p - 1)})
		c.full = true
		if err := c.runSchedule(ctx, a, s, e, nil, M, schedOut{}); err != nil {
			return err
		}
		for j := range p {
			c.sc.uoff[j] = base + pre[j]
		}
		c.eachRun(0, p, func(rot, user, n int) {
			simd.Copy(span(a.recv, esz, user, user+n), span(h, esz, M+rot, M+rot+n))
		})
		return nil
	})
}
