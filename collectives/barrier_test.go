package collectives

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/shmcoll/shmcoll/shm"
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

// TestRootFirstWhereOversubscribed: auto takes the root-first barrier where
// process ranks outnumber the CPUs (the table's override for p = 3, 4 and
// 8, the heuristic for the rest) and the symmetric one where they do not.
func TestRootFirstWhereOversubscribed(t *testing.T) {
	for _, p := range []int{2, 3, 4, 5, 8, 16} {
		for _, over := range []bool{false, true} {
			alg, why, err := Select(Call{Coll: CollBarrier, P: p, Oversubscribed: over}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if (alg == ReduceBcast) != over {
				t.Errorf("p=%d oversubscribed=%v: barrier %v (%s)", p, over, alg, why)
			}
		}
	}
	if os.Getenv(shm.EnvArena) != "" {
		return // in a child
	}
	p := runtime.NumCPU() + 1
	if p > 9 {
		t.Skipf("%d CPUs: the process part oversubscribes up to 8", p-1)
	}
	runRanks(t, "TestRootFirstOversubscribedChild", p, func(int) []string { return nil })
}

// TestRootFirstOversubscribedChild is one rank of
// TestRootFirstWhereOversubscribed: its barriers run root first on the
// small-call path, and a bcast from rank 0 after each delivers.
func TestRootFirstOversubscribedChild(t *testing.T) {
	if os.Getenv(shm.EnvArena) == "" {
		t.Skip("run by TestRootFirstWhereOversubscribed")
	}
	c, err := JoinEnv(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.Oversubscribed() {
		t.Fatalf("%d ranks on %d CPUs: not oversubscribed", c.Size(), runtime.NumCPU())
	}
	buf := make([]int64, 1)
	for i := range 200 {
		if err := Barrier(bg, c); err != nil {
			t.Fatal(err)
		}
		if a := c.LastAlgorithm(); a != ReduceBcast {
			t.Fatalf("barrier %d ran %v, want %v", i, a, ReduceBcast)
		}
		buf[0] = -1
		if c.Rank() == 0 {
			buf[0] = int64(i)
		}
		if err := Bcast(bg, c, buf, 0); err != nil {
			t.Fatal(err)
		}
		if buf[0] != int64(i) {
			t.Fatalf("bcast %d after the barrier: %d", i, buf[0])
		}
	}
	if m := c.small[smallBarrierRootIdx]; !m.known || m.upTo != 0 {
		t.Fatalf("the root-first barrier did not take the small-call path (%+v)", m)
	}
}
