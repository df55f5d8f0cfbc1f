package collectives

import (
	"fmt"
	"testing"
)

// Benchmarks of the schedule algorithms beside flat and circulant, float64
// among in-process ranks (benchRanks: the time per operation is the whole
// group's). Names as benchstat reads them: coll=/alg=/bytes=/ranks=; bytes
// as DESIGN.md counts them.
func BenchmarkSched(b *testing.B) {
	type bench struct {
		coll Collective
		algs []Algorithm
		call func(c *Comm, bufs [][]float64) error
		in   func(p, n int) int // elements of the input buffer
		out  func(p, n int) int
	}
	one := func(p, n int) int { return n }
	perRank := func(p, n int) int { return n / p }
	benches := []bench{
		{CollAllreduce, []Algorithm{Flat, Circulant, Replicated, Rabenseifner, Rabenseifner21, RecDoubling, RabenseifnerOdd, Ring, BDE, Bruck}, func(c *Comm, bufs [][]float64) error {
			return Allreduce(bg, c, bufs[0], bufs[1], Sum)
		}, one, one},
		{CollReduceScatterBlock, []Algorithm{Flat, Circulant, Rabenseifner, Ring, BDE}, func(c *Comm, bufs [][]float64) error {
			return ReduceScatterBlock(bg, c, bufs[0], bufs[1], Sum)
		}, one, perRank},
		{CollAllgather, []Algorithm{Flat, Circulant, Ring, BDE, Bruck}, func(c *Comm, bufs [][]float64) error {
			return Allgather(bg, c, bufs[0], bufs[1])
		}, perRank, one},
		{CollBcast, []Algorithm{Flat, Circulant, MST, Ring}, func(c *Comm, bufs [][]float64) error {
			return Bcast(bg, c, bufs[0], 0)
		}, one, one},
		{CollReduce, []Algorithm{Flat, Circulant, MST, Rabenseifner}, func(c *Comm, bufs [][]float64) error {
			return Reduce(bg, c, bufs[0], bufs[1], Sum, 0)
		}, one, one},
	}
	for _, bn := range benches {
		for _, p := range []int{2, 4, 8} {
			for _, bytes := range []int{8, 4096, 65536, 1 << 20} {
				for _, alg := range bn.algs {
					b.Run(fmt.Sprintf("coll=%v/alg=%v/bytes=%d/ranks=%d", bn.coll, alg, bytes, p), func(b *testing.B) {
						n := max(p, bytes/8/p*p)
						bufs := make([][][]float64, p)
						for r := range bufs {
							bufs[r] = [][]float64{make([]float64, bn.in(p, n)), make([]float64, bn.out(p, n))}
						}
						benchRanks(b, p, bn.coll, alg, 8*n, func(c *Comm) error { return bn.call(c, bufs[c.Rank()]) })
					})
				}
			}
		}
	}
}
