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
//
// raw makes the sleep a raw system call, which the Go scheduler does not
// see: the goroutine keeps its P while it sleeps. A sleep that the
// scheduler sees leaves the P in a system call, and when that P is the
// process's only one, sysmon takes it after a tick and hands it to another
// thread that it wakes to look for work, then polls at its shortest
// interval for a while; the thread that wakes from the futex must then get
// a P back. On CPUs that ranks share, those extra threads run in the
// ranks' turns. Callers bound raw sleeps and let other goroutines run
// between them (see waitSlow).
func futexWait(addr *uint32, val uint32, d time.Duration, raw bool) (timedOut bool) {
	ts := unix.NsecToTimespec(int64(d))
	// One attempt: EINTR, EAGAIN (value changed) and ETIMEDOUT all send the
	// caller back to its loop, which rechecks everything.
	var e unix.Errno
	if raw {
		_, _, e = unix.RawSyscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexOpWait, uintptr(val),
			uintptr(unsafe.Pointer(&ts)), 0, 0)
	} else {
		_, _, e = unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexOpWait, uintptr(val),
			uintptr(unsafe.Pointer(&ts)), 0, 0)
	}
	return e == unix.ETIMEDOUT
}

// futexWake wakes every waiter on addr. FUTEX_WAKE does not block, so it is
// a raw system call: a poster whose wake lets a woken rank preempt it on a
// shared CPU stays in the call until it runs again, and the scheduler must
// not take its P meanwhile (see futexWait).
func futexWake(addr *uint32) {
	for {
		_, _, e := unix.RawSyscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexOpWake, uintptr(1<<31-1), 0, 0, 0)
		if e != unix.EINTR {
			return
		}
	}
}

// osYield gives the CPU to another runnable thread (sched_yield).
func osYield() { schedYield() }
