package collectives

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/shmcoll/shmcoll/internal/clock"
)

// TestPublishAdvice: the store advice of one rank reaches every writer
// (advised), a rank under advice does not time its copies, a slow copy
// seen twice in a row advises non-temporal stores for adviceCalls calls, and
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
			if advised && !c.adv.advised() {
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
	cs[1].adv.ep.Hint(1).Store(cs[1].seq + 1000)
	if cs[0].adv.readStart(1<<20) != 0 {
		t.Error("a rank under advice times its copies")
	}
	check(true)
	cs[0].adv.ep.Hint(0).Store(0)
	cs[1].adv.ep.Hint(1).Store(0)
	cs[0].adv.resetSlow()
	// Two slow copies in a row (a zero start time is "not timed", so use
	// a start long ago) advise; a fast one in between resets the count.
	c := cs[0]
	c.adv.copyDone(timedFromBytes, 1)
	if c.adv.advised() {
		t.Fatal("one slow copy advised")
	}
	c.adv.copyDone(timedFromBytes, clock.Nanotime())
	c.adv.copyDone(timedFromBytes, 1)
	if c.adv.advised() {
		t.Fatal("a fast copy did not reset the count")
	}
	c.adv.copyDone(timedFromBytes, 1)
	if !c.adv.advised() || c.adv.ep.Hint(0).Load() != c.seq+adviceCalls {
		t.Fatalf("two slow copies in a row: advice %d at call %d", c.adv.ep.Hint(0).Load(), c.seq)
	}
	// Reads and writes are counted apart: a fast write between two slow
	// reads does not reset the reads' count.
	c.adv.ep.Hint(0).Store(0)
	c.adv.copyDone(timedFromBytes, 1)
	c.adv.judge(&c.adv.slowWrites, timedFromBytes, clock.Nanotime(), slowCopyRate, adviceCalls)
	c.adv.copyDone(timedFromBytes, 1)
	if !c.adv.advised() {
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
// advice; samples come once in sampleReduceEvery whatever the call numbers,
// and two slow ones advise for sampledAdviceCalls calls.
func TestSmallAllreduceAdvice(t *testing.T) {
	const p = 2
	cs := localComms(t, p, Options{})
	run := func(advised bool) {
		t.Helper()
		before := cs[1].adv.samples
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
					if advised && !c.adv.advised() {
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
		// unless advised (c.adv.samples is rank 1's alone).
		want := before + 12
		if advised {
			want = before
		}
		if cs[1].adv.samples != want {
			t.Errorf("advised %v: sample count %d -> %d, want %d", advised, before, cs[1].adv.samples, want)
		}
	}
	run(false)
	cs[0].adv.ep.Hint(0).Store(cs[0].seq + 1000)
	run(true)
	cs[0].adv.ep.Hint(0).Store(0)

	c := cs[0]
	c.adv.resetSlow()
	hits := 0
	for range 4 * sampleReduceEvery {
		if c.adv.sample(sampleReduceEvery) {
			hits++
		}
	}
	if hits != 4 {
		t.Errorf("%d samples in %d calls, want 4", hits, 4*sampleReduceEvery)
	}
	c.adv.judge(&c.adv.slowReads, sampledReduceMin, 1, slowReduceRate, sampledAdviceCalls)
	c.adv.judge(&c.adv.slowReads, sampledReduceMin, 1, slowReduceRate, sampledAdviceCalls)
	if got := c.adv.ep.Hint(0).Load(); got != c.seq+sampledAdviceCalls {
		t.Errorf("two slow samples: advice %d at call %d, want %d", got, c.seq, c.seq+sampledAdviceCalls)
	}
}

// TestPipeQuarters checks pipeElems' segments where the ranks have CPUs of
// their own (in-process ranks count so): vectors above pipeFitBytes run in
// four steps in the flat bcast and the replicated reduce, smaller ones in
// one; the replicated allreduce keeps them whole up to pipelineBytes. The
// results are exact either way.
func TestPipeQuarters(t *testing.T) {
	opt := Options{Algorithms: map[Collective]Algorithm{CollBcast: Flat, CollReduce: Replicated, CollAllreduce: Replicated}}
	for _, p := range []int{2, 3} {
		err := Run(p, opt, func(c *Comm) error {
			r := c.Rank()
			for _, n := range []int{pipeFitBytes / 4, pipeFitBytes/4 + 16, 16 << 10, 48 << 10, pipelineBytes/4 + 16} { // int32s
				steps := uint64(1)
				if 4*n > pipeFitBytes {
					steps = 4
				}
				what := fmt.Sprintf("p=%d n=%d rank %d", p, n, r)
				check := func(coll string) {
					steps := steps
					if coll == "allreduce" && 4*n <= pipelineBytes {
						steps = 1
					}
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

// TestPublishOwn: the flat allgather and allgatherv of own blocks from
// fuseOwnBytes (publishOwn, chunks of fuseChunk and a short last one) give
// exact results, with a separate send buffer (the fused copies) and in
// place (not fused), on two and three ranks.
func TestPublishOwn(t *testing.T) {
	for _, p := range []int{2, 3} {
		cs := localComms(t, p, Options{Algorithms: map[Collective]Algorithm{CollAllgather: Flat, CollAllgatherv: Flat}})
		// Elements per rank: a block of exactly fuseOwnBytes, one with a
		// short last chunk, and (allgatherv) blocks on both sides of the
		// threshold in one call.
		blocks := [][]int{
			{fuseOwnBytes / 8, fuseOwnBytes / 8, fuseOwnBytes / 8},
			{fuseOwnBytes/8 + 1237, fuseOwnBytes/8 + 1237, fuseOwnBytes/8 + 1237},
			{3*fuseOwnBytes/8 + 5, fuseOwnBytes/8 - 3, 2*fuseOwnBytes/8 + 77},
		}
		err := runComms(cs, func(c *Comm) error {
			r := c.Rank()
			for bi, b := range blocks {
				counts := b[:p]
				displs := make([]int, p)
				total := 0
				for q, n := range counts {
					displs[q] = total
					total += n
				}
				val := func(q, i int) float64 { return float64(q*1_000_003 + i%9973) }
				for _, inPlace := range []bool{false, true} {
					recv := make([]float64, total)
					var send []float64
					if inPlace {
						for i := range counts[r] {
							recv[displs[r]+i] = val(r, i)
						}
					} else {
						send = make([]float64, counts[r])
						for i := range send {
							send[i] = val(r, i)
						}
					}
					call := func() error {
						if bi < 2 {
							return Allgather(context.Background(), c, send, recv)
						}
						return Allgatherv(context.Background(), c, send, recv, counts, displs)
					}
					// The first call touches recv's pages: its copies are
					// slow and may advise non-temporal stores, which skip
					// publishOwn. Advice is taken back before the second.
					if err := call(); err != nil {
						return err
					}
					if err := Barrier(context.Background(), c); err != nil {
						return err
					}
					c.adv.ep.Hint(r).Store(0)
					c.adv.resetSlow()
					if err := Barrier(context.Background(), c); err != nil {
						return err
					}
					// Everything the call writes is cleared (in place,
					// all but the own block).
					for q := range p {
						if !inPlace || q != r {
							clear(recv[displs[q] : displs[q]+counts[q]])
						}
					}
					if err := call(); err != nil {
						return err
					}
					if c.adv.advised() {
						t.Logf("p %d, blocks %v: advised during the call; some pieces were not fused", p, counts)
					}
					if c.LastAlgorithm() != Flat {
						return fmt.Errorf("algorithm %v, want flat", c.LastAlgorithm())
					}
					for q := range p {
						for i := range counts[q] {
							if v := recv[displs[q]+i]; v != val(q, i) {
								return fmt.Errorf("p %d, blocks %v, in place %v: rank %d sees element %d of rank %d = %v", p, counts, inPlace, r, i, q, v)
							}
						}
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestProbeRead: the placement probe of the allreduce's schedule segments
// (rabenseifnerodd, rabenseifner, bde, mst, ring) and of the p=2 circulant
// allreduce advises after two slow probes in a row, a fast one resets the
// count, and no rank probes while advised; the allreduce gives exact
// results with and without the advice (non-temporal copy-in and
// reductions; at p=2 circulant's result reduced into the user's buffer,
// reduceResult), on two and three ranks.
func TestProbeRead(t *testing.T) {
	for _, p := range []int{2, 3} {
		for _, alg := range []Algorithm{RabenseifnerOdd, Ring, Circulant} {
			cs := localComms(t, p, Options{SlotBytes: 256 << 10, Algorithms: map[Collective]Algorithm{CollAllreduce: alg}})
			n := 3*(64<<10)/4 + 5 // int32s: several segments of 64 KiB, the last short
			check := func(advised bool) {
				err := runComms(cs, func(c *Comm) error {
					for it := range 3 {
						recv := make([]int32, n)
						if err := Allreduce(bg, c, vec(c.Rank()+it, n), recv, Sum); err != nil {
							return err
						}
						want := make([]int32, n)
						for r := range p {
							for i, x := range vec(r+it, n) {
								want[i] += x
							}
						}
						expect(t, fmt.Sprintf("%v p=%d advised=%v it %d rank %d", alg, p, advised, it, c.Rank()), recv, want)
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			check(false)
			cs[p-1].adv.ep.Hint(p - 1).Store(cs[p-1].seq + 1000)
			c := cs[0]
			before := c.adv.samples
			if !c.adv.probeRead(make([]byte, probeBytes)) {
				t.Errorf("%v p=%d: probeRead under another rank's advice reports none", alg, p)
			}
			if c.adv.samples != before {
				t.Errorf("%v p=%d: a rank under advice probed", alg, p)
			}
			check(true)
			cs[p-1].adv.ep.Hint(p - 1).Store(0)
			c.adv.ep.Hint(0).Store(0)
			c.adv.resetSlow()
			// probeRead's judgement of a probe of n bytes in d ns.
			probeDone := func(n int, d int64) { c.adv.judgeRate(&c.adv.slowProbes, n, d, slowProbeRate, adviceCalls) }
			probeDone(probeBytes, probeBytes) // 1 byte/ns: slow
			if c.adv.advised() {
				t.Fatal("one slow probe advised")
			}
			probeDone(probeBytes, 1) // fast
			probeDone(probeBytes, probeBytes)
			if c.adv.advised() {
				t.Fatal("a fast probe did not reset the count")
			}
			probeDone(probeBytes, probeBytes)
			if got := c.adv.ep.Hint(0).Load(); got != c.seq+adviceCalls {
				t.Fatalf("two slow probes in a row: advice %d at call %d, want %d", got, c.seq, c.seq+adviceCalls)
			}
			c.adv.ep.Hint(0).Store(0)
		}
	}
}

// TestStoreAdviceOff: with Options.NoStoreAdvice or SHMCOLL_STORE_ADVICE=off
// a rank neither takes another rank's advice nor times or samples, and
// gives the same results; a value other than on or off fails the join.
func TestStoreAdviceOff(t *testing.T) {
	check := func(name string, cs []*Comm) {
		t.Helper()
		cs[1].adv.ep.Hint(1).Store(cs[1].seq + 1000)
		defer cs[1].adv.ep.Hint(1).Store(0)
		c := cs[0]
		if c.adv.advised() || c.adv.timed(1<<30) || c.adv.sample(1) || c.adv.probeRead(make([]byte, probeBytes)) {
			t.Errorf("%s: advice off but advised, timed or sampled", name)
		}
		if c.adv.readStart(1<<20) != 0 {
			t.Errorf("%s: advice off but a read is timed", name)
		}
		const n = 100_000
		err := runComms(cs, func(c *Comm) error {
			buf := make([]float64, n)
			for i := range buf {
				buf[i] = float64(i%7 + c.Rank())
			}
			if err := Allreduce(context.Background(), c, nil, buf, Sum); err != nil {
				return err
			}
			for i, v := range buf {
				if v != float64(2*(i%7)+1) {
					return fmt.Errorf("%s: element %d = %v", name, i, v)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	check("Options", localComms(t, 2, Options{NoStoreAdvice: true}))
	t.Setenv(StoreAdviceEnv, "off")
	check("env", localComms(t, 2, Options{}))
	t.Setenv(StoreAdviceEnv, "sometimes")
	if _, err := NewLocal(2, Options{}); err == nil || !strings.Contains(err.Error(), StoreAdviceEnv) {
		t.Errorf("%s=sometimes: err %v, want one naming it", StoreAdviceEnv, err)
	}
}

// resetSlow forgets the slow reads, writes and probes seen in a row.
func (s *storeAdvice) resetSlow() { s.slowReads, s.slowWrites, s.slowProbes = 0, 0, 0 }
