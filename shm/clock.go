package shm

import (
	"time"
	"unsafe"
)

var epoch = time.Now()

// nanotime is a monotonic clock in nanoseconds.
func nanotime() int64 { return int64(time.Since(epoch)) }

// lowHalf is the offset of the low 32 bits within a 64-bit word: the futex
// word of a counter.
var lowHalf = func() int {
	x := uint64(1)
	if *(*byte)(unsafe.Pointer(&x)) == 1 {
		return 0
	}
	return 4
}()
