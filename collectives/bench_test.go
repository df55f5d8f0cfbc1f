package collectives

import (
	"fmt"
	"sync"
	"testing"
)

// benchRanks runs call(rank) b.N times on each of p in-process ranks
// (goroutines) of a communicator with alg pinned for coll; the time per
// operation is that of the whole group.
func benchRanks(b *testing.B, p int, coll Collective, alg Algorithm, bytes int, call func(c *Comm) error) {
	benchComms(b, localComms(b, p, Options{Algorithms: map[Collective]Algorithm{coll: alg}}), bytes, call)
}

// benchComms runs call(rank) b.N times on each rank of cs, goroutines.
func benchComms(b *testing.B, cs []*Comm, bytes int, call func(c *Comm) error) {
	p := len(cs)
	run := func(iters int) {
		errs := make([]error, p)
		var wg sync.WaitGroup
		for r := 1; r < p; r++ {
			wg.Go(func() {
				for range iters {
					if errs[r] = call(cs[r]); errs[r] != nil {
						return
					}
				}
			})
		}
		for range iters {
			if errs[0] = call(cs[0]); errs[0] != nil {
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
	run(10) // page faults of slots and buffers
	b.SetBytes(int64(bytes))
	b.ReportAllocs()
	b.ResetTimer()
	run(b.N)
}

var benchSizes = []int{8, 256, 4096, 65536, 1 << 20}

// BenchmarkAllreduce: float64 sum, per algorithm, size (bytes of each
// rank's vector) and rank count.
func BenchmarkAllreduce(b *testing.B) {
	for _, p := range []int{2, 4} {
		for _, bytes := range benchSizes {
			for _, alg := range []Algorithm{Flat, Circulant, Replicated} {
				b.Run(fmt.Sprintf("alg=%v/bytes=%d/ranks=%d", alg, bytes, p), func(b *testing.B) {
					n := bytes / 8
					bufs := make([][2][]float64, p)
					for r := range bufs {
						bufs[r] = [2][]float64{make([]float64, n), make([]float64, n)}
					}
					benchRanks(b, p, CollAllreduce, alg, bytes, func(c *Comm) error {
						return Allreduce(bg, c, bufs[c.Rank()][0], bufs[c.Rank()][1], Sum)
					})
				})
			}
		}
	}
}

// BenchmarkCollectives: the other collectives of the selection table, per
// algorithm; bytes as DESIGN.md counts them.
func BenchmarkCollectives(b *testing.B) {
	type bench struct {
		coll Collective
		algs []Algorithm
		call func(c *Comm, bufs [][]float64, n int) error
		in   func(p, n int) int // elements of the input buffer
		out  func(p, n int) int
	}
	one := func(p, n int) int { return n }
	perRank := func(p, n int) int { return n / p }
	benches := []bench{
		{CollReduceScatterBlock, []Algorithm{Flat, Circulant}, func(c *Comm, bufs [][]float64, n int) error {
			return ReduceScatterBlock(bg, c, bufs[0], bufs[1], Sum)
		}, one, perRank},
		{CollAllgather, []Algorithm{Flat, Circulant}, func(c *Comm, bufs [][]float64, n int) error {
			return Allgather(bg, c, bufs[0], bufs[1])
		}, perRank, one},
		{CollBcast, []Algorithm{Flat, Circulant}, func(c *Comm, bufs [][]float64, n int) error {
			return Bcast(bg, c, bufs[0], 0)
		}, one, one},
		{CollReduce, []Algorithm{Flat, Circulant, Replicated}, func(c *Comm, bufs [][]float64, n int) error {
			return Reduce(bg, c, bufs[0], bufs[1], Sum, 0)
		}, one, one},
		{CollAlltoall, []Algorithm{Flat, Circulant}, func(c *Comm, bufs [][]float64, n int) error {
			return Alltoall(bg, c, bufs[0], bufs[1])
		}, one, one},
		{CollReduceScatter, []Algorithm{Flat, Circulant}, func(c *Comm, bufs [][]float64, n int) error {
			// Blocks of m/2 + j·m/(p-1) elements, m = n/p, as shmbench cuts
			// them; the last takes what rounding leaves.
			var counts [8]int
			p, m, sum := c.Size(), n/c.Size(), 0
			for j := range p {
				counts[j] = m/2 + j*m/(p-1)
				if j == p-1 {
					counts[j] = n - sum
				}
				sum += counts[j]
			}
			return ReduceScatter(bg, c, bufs[0], bufs[1][:counts[c.Rank()]], counts[:p], Sum)
		}, one, one},
	}
	for _, bn := range benches {
		for _, p := range []int{2, 4} {
			for _, bytes := range benchSizes {
				for _, alg := range bn.algs {
					name := fmt.Sprintf("coll=%v/alg=%v/bytes=%d/ranks=%d", bn.coll, alg, bytes, p)
					b.Run(name, func(b *testing.B) {
						n := max(p, bytes/8/p*p)
						bufs := make([][][]float64, p)
						for r := range bufs {
							bufs[r] = [][]float64{make([]float64, bn.in(p, n)), make([]float64, bn.out(p, n))}
						}
						benchRanks(b, p, bn.coll, alg, 8*n, func(c *Comm) error { return bn.call(c, bufs[c.Rank()], n) })
					})
				}
			}
		}
	}
}

// BenchmarkAllreduceOneElementOneRank is the per-call overhead: one float64
// among one rank; it allocates nothing.
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

// BenchmarkDirect: two in-process ranks, Go buffers (the selection table)
// against buffers from Alloc (Direct from directMin up), each rank
// rewriting its whole input before every call, inside the timing for both,
// as a program that computes its data would: the rewrite of lines the peer
// read is part of what reading in place costs (directMin).
func BenchmarkDirect(b *testing.B) {
	for _, coll := range []Collective{CollAllreduce, CollReduceScatterBlock, CollAllgather, CollBcast} {
		for _, bytes := range []int{64 << 10, 1 << 20, 4 << 20} {
			for _, arena := range []bool{false, true} {
				name := fmt.Sprintf("coll=%v/bytes=%d/buffers=go", coll, bytes)
				if arena {
					name = fmt.Sprintf("coll=%v/bytes=%d/buffers=arena", coll, bytes)
				}
				b.Run(name, func(b *testing.B) { benchDirect(b, coll, bytes, arena) })
			}
		}
	}
}

func benchDirect(b *testing.B, coll Collective, bytes int, arena bool) {
	const p = 2
	cs := localComms(b, p, Options{HeapBytes: 4 * bytes})
	n := bytes / 8
	type bufs struct{ in, out, pristine []float64 }
	bs := make([]bufs, p)
	for r, c := range cs {
		inN, outN := n, n
		switch coll {
		case CollAllgather:
			inN = n / p
		case CollReduceScatterBlock:
			outN = n / p
		}
		mk := func(k int) []float64 {
			if !arena {
				return make([]float64, k)
			}
			v, err := Alloc[float64](c, k)
			if err != nil {
				b.Fatal(err)
			}
			return v
		}
		bs[r] = bufs{in: mk(inN), out: mk(outN), pristine: make([]float64, inN)}
		for i := range bs[r].pristine {
			bs[r].pristine[i] = float64(r + i)
		}
	}
	direct := arena && bytes >= directMin(coll, false)
	benchComms(b, cs, bytes, func(c *Comm) error {
		r := c.Rank()
		copy(bs[r].in, bs[r].pristine)
		var err error
		switch coll {
		case CollAllreduce:
			err = Allreduce(bg, c, bs[r].in, bs[r].out, Sum)
		case CollReduceScatterBlock:
			err = ReduceScatterBlock(bg, c, bs[r].in, bs[r].out, Sum)
		case CollAllgather:
			err = Allgather(bg, c, bs[r].in, bs[r].out)
		case CollBcast:
			err = Bcast(bg, c, bs[r].in, 0)
		}
		if err == nil && (c.LastAlgorithm() == Direct) != direct {
			err = fmt.Errorf("%v took %v", coll, c.LastAlgorithm())
		}
		return err
	})
}
