package collectives

import (
	"fmt"
	"testing"
)

// BenchmarkOverlap: each rank computes (a fixed loop over a private
// vector) and allreduces a vector of bytes, either one after the other
// (mode=blocking) or with the allreduce started before the computation and
// waited for after it (mode=nonblocking). Where a CPU is free for each
// rank's progress goroutine (ranks × 2 ≤ CPUs) the nonblocking form can
// hide the shorter of the two times; where every CPU computes, the
// allreduce's copies and reductions take the computation's CPU time, and
// only the ranks' waits for one another are hidden. Compare runs with
// GOMAXPROCS (or -cpu) at and below twice the ranks.
func BenchmarkOverlap(b *testing.B) {
	for _, p := range []int{2, 4} {
		for _, bytes := range []int{65536, 1 << 20} {
			for _, mode := range []string{"blocking", "nonblocking"} {
				b.Run(fmt.Sprintf("mode=%s/bytes=%d/ranks=%d", mode, bytes, p), func(b *testing.B) {
					n := bytes / 4
					type rankBufs struct{ grad, work []float32 }
					bufs := make([]rankBufs, p)
					for r := range bufs {
						bufs[r] = rankBufs{make([]float32, n), make([]float32, 1<<14)}
					}
					benchComms(b, localComms(b, p, Options{}), bytes, func(c *Comm) error {
						rb := bufs[c.Rank()]
						if mode == "blocking" {
							compute(rb.work)
							return Allreduce(bg, c, nil, rb.grad, Sum)
						}
						req := IAllreduce(bg, c, nil, rb.grad, Sum)
						compute(rb.work)
						return req.Wait()
					})
				})
			}
		}
	}
}

// compute stands for the work between two communications: a few passes of
// multiply-adds over w, which stays in the L1 cache.
func compute(w []float32) {
	for range 8 {
		for i := range w {
			w[i] = w[i]*0.999 + 0.5
		}
	}
}
