package collectives

import (
	"fmt"
	"sync"
	"testing"
)

// BenchmarkAllreduce: float64 sum among in-process ranks (goroutines), per
// algorithm, size and rank count. Each rank makes b.N calls; the time per
// operation is rank 0's.
func BenchmarkAllreduce(b *testing.B) {
	for _, p := range []int{2, 4} {
		for _, bytes := range []int{8, 256, 4096, 65536, 1 << 20} {
			for _, alg := range []Algorithm{Flat, Circulant, Replicated} {
				b.Run(fmt.Sprintf("alg=%v/bytes=%d/ranks=%d", alg, bytes, p), func(b *testing.B) {
					benchAllreduce(b, p, bytes/8, alg)
				})
			}
		}
	}
}

func benchAllreduce(b *testing.B, p, n int, alg Algorithm) {
	cs, err := NewLocal(p, Options{Algorithms: map[Collective]Algorithm{CollAllreduce: alg}})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	bufs := make([][2][]float64, p)
	for r := range bufs {
		bufs[r] = [2][]float64{make([]float64, n), make([]float64, n)}
		for i := range bufs[r][0] {
			bufs[r][0][i] = float64(r + i)
		}
	}
	// Warm up (page faults of the slots and buffers).
	call := func(r int) error { return Allreduce(bg, cs[r], bufs[r][0], bufs[r][1], Sum) }
	var wg sync.WaitGroup
	run := func(iters int) {
		errs := make([]error, p)
		for r := 1; r < p; r++ {
			wg.Go(func() {
				for range iters {
					if errs[r] = call(r); errs[r] != nil {
						return
					}
				}
			})
		}
		for range iters {
			if errs[0] = call(0); errs[0] != nil {
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
	run(10)
	b.SetBytes(int64(8 * n))
	b.ReportAllocs()
	b.ResetTimer()
	run(b.N)
}

// BenchmarkAllreduceOneElementOneRank is the per-call overhead: one float64
// among one rank (target: under 50 ns, no allocation).
func BenchmarkAllreduceOneElementOneRank(b *testing.B) {
	cs, err := NewLocal(1, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer cs[0].Close()
	send, recv := []float64{1}, []float64{0}
	b.ReportAllocs()
	for b.Loop() {
		if err := Allreduce(bg, cs[0], send, recv, Sum); err != nil {
			b.Fatal(err)
		}
	}
}
