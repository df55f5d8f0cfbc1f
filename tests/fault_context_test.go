package tests

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/shmcoll/shmcoll/collectives"
)

// TestFaultCancelledContextLastRank: a rank whose context is already
// cancelled calls last, when every peer's data is posted. The package
// documentation says cancelling a call's context aborts the communicator,
// and docs/DESIGN.md that a cancelled context on any rank aborts the call on
// every rank; so this call must fail on every rank (and later calls return
// ErrAborted), whatever the algorithm.
func TestFaultCancelledContextLastRank(t *testing.T) {
	for _, alg := range []collectives.Algorithm{collectives.Flat, collectives.Circulant, collectives.Replicated} {
		opt := collectives.Options{Algorithms: map[collectives.Collective]collectives.Algorithm{collectives.CollAllreduce: alg}}
		cs, err := collectives.NewLocal(2, opt)
		if err != nil {
			t.Fatal(err)
		}
		cancelled, cancel := context.WithCancel(bg)
		cancel()
		errs := make([]error, 2)
		later := make([]error, 2)
		var wg sync.WaitGroup
		for r, c := range cs {
			wg.Go(func() {
				ctx := bg
				if r == 0 {
					time.Sleep(100 * time.Millisecond) // rank 1 has posted and waits
					ctx = cancelled
				}
				errs[r] = collectives.Allreduce(ctx, c, []int64{1, 2, 3}, make([]int64, 3), collectives.Sum)
				later[r] = collectives.Barrier(bg, c)
			})
		}
		wg.Wait()
		for r := range cs {
			if !errors.Is(errs[r], collectives.ErrAborted) || !errors.Is(later[r], collectives.ErrAborted) {
				t.Errorf("%v: rank %d: call %v, later call %v; want both to wrap ErrAborted (rank 0's context was cancelled)", alg, r, errs[r], later[r])
			}
			cs[r].Close()
		}
	}
}
