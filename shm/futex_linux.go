package shm

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Shared futex operations: no FUTEX_PRIVATE_FLAG, so that waiters and wakers
// in different processes that map the same memory meet.
const (
	futexOpWait = 0
	futexOpWake = 1
)

// futexWait sleeps while *addr == val, at most d, and reports whether it
// timed out. Spurious returns are fine: every caller rechecks its
// condition.
func futexWait(addr *uint32, val uint32, d time.Duration) (timedOut bool) {
	ts := unix.NsecToTimespec(int64(d))
	// One attempt: EINTR, EAGAIN (value changed) and ETIMEDOUT all send the
	// caller back to its loop, which rechecks everything.
	_, _, e := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexOpWait, uintptr(val),
		uintptr(unsafe.Pointer(&ts)), 0, 0)
	return e == unix.ETIMEDOUT
}

// futexWake wakes every waiter on addr.
func futexWake(addr *uint32) {
	for {
		_, _, e := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexOpWake, uintptr(1<<31-1), 0, 0, 0)
		if e != unix.EINTR {
			return
		}
	}
}

// osYield gives the CPU to another runnable thread (sched_yield).
func osYield() { schedYield() }
