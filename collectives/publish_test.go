package collectives

import (
	"context"
	"fmt"
	"testing"

	"github.com/shmcoll/shmcoll/internal/clock"
)

// TestPublishAdvice: the store advice of one rank reaches every writer
// (advisedNT), a rank under advice does not time its copies, a slow copy
// seen twice in a row advises non-temporal stores for ntCalls calls, and
// the pipelined bcast, reduce and allgather give exact results with
// non-temporal stores as with regular ones.
func TestPublishAdvice(t *testing.T) {
	const p, n = 2, 300_000 // 2.4 MB of float64: several segments
	cs := localComms(t, p, Options{})
	check := func(advised bool) {
		t.Helper()
		err := runComms(cs, func(c *Comm) error {
			buf := make([]float64, n)
			out := make([]float64, n)
			for i := range buf {
				buf[i] = float64(i%1000 + c.Rank())
			}
			if err := Bcast(context.Background(), c, buf, 0); err != nil {
				return err
			}
			for i, v := range buf {
				if v != float64(i%1000) {
					t.Errorf("advised %v: bcast element %d = %v", advised, i, v)
					return nil
				}
			}
			// Without forced advice a slow spell of the machine may
			// advise too: only the forced case is certain.
			if advised && !c.advisedNT() {
				t.Errorf("rank %d: not advised", c.Rank())
			}
			if err := Reduce(context.Background(), c, buf, out, Sum, 1); err != nil {
				return err
			}
			if c.Rank() == 1 {
				for i, v := range out {
					if v != 2*float64(i%1000) {
						t.Errorf("advised %v: reduce element %d = %v", advised, i, v)
						return nil
					}
				}
			}
			all := make([]float64, p*n)
			if err := Allgather(context.Background(), c, buf, all); err != nil {
				return err
			}
			for i, v := range all {
				if v != float64(i%n%1000) {
					t.Errorf("advised %v: allgather element %d = %v", advised, i, v)
					return nil
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	check(false)
	// Rank 1 advises non-temporal stores for the next 64 calls: every
	// writer follows, and nobody times copies meanwhile.
	cs[1].advice(1).Store(cs[1].seq + 1000)
	if cs[0].copyStart(1<<20) != 0 {
		t.Error("a rank under advice times its copies")
	}
	check(true)
	cs[0].advice(0).Store(0)
	cs[1].advice(1).Store(0)
	cs[0].slow = [2]int{}
	// Two slow copies in a row (a zero start time is "not timed", so use
	// a start long ago) advise; a fast one in between resets the count.
	c := cs[0]
	c.copyDone(observeBytes, 1)
	if c.advisedNT() {
		t.Fatal("one slow copy advised")
	}
	c.copyDone(observeBytes, clock.Nanotime())
	c.copyDone(observeBytes, 1)
	if c.advisedNT() {
		t.Fatal("a fast copy did not reset the count")
	}
	c.copyDone(observeBytes, 1)
	if !c.advisedNT() || c.advice(0).Load() != c.seq+ntCalls {
		t.Fatalf("two slow copies in a row: advice %d at call %d", c.advice(0).Load(), c.seq)
	}
	// Reads and writes are counted apart: a fast write between two slow
	// reads does not reset the reads' count.
	c.advice(0).Store(0)
	c.copyDone(observeBytes, 1)
	c.judge(&c.slow[1], observeBytes, clock.Nanotime(), slowRead)
	c.copyDone(observeBytes, 1)
	if !c.advisedNT() {
		t.Fatal("a fast write reset the count of slow reads")
	}
}

// localComms returns p in-process communicators, closed when t ends.
func localComms(t testing.TB, p int, opt Options) []*Comm {
	t.Helper()
	cs, err := NewLocal(p, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range cs {
			c.Close()
		}
	})
	return cs
}

// runComms runs f on every rank of cs at once and returns the first error.
func runComms(cs []*Comm, f func(c *Comm) error) error {
	errs := make(chan error, len(cs))
	for _, c := range cs {
		go func() { errs <- f(c) }()
	}
	var first error
	for range cs {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// TestSmallAllreduceAdvice: a replicated allreduce of 2 KiB to 16 KiB gives
// exact results with non-temporal copy-in (under advice) as without; it
// counts toward a sample at every call without advice and at none under
// advice; samples come once in sampleSmallEvery whatever the call numbers,
// and two slow ones advise for ntSmallCalls calls.
func TestSmallAllreduceAdvice(t *testing.T) {
	const p = 2
	cs := localComms(t, p, Options{})
	run := func(advised bool) {
		t.Helper()
		before := cs[1].samples
		err := runComms(cs, func(c *Comm) error {
			for _, n := range []int{256, 512, 1000, 2000} { // 2 KiB to 16 KiB
				in := make([]float64, n)
				for i := range in {
					in[i] = float64(i%777 + 3*c.Rank())
				}
				out := make([]float64, n)
				for range 3 {
					if err := Barrier(context.Background(), c); err != nil {
						return err
					}
					if err := Allreduce(context.Background(), c, in, out, Sum); err != nil {
						return err
					}
					for i, v := range out {
						if v != float64(2*(i%777)+3) {
							t.Errorf("advised %v, n %d: element %d = %v", advised, n, i, v)
							return nil
						}
					}
					if advised && !c.advisedNT() {
						t.Errorf("rank %d: not advised", c.Rank())
					}
				}
				if c.LastAlgorithm() != Replicated {
					t.Errorf("n %d: %v, want replicated", n, c.LastAlgorithm())
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// Rank 1 takes no advice of its own here: 12 calls, each counted
		// unless advised (c.samples is rank 1's alone).
		want := before + 12
		if advised {
			want = before
		}
		if cs[1].samples != want {
			t.Errorf("advised %v: sample count %d -> %d, want %d", advised, before, cs[1].samples, want)
		}
	}
	run(false)
	cs[0].advice(0).Store(cs[0].seq + 1000)
	run(true)
	cs[0].advice(0).Store(0)

	c := cs[0]
	c.slow = [2]int{}
	hits := 0
	for range 4 * sampleSmallEvery {
		if c.sample(sampleSmallEvery) {
			hits++
		}
	}
	if hits != 4 {
		t.Errorf("%d samples in %d calls, want 4", hits, 4*sampleSmallEvery)
	}
	c.judgeFor(&c.slow[0], ntSmall, 1, slowReduce, ntSmallCalls)
	c.judgeFor(&c.slow[0], ntSmall, 1, slowReduce, ntSmallCalls)
	if got := c.advice(0).Load(); got != c.seq+ntSmallCalls {
		t.Errorf("two slow samples: advice %d at call %d, want %d", got, c.seq, c.seq+ntSmallCalls)
	}
}

// TestPipeQuarters checks pipeElems' segments where the ranks have CPUs of
// their own (in-process ranks count so): vectors above pipeFitBytes run in
// four steps in the flat bcast and the replicated reduce and allreduce,
// smaller ones in one, and the results are exact either way.
func TestPipeQuarters(t *testing.T) {
	opt := Options{Algorithms: map[Collective]Algorithm{CollBcast: Flat, CollReduce: Replicated, CollAllreduce: Replicated}}
	for _, p := range []int{2, 3} {
		err := Run(p, opt, func(c *Comm) error {
			r := c.Rank()
			for _, n := range []int{pipeFitBytes / 4, pipeFitBytes/4 + 16, 16 << 10, 48 << 10} { // int32s
				steps := uint64(1)
				if 4*n > pipeFitBytes {
					steps = 4
				}
				what := fmt.Sprintf("p=%d n=%d rank %d", p, n, r)
				check := func(coll string) {
					if last, _ := c.Stats(); last.Steps != steps {
						t.Errorf("%s %s: %d steps, want %d", what, coll, last.Steps, steps)
					}
				}
				buf := vec(p-1, n)
				if r != p-1 {
					buf = make([]int32, n)
				}
				if err := Bcast(bg, c, buf, p-1); err != nil {
					return err
				}
				expect(t, what+" bcast", buf, vec(p-1, n))
				check("bcast")
				recv := make([]int32, n)
				if err := Reduce(bg, c, vec(r, n), recv, Sum, 0); err != nil {
					return err
				}
				if r == 0 {
					expect(t, what+" reduce", recv, sumAll(p, n))
				}
				check("reduce")
				if err := Allreduce(bg, c, vec(r, n), recv, Sum); err != nil {
					return err
				}
				expect(t, what+" allreduce", recv, sumAll(p, n))
				check("allreduce")
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
