package collectives

import (
	"context"
	"testing"
)

func TestSmokeAllreduce(t *testing.T) {
	for _, alg := range []Algorithm{Flat, Circulant} {
		for p := 1; p <= 6; p++ {
			for _, n := range []int{0, 1, 7, 100} {
				err := Run(p, Options{Algorithms: map[Collective]Algorithm{CollAllreduce: alg}}, func(c *Comm) error {
					send := make([]int64, n)
					for i := range send {
						send[i] = int64(c.Rank()*1000 + i)
					}
					recv := make([]int64, n)
					if err := Allreduce(context.Background(), c, send, recv, Sum); err != nil {
						return err
					}
					for i := range recv {
						want := int64(p*(p-1)/2*1000 + p*i)
						if recv[i] != want {
							t.Errorf("alg %v p %d n %d rank %d: recv[%d] = %d, want %d", alg, p, n, c.Rank(), i, recv[i], want)
							break
						}
					}
					return nil
				})
				if err != nil {
					t.Fatalf("alg %v p %d n %d: %v", alg, p, n, err)
				}
			}
		}
	}
}
