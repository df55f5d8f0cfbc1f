//go:build linux

package shm

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// TestProgressOneP: in a process with one P (a rank bound to one core, as
// shmrun binds Go ranks, or a libshmcoll rank run with GOMAXPROCS=1), a
// wait that has spun out calls Options.Progress on the waiting goroutine,
// in the yield phase (between its runtime.Gosched calls) and between futex
// sleeps, until the awaited post arrives: here made by
// the hook itself, so the wait ends only if the hook keeps being called.
func TestProgressOneP(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	ctx := context.Background()
	for _, mode := range []struct {
		name  string
		yield time.Duration
	}{
		{"yield", time.Hour}, {"sleep", -1},
	} {
		t.Run(mode.name, func(t *testing.T) {
			var e *Endpoint
			var calls atomic.Int64
			opt := Options{SlotBytes: 4096, SpinFor: -1, YieldFor: mode.yield, sleepFor: time.Millisecond,
				Progress: func() {
					if calls.Add(1) == 5 {
						e.Post(1, 1)
					}
				}}
			e, err := Join(ctx, testName(), 0, 1, opt)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if !e.oneP {
				t.Fatal("GOMAXPROCS 1: the endpoint does not wait as a one-P process")
			}
			if err := e.Wait(ctx, 0, 1, 1); err != nil {
				t.Fatal(err)
			}
			if n := calls.Load(); n != 5 {
				t.Errorf("Progress called %d times before its own post ended the wait, want 5", n)
			}
		})
	}
}
