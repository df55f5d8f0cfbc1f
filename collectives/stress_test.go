package collectives

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
)

// stressCalls makes n random collective calls on c, the same sequence on
// every rank (seeded), each with a random algorithm of this package, count
// and root, and checks every result exactly. Rooted and unrooted calls,
// one-segment and many-segment calls alternate, so that slot halves are
// reused in every combination of algorithms.
func stressCalls(c *Comm, seed uint64, n int) error {
	rng := rand.New(rand.NewPCG(seed, 7))
	p, r := c.Size(), c.Rank()
	algs := []Algorithm{Flat, Circulant, Replicated}
	colls := []Collective{CollAllreduce, CollReduceScatterBlock, CollAllgather, CollBcast, CollReduce, CollAlltoall, CollScan, CollBarrier}
	for call := range n {
		coll := colls[rng.IntN(len(colls))]
		alg := algs[rng.IntN(len(algs))]
		if algorithms[coll][alg] == nil {
			alg = Flat
		}
		setPin(c, coll, alg)
		cnt := rng.IntN(4)
		switch cnt {
		case 0:
			cnt = rng.IntN(3)
		case 1:
			cnt = rng.IntN(50)
		default:
			cnt = rng.IntN(3000)
		}
		root := rng.IntN(p)
		tag := 1000 * call
		what := fmt.Sprintf("call %d %v %v n=%d root=%d rank %d", call, coll, alg, cnt, root, r)
		fail := func(got, want []int32) error {
			if i, ok := equal(got, want); !ok {
				return fmt.Errorf("%s: element %d differs: got %v, want %v", what, i, got[i], want[i])
			}
			return nil
		}
		v := func(q, n int) []int32 { return vec(q+tag, n) }
		sum := func(ranks, n int) []int32 {
			out := make([]int32, n)
			for q := range ranks {
				for i, x := range v(q, n) {
					out[i] += x
				}
			}
			return out
		}
		var err error
		switch coll {
		case CollAllreduce:
			got := make([]int32, cnt)
			if err = Allreduce(bg, c, v(r, cnt), got, Sum); err == nil {
				err = fail(got, sum(p, cnt))
			}
		case CollReduceScatterBlock:
			got := make([]int32, cnt)
			if err = ReduceScatterBlock(bg, c, v(r, p*cnt), got, Sum); err == nil {
				err = fail(got, sum(p, p*cnt)[r*cnt:(r+1)*cnt])
			}
		case CollAllgather:
			got := make([]int32, p*cnt)
			if err = Allgather(bg, c, v(r, cnt), got); err == nil {
				for q := range p {
					if err = fail(got[q*cnt:(q+1)*cnt], v(q, cnt)); err != nil {
						break
					}
				}
			}
		case CollBcast:
			got := make([]int32, cnt)
			if r == root {
				copy(got, v(root, cnt))
			}
			if err = Bcast(bg, c, got, root); err == nil {
				err = fail(got, v(root, cnt))
			}
		case CollReduce:
			var got []int32
			if r == root {
				got = make([]int32, cnt)
			}
			if err = Reduce(bg, c, v(r, cnt), got, Sum, root); err == nil && r == root {
				err = fail(got, sum(p, cnt))
			}
		case CollAlltoall:
			send := make([]int32, 0, p*cnt)
			for q := range p {
				send = append(send, v(r*p+q, cnt)...)
			}
			got := make([]int32, p*cnt)
			if err = Alltoall(bg, c, send, got); err == nil {
				for q := range p {
					if err = fail(got[q*cnt:(q+1)*cnt], v(q*p+r, cnt)); err != nil {
						break
					}
				}
			}
		case CollScan:
			got := make([]int32, cnt)
			if err = Scan(bg, c, v(r, cnt), got, Sum); err == nil {
				err = fail(got, sum(r+1, cnt))
			}
		case CollBarrier:
			err = Barrier(bg, c)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// TestStress runs random call sequences among in-process ranks.
func TestStress(t *testing.T) {
	calls := 150
	if long {
		calls = 2000
	}
	if testing.Short() {
		calls = 60
	}
	for _, p := range []int{2, 3, 5, 8} {
		err := Run(p, Options{SlotBytes: 4096}, func(c *Comm) error { return stressCalls(c, uint64(p), calls) })
		if err != nil {
			t.Fatalf("p=%d: %v", p, err)
		}
	}
}

// TestStressProcesses runs random call sequences among real processes
// (see TestProcesses), where the race detector cannot see the arena.
func TestStressProcesses(t *testing.T) {
	if os.Getenv("SHMCOLL_TEST_STRESS") != "" {
		return
	}
	calls := "300"
	if long {
		calls = "3000"
	}
	for _, p := range []int{2, 4} {
		runChildren(t, p, "stress", "SHMCOLL_TEST_STRESS="+calls)
	}
}
