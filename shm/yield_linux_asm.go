//go:build linux && (amd64 || arm64) && !purego && !noasm

package shm

// schedYield is sched_yield(2) in one instruction sequence, where
// unix.RawSyscall goes through three calls: after the switch back, the
// return path runs with cold caches, and oversubscribed ranks take it once
// per turn.
//
//go:noescape
func schedYield()
