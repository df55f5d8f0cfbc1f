package collectives

import (
	"fmt"
	"testing"
)

// BenchmarkTreeAllreduce compares the pipelined tree allreduces (002) with
// circulant and flat: float64 sum among in-process ranks, time per
// operation rank 0's.
//
//	go test -run='^$' -bench=TreeAllreduce -benchtime=100x -count=3 ./collectives/
func BenchmarkTreeAllreduce(b *testing.B) {
	for _, p := range []int{2, 4, 8} {
		for _, bytes := range []int{4096, 65536, 1 << 20} {
			for _, alg := range []Algorithm{DualRoot, Tree, ReduceBcast, Circulant, Flat} {
				b.Run(fmt.Sprintf("alg=%v/bytes=%d/ranks=%d", alg, bytes, p), func(b *testing.B) {
					benchColl(b, p, alg, CollAllreduce, bytes/8)
				})
			}
		}
	}
}
