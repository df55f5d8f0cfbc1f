package main

import _ "unsafe" // for go:linkname

// nanotime is the runtime's monotonic clock in nanoseconds. On Linux it is
// CLOCK_MONOTONIC read through the vDSO, so it is node-wide: times taken by
// different ranks (processes) compare directly, which the span needs. It
// costs one vDSO call, half of time.Now's two.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64
