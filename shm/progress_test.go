//go:build linux

package shm

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// TestProgressWaitPolicy: in a process with one P, a wait without a
// Progress hook calls runtime.Gosched between yields and sleeps, and a wait
// with one (a host's thread inside a cgo callback) does not; a wait that has
// spun out calls the hook on the waiting goroutine, in the yield phase and
// between futex sleeps, until the awaited post arrives (here made by the
// hook itself).
func TestProgressWaitPolicy(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	ctx := context.Background()
	for _, mode := range []struct {
		name     string
		progress bool
		yield    time.Duration
	}{
		{"plain", false, 0}, {"yield", true, time.Hour}, {"sleep", true, -1},
	} {
		t.Run(mode.name, func(t *testing.T) {
			var e *Endpoint
			var calls atomic.Int64
			opt := Options{SlotBytes: 4096, SpinFor: -1, YieldFor: mode.yield, sleepFor: time.Millisecond}
			if mode.progress {
				opt.Progress = func() {
					if calls.Add(1) == 5 {
						e.Post(1, 1)
					}
				}
			}
			e, err := Join(ctx, testName(), 0, 1, opt)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			if !e.oneP || e.gosched == mode.progress {
				t.Fatalf("GOMAXPROCS 1, Progress set %v: oneP %v gosched %v", mode.progress, e.oneP, e.gosched)
			}
			if !mode.progress {
				return
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
