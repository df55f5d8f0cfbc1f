// Package clock is the monotonic clock shared by shm, collectives and
// shmbench.
package clock

import _ "unsafe" // for go:linkname

// Nanotime is the runtime's monotonic clock in nanoseconds. On Linux it is
// CLOCK_MONOTONIC read through the vDSO, so it is node-wide: times taken by
// different processes compare directly. It costs one vDSO call, half of
// time.Now's two.
//
//go:linkname Nanotime runtime.nanotime
func Nanotime() int64
