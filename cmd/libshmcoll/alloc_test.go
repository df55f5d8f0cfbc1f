//go:build mpi

package main

import (
	"sync"
	"testing"
	"unsafe"

	"github.com/shmcoll/shmcoll/collectives"
	"github.com/shmcoll/shmcoll/simd"
)

// TestServeAllocs checks that the Go side of a served call allocates
// nothing once warm: the communicator lookup, the operator and the
// collective, on two in-process ranks (the allocation count is the
// process's, both ranks included).
func TestServeAllocs(t *testing.T) {
	initOps()
	cs, err := collectives.NewLocal(2, collectives.Options{})
	if err != nil {
		t.Fatal(err)
	}
	states := make([]*commState, 2)
	for r, c := range cs {
		states[r] = &commState{c: c, rank: r, size: 2, counts: make([]int, 2), displs: make([]int, 2),
			rcounts: make([]int, 2), rdispls: make([]int, 2)}
		defer c.Close()
	}
	const n = 64
	bufs := make([][2][]float64, 2)
	for r := range bufs {
		bufs[r] = [2][]float64{make([]float64, n), make([]float64, n)}
		for i := range bufs[r][0] {
			bufs[r][0][i] = float64(r + i)
		}
	}
	call := func(r int) error {
		s := states[r]
		op := opFor(int(simd.Sum), simd.Float64, true, 0)
		send, recv := unsafe.Pointer(&bufs[r][0][0]), unsafe.Pointer(&bufs[r][1][0])
		if err := reduce[float64](s, collectives.CollAllreduce, send, recv, n, nil, op, 0); err != nil {
			return err
		}
		count(collectives.CollAllreduce, s)
		return collectives.Bcast(bg, s.c, buf(recv, 8*n), 1)
	}
	const runs = 200
	var wg sync.WaitGroup
	var peerErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range runs + 1 + 10 { // AllocsPerRun's warm-up, its runs, ours
			if peerErr = call(1); peerErr != nil {
				return
			}
		}
	}()
	for range 10 {
		if err := call(0); err != nil {
			t.Fatal(err)
		}
	}
	var callErr error
	allocs := testing.AllocsPerRun(runs, func() {
		if err := call(0); err != nil && callErr == nil {
			callErr = err
		}
	})
	wg.Wait()
	if callErr != nil || peerErr != nil {
		t.Fatal(callErr, peerErr)
	}
	for i, v := range bufs[0][1] {
		if v != float64(1+2*i) {
			t.Fatalf("allreduce [%d] = %v, want %v", i, v, 1+2*i)
		}
	}
	if allocs > 0 {
		t.Errorf("%v allocations per served allreduce and bcast, want 0", allocs)
	}
}
