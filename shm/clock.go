package shm

import (
	"unsafe"

	"github.com/shmcoll/shmcoll/internal/clock"
)

// nanotime is the module's monotonic clock in nanoseconds (CLOCK_MONOTONIC,
// node-wide: comparable across processes).
func nanotime() int64 { return clock.Nanotime() }

// lowHalf is the offset of the low 32 bits within a 64-bit word: the futex
// word of a counter.
var lowHalf = func() int {
	x := uint64(1)
	if *(*byte)(unsafe.Pointer(&x)) == 1 {
		return 0
	}
	return 4
}()
