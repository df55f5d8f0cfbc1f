package collectives

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shmcoll/shmcoll/shm"
	"github.com/shmcoll/shmcoll/simd"
)

// BenchmarkNblock compares nblock with circulant and flat for bcast,
// reduce, allgather and reduce_scatter_block: float64 (sum), in-process
// ranks, bytes as DESIGN.md counts them. Time per operation is rank 0's.
//
//	go test -run='^$' -bench=Nblock -benchtime=200x ./collectives/
func BenchmarkNblock(b *testing.B) {
	for _, coll := range []Collective{CollBcast, CollReduce, CollAllgather, CollReduceScatterBlock} {
		for _, p := range []int{2, 4, 8} {
			for _, bytes := range []int{4096, 65536, 1 << 20} {
				for _, alg := range []Algorithm{Nblock, Circulant, Flat} {
					b.Run(fmt.Sprintf("coll=%v/alg=%v/bytes=%d/ranks=%d", coll, alg, bytes, p), func(b *testing.B) {
						benchColl(b, p, alg, coll, bytes/8)
					})
				}
			}
		}
	}
}

// benchColl times one collective of n float64 (the vector of DESIGN.md's
// bytes) among p in-process ranks with alg pinned.
func benchColl(b *testing.B, p int, alg Algorithm, coll Collective, n int) {
	cs, err := NewLocal(p, Options{Algorithms: map[Collective]Algorithm{coll: alg}})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	blk := max(n/p, 1)
	calls := make([]func() error, p)
	for r, c := range cs {
		switch coll {
		case CollBcast:
			buf := make([]float64, n)
			calls[r] = func() error { return Bcast(bg, c, buf, 0) }
		case CollReduce:
			in, out := make([]float64, n), make([]float64, n)
			calls[r] = func() error { return Reduce(bg, c, in, out, Sum, 0) }
		case CollAllgather:
			in, out := make([]float64, blk), make([]float64, p*blk)
			calls[r] = func() error { return Allgather(bg, c, in, out) }
		case CollReduceScatterBlock:
			in, out := make([]float64, p*blk), make([]float64, blk)
			calls[r] = func() error { return ReduceScatterBlock(bg, c, in, out, Sum) }
		case CollAllreduce:
			in, out := make([]float64, n), make([]float64, n)
			calls[r] = func() error { return Allreduce(bg, c, in, out, Sum) }
		}
	}
	run := func(iters int) {
		errs := make([]error, p)
		var wg sync.WaitGroup
		for r := 1; r < p; r++ {
			wg.Go(func() {
				for range iters {
					if errs[r] = calls[r](); errs[r] != nil {
						return
					}
				}
			})
		}
		for range iters {
			if errs[0] = calls[0](); errs[0] != nil {
				break
			}
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	run(5) // page faults of the slots and buffers
	b.SetBytes(int64(8 * n))
	b.ReportAllocs()
	b.ResetTimer()
	run(b.N)
}

// BenchmarkCostModel measures the constants of machineCost (nblock.go):
// alpha, half a phase ping-pong between two in-process ranks (ns); beta,
// copying a 64 KiB block from a peer's 2 MiB slot half into one's own
// (ns/byte); gamma, reducing (float64 sum) such a block from a peer's half
// into one's own, less beta (ns/byte). The metrics are the result (one
// measurement, whatever b.N).
//
//	go test -run='^$' -bench=CostModel -benchtime=1x -count=5 ./collectives/
func BenchmarkCostModel(b *testing.B) {
	for b.Loop() {
	}
	eps, err := shm.NewLocal(2, shm.Options{SlotBytes: 4 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		for _, e := range eps {
			e.Close()
		}
	}()
	// alpha: rank 1 echoes every value rank 0 posts.
	const pings = 20000
	done := make(chan error, 1)
	go func() {
		for v := uint64(1); v <= pings; v++ {
			if err := eps[1].Wait(bg, 0, 0, v); err != nil {
				done <- err
				return
			}
			eps[1].Post(0, v)
		}
		done <- nil
	}()
	start := time.Now()
	for v := uint64(1); v <= pings; v++ {
		eps[0].Post(0, v)
		if err := eps[0].Wait(bg, 1, 0, v); err != nil {
			b.Fatal(err)
		}
	}
	alpha := float64(time.Since(start).Nanoseconds()) / (2 * pings)
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	// beta and gamma: 64 KiB blocks cycling through 2 MiB halves.
	const block, half = 64 << 10, 2 << 20
	own, peer := eps[0].Slot(0)[:half], eps[1].Slot(1)[:half]
	k, err := simd.Lookup(simd.Float64, simd.Sum)
	if err != nil {
		b.Fatal(err)
	}
	measure := func(f func(dst, src []byte)) float64 {
		const passes = 64
		start := time.Now()
		for i := range passes * half / block {
			o := i * block % half
			f(own[o:o+block], peer[o:o+block])
		}
		return float64(time.Since(start).Nanoseconds()) / (passes * half)
	}
	for range 2 { // warm up
		measure(func(d, s []byte) { copy(d, s) })
	}
	beta := measure(func(d, s []byte) { copy(d, s) })
	reduce := measure(k.Reduce)
	b.ReportMetric(alpha, "alpha-ns")
	b.ReportMetric(beta, "beta-ns/B")
	b.ReportMetric(max(reduce-beta, 0), "gamma-ns/B")
}

// BenchmarkNblockBlocks times bcast and allreduce (dual root) of 1 MiB
// with a fixed number of blocks, to set beside the block count the cost
// model chooses (blocks=0).
//
//	go test -run='^$' -bench=NblockBlocks -benchtime=100x -count=3 ./collectives/
func BenchmarkNblockBlocks(b *testing.B) {
	for _, coll := range []Collective{CollBcast, CollAllreduce} {
		alg := Nblock
		if coll == CollAllreduce {
			alg = DualRoot
		}
		for _, p := range []int{4, 8} {
			for _, nb := range []int{0, 1, 2, 4, 8, 16, 32, 64} {
				b.Run(fmt.Sprintf("coll=%v/alg=%v/blocks=%d/bytes=%d/ranks=%d", coll, alg, nb, 1<<20, p), func(b *testing.B) {
					defer setTestBlocks(nb)()
					benchColl(b, p, alg, coll, 1<<17)
				})
			}
		}
	}
}
