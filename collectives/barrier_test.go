package collectives

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
)

// rootFirst pins the barrier to ReduceBcast, as libshmcoll does under MPICH.
var rootFirst = Options{Algorithms: map[Collective]Algorithm{CollBarrier: ReduceBcast}}

// TestRootFirstBarrier: the barrier pinned to ReduceBcast lets nobody leave
// before every rank has arrived, on the small-call path (after a full call)
// and the general one (after a bcast whose root returned early), and
// counts the two handoffs it makes as rounds.
func TestRootFirstBarrier(t *testing.T) {
	for _, p := range []int{2, 3, 5} {
		t.Run(fmt.Sprintf("p=%d", p), func(t *testing.T) {
			var arrived atomic.Int64
			err := Run(p, rootFirst, func(c *Comm) error {
				buf := make([]int64, 4)
				for i := range 300 {
					if (i+c.Rank())%3 == 0 {
						runtime.Gosched()
					}
					if i%10 == 0 {
						// A root that returns early leaves the next barrier
						// to the general path.
						if err := Bcast(bg, c, buf, i%p); err != nil {
							return err
						}
					}
					arrived.Add(1)
					if err := Barrier(bg, c); err != nil {
						return err
					}
					if got, want := arrived.Load(), int64(p*(i+1)); got < want {
						return fmt.Errorf("rank %d left barrier %d after %d of %d arrivals", c.Rank(), i, got, want)
					}
					if a := c.LastAlgorithm(); a != ReduceBcast {
						return fmt.Errorf("barrier %d ran %v, want %v", i, a, ReduceBcast)
					}
					if last, _ := c.Stats(); last.Rounds != 2 {
						return fmt.Errorf("barrier %d: %d rounds, want 2", i, last.Rounds)
					}
				}
				if m := c.small[smallBarrierRootIdx]; !m.known || m.upTo != 0 {
					return fmt.Errorf("the root-first barrier did not take the small-call path (%+v)", m)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRootFirstBarrierMismatch: a rank that calls another collective where
// the others call the root-first barrier fails them all with ErrMismatch,
// whether the odd rank is rank 0 (which reads every rank) or another.
func TestRootFirstBarrierMismatch(t *testing.T) {
	for _, odd := range []int{0, 2} {
		t.Run(fmt.Sprintf("odd=%d", odd), func(t *testing.T) {
			errs := runAll(t, 3, rootFirst, func(c *Comm) error {
				if err := Barrier(bg, c); err != nil {
					return err
				}
				var err error
				if c.Rank() == odd {
					err = Allreduce(bg, c, nil, make([]int64, 2), Sum)
				} else {
					err = Barrier(bg, c)
				}
				if err2 := Barrier(bg, c); !errors.Is(err2, ErrAborted) {
					return fmt.Errorf("barrier after the mismatch: %v", err2)
				} else if err == nil {
					return err2
				}
				return err
			})
			sameAbort(t, "root-first barrier", errs, ErrMismatch)
		})
	}
}
