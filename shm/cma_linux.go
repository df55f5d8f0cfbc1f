package shm

import (
	"os"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// vmCopy copies between local and pid's ranges remote (their total
// length is len(local)): process_vm_readv, or process_vm_writev if write.
// It carries up to iovBatch ranges per call, retries EINTR and goes on
// after a partial transfer (the kernel stops at an unmapped page, and
// moves at most about 2 GiB per call) until all is copied or the kernel
// fails; then it returns the range where it stopped and the errno. It
// allocates nothing.
func vmCopy(pid int, local []byte, remote []Remote, write bool) (Remote, error) {
	var liov [1]unix.Iovec
	var riov [iovBatch]unix.RemoteIovec
	i, off := 0, 0 // the next byte to copy: offset off of remote[i]
	for {
		k, size := 0, 0
		for j := i; j < len(remote) && k < iovBatch; j++ {
			o := 0
			if j == i {
				o = off
			}
			if n := remote[j].Len - o; n > 0 {
				riov[k] = unix.RemoteIovec{Base: remote[j].Addr + uintptr(o), Len: n}
				k++
				size += n
			}
		}
		if k == 0 {
			return Remote{}, nil
		}
		liov[0].Base = &local[0]
		liov[0].SetLen(size)
		var n int
		var err error
		if write {
			n, err = unix.ProcessVMWritev(pid, liov[:], riov[:k], 0)
		} else {
			n, err = unix.ProcessVMReadv(pid, liov[:], riov[:k], 0)
		}
		if err == unix.EINTR {
			continue
		}
		if err == nil && n <= 0 {
			err = unix.EFAULT
		}
		if err != nil {
			return Remote{riov[0].Base, riov[0].Len}, err
		}
		local = local[n:]
		for n > 0 {
			if rest := remote[i].Len - off; n < rest {
				off += n
				n = 0
			} else {
				n -= rest
				i, off = i+1, 0
			}
		}
	}
}

// prSetPtracerAny is PR_SET_PTRACER_ANY, ((unsigned long)-1).
const prSetPtracerAny = ^uintptr(0)

// allowPtrace lets the peers read this process where Yama's ptrace_scope
// is 1 (only ancestors may ptrace a process): it declares any process a
// permitted tracer, as Open MPI does for its single-copy transport. That
// extends to every process of this user what Yama would otherwise refuse;
// SHMCOLL_CMA=off (or Options.NoCrossMemory) does without it. Once per
// process; only when cross-memory attach is not turned off.
var allowPtrace = sync.OnceFunc(func() {
	b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope")
	if err != nil || strings.TrimSpace(string(b)) != "1" {
		return
	}
	unix.Prctl(unix.PR_SET_PTRACER, prSetPtracerAny, 0, 0, 0)
})

// cmaThread returns the id of a thread of this process that does nothing
// but sleep, started at the first call, for peers to name in their
// process_vm_readv and process_vm_writev. The kernel looks the id up and
// takes a reference on that thread's task for every copy: named by the
// pid, the task is the process's main thread, which in a C host (an MPI
// program with libshmcoll) is the thread making the collective calls, so
// every copy by a peer would write to the cache lines of a task running on
// another CPU. The memory is the process's either way.
var cmaThread = sync.OnceValue(func() int {
	tid := make(chan int)
	go func() {
		runtime.LockOSThread() // the thread lives as long as the goroutine
		tid <- unix.Gettid()
		select {}
	}()
	return <-tid
})

// collapse asks the kernel to back the 2 MiB-aligned pages inside b with
// huge pages (see PreferHugePages); a refusal (no huge page free, a kernel
// before Linux 6.1) leaves b as it was and is returned.
func collapse(b []byte) error {
	if h := hugeInside(b); len(h) > 0 {
		return unix.Madvise(h, unix.MADV_COLLAPSE)
	}
	return nil
}
