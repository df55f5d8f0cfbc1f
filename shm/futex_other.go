//go:build !linux

package shm

import (
	"runtime"
	"time"
)

// Without futexes a sleeping waiter polls: it sleeps briefly and rechecks.
func futexWait(addr *uint32, val uint32, d time.Duration, raw bool) bool {
	time.Sleep(min(d, 100*time.Microsecond))
	return false
}

func futexWake(addr *uint32) {}

func osYield() { runtime.Gosched() }
