package collectives

import "context"

// Bruck's concatenation allgather (the latency-optimized allgather of 001
// for any p), on read schedules (see rabenseifner_schedule.go). Rank r's
// half holds the rotated buffer R, R[i] = block (r+i) mod p, R[0] its own.
// In round k, with s = 2^k, rank r copies R[0 .. min(s, p-s)) of rank
// (r+s) mod p, which are blocks r+s ..., into its own R[s ..]. After
// ceil(log2 p) rounds R holds all p blocks, and the rotation is undone on
// the copy out. p-1 blocks received.
//
// Slot reuse: a round writes R[s ..], above every range read so far, and
// its readers read R[0 .. s) (structure).

func init() {
	register(CollAllgather, Bruck, (*Comm).bruckAllgather, true)
	register(CollAllgatherv, Bruck, (*Comm).bruckAllgather, true)
}

func bruckSchedule(p int) *schedule {
	b := newSchedBuilder(p, p, true)
	for s := 1; s < p; s *= 2 {
		n := min(s, p-s)
		for r := range p {
			b.read(r, (r+s)%p, bufW, 0, n, bufW, 0, bufW, s, xCopy)
		}
		b.endRound()
	}
	return b.done(nil)
}

func (c *Comm) bruckAllgather(ctx context.Context) error {
	p := c.size
	s := cachedSchedule(schedKey{alg: Bruck, p: p}, func() *schedule { return bruckSchedule(p) })
	return c.schedAllgather(ctx, s)
}
