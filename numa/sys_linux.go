package numa

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// initialAffinity is the affinity of the thread that ran package
// initialisation (the main thread, before anyone pinned it): what
// UnpinThread restores.
var initialAffinity unix.CPUSet

func init() {
	if err := unix.SchedGetaffinity(0, &initialAffinity); err != nil {
		initialAffinity.Fill()
	}
}

// AllowedCPUs returns the CPUs this process may run on, as they were when
// the package was initialised (the affinity of the main thread then: a
// cpuset, taskset, or a launcher's binding), ascending.
func AllowedCPUs() ([]int, error) {
	var cpus []int
	for c := range len(initialAffinity) * 64 {
		if initialAffinity.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// pinThread locks the calling goroutine to its thread and sets the thread's
// affinity to the host CPUs given.
func pinThread(cpus []int) error {
	var set unix.CPUSet
	for _, c := range cpus {
		if c < 0 || c >= len(set)*64 {
			return fmt.Errorf("%w %d: outside the kernel's CPU mask", ErrUnknownCPU, c)
		}
		set.Set(c)
	}
	runtime.LockOSThread()
	if err := retryEINTR(func() error { return unix.SchedSetaffinity(0, &set) }); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("numa: pin thread to CPUs %s: %w", FormatCPUList(cpus), err)
	}
	return nil
}

// UnpinThread undoes [PinThread]: it restores the affinity the process had
// when this package was initialised and unlocks the goroutine from its thread
// (one runtime.UnlockOSThread, matching the lock PinThread took).
func UnpinThread() error {
	err := retryEINTR(func() error { return unix.SchedSetaffinity(0, &initialAffinity) })
	runtime.UnlockOSThread()
	if err != nil {
		return fmt.Errorf("numa: unpin thread: %w", err)
	}
	return nil
}

// Affinity returns the host CPUs that thread or process pid may run on
// (sched_getaffinity), ascending; pid 0 is the calling thread.
func Affinity(pid int) ([]int, error) {
	var set unix.CPUSet
	if err := retryEINTR(func() error { return unix.SchedGetaffinity(pid, &set) }); err != nil {
		return nil, fmt.Errorf("numa: affinity of pid %d: %w", pid, err)
	}
	var cpus []int
	for c := range len(set) * 64 {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// SetAffinity restricts thread or process pid (0: the calling thread) to
// the given host CPUs (sched_setaffinity). It affects only the one thread
// whose id is pid: threads that already exist in a process keep their masks,
// threads created later inherit the mask of their creator.
func SetAffinity(pid int, cpus []int) error {
	var set unix.CPUSet
	for _, c := range cpus {
		if c < 0 || c >= len(set)*64 {
			return fmt.Errorf("%w %d: outside the kernel's CPU mask", ErrUnknownCPU, c)
		}
		set.Set(c)
	}
	if err := retryEINTR(func() error { return unix.SchedSetaffinity(pid, &set) }); err != nil {
		return fmt.Errorf("numa: set affinity of pid %d to CPUs %s: %w", pid, FormatCPUList(cpus), err)
	}
	return nil
}

// nodeMask is a kernel node mask of maskBits bits.
const maskBits = 1024

type nodeMask [maskBits / 64]uint64

// SetMemoryPolicy sets the memory policy of the whole pages that b touches
// (mbind) to mode over the given host NUMA nodes, and moves the pages already
// present that this process alone maps (MPOL_MF_MOVE). [DefaultMode] and
// [Local] take no nodes; [Preferred] takes exactly one. An empty b is a no-op.
//
// The nodes are host node numbers; use [Topology.HostNode] to map the nodes
// of a fake topology.
func SetMemoryPolicy(b []byte, mode Mode, nodes ...int) error {
	if len(b) == 0 {
		return nil
	}
	var mask nodeMask
	for _, n := range nodes {
		if n < 0 || n >= maskBits {
			return fmt.Errorf("%w %d: outside the kernel's node mask", ErrUnknownNode, n)
		}
		mask[n/64] |= 1 << (n % 64)
	}
	switch {
	case (mode == DefaultMode || mode == Local) && len(nodes) != 0:
		return fmt.Errorf("numa: memory policy %v takes no nodes, got %v", mode, nodes)
	case mode == Preferred && len(nodes) != 1:
		return fmt.Errorf("numa: memory policy %v takes one node, got %v", mode, nodes)
	case (mode == Bind || mode == Interleave) && len(nodes) == 0:
		return fmt.Errorf("numa: memory policy %v needs at least one node", mode)
	case mode < DefaultMode || mode > Local:
		return fmt.Errorf("numa: unknown memory policy %v", mode)
	}
	page := uintptr(os.Getpagesize())
	p := unsafe.Pointer(unsafe.SliceData(b))
	off := uintptr(p) & (page - 1)
	start := unsafe.Add(p, -int(off))
	length := (off + uintptr(len(b)) + page - 1) &^ (page - 1)
	maskp, maxnode := &mask, uintptr(maskBits+1) // the kernel reads maxnode-1 bits
	if mode == DefaultMode || mode == Local {
		maskp, maxnode = nil, 0
	}
	err := retryEINTR(func() error {
		_, _, e := unix.Syscall6(unix.SYS_MBIND, uintptr(start), length, uintptr(mode),
			uintptr(unsafe.Pointer(maskp)), maxnode, unix.MPOL_MF_MOVE)
		if e != 0 {
			return e
		}
		return nil
	})
	runtime.KeepAlive(b)
	if err != nil {
		if unsupported(err) {
			err = fmt.Errorf("%w (mbind: %v)", ErrNotSupported, err)
		}
		return fmt.Errorf("numa: set memory policy %v on nodes %v of %d bytes: %w", mode, nodes, len(b), err)
	}
	return nil
}

// MemoryPolicy reads back the memory policy that applies to the first byte
// of b (get_mempolicy with MPOL_F_ADDR): the mode and its host nodes. An
// address without a policy of its own reports [DefaultMode] and no nodes.
func MemoryPolicy(b []byte) (Mode, []int, error) {
	if len(b) == 0 {
		return 0, nil, fmt.Errorf("numa: memory policy of an empty slice")
	}
	var mode int32
	var mask nodeMask
	err := retryEINTR(func() error {
		_, _, e := unix.Syscall6(unix.SYS_GET_MEMPOLICY, uintptr(unsafe.Pointer(&mode)),
			uintptr(unsafe.Pointer(&mask)), maskBits+1, uintptr(unsafe.Pointer(unsafe.SliceData(b))), unix.MPOL_F_ADDR, 0)
		if e != 0 {
			return e
		}
		return nil
	})
	runtime.KeepAlive(b)
	if err != nil {
		return 0, nil, getMempolicyError(err)
	}
	var nodes []int
	for n := range maskBits {
		if mask[n/64]&(1<<(n%64)) != 0 {
			nodes = append(nodes, n)
		}
	}
	return Mode(mode &^ unix.MPOL_MODE_FLAGS), nodes, nil
}

// MemoryNode returns the host NUMA node that holds the first page of b
// (get_mempolicy with MPOL_F_NODE|MPOL_F_ADDR). It first touches the page
// with an atomic add of zero, which faults in a writable page without
// changing its contents, so b must be writable. On a fake topology the result
// is the host node, the image of the fake node under [Topology.HostNode].
func MemoryNode(b []byte) (int, error) {
	if len(b) == 0 {
		return -1, fmt.Errorf("numa: memory node of an empty slice")
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	off := (4 - uintptr(p)%4) % 4
	if off+4 <= uintptr(len(b)) {
		p = unsafe.Add(p, off)
		atomic.AddUint32((*uint32)(p), 0)
	} else {
		_ = *(*byte)(p) // too short for an aligned word: a read fault is the best we can do
	}
	var node int32
	err := retryEINTR(func() error {
		_, _, e := unix.Syscall6(unix.SYS_GET_MEMPOLICY, uintptr(unsafe.Pointer(&node)), 0, 0,
			uintptr(p), unix.MPOL_F_NODE|unix.MPOL_F_ADDR, 0)
		if e != 0 {
			return e
		}
		return nil
	})
	runtime.KeepAlive(b)
	if err != nil {
		return -1, getMempolicyError(err)
	}
	return int(node), nil
}

// unsupported reports whether a memory-policy call failed because the
// system does not offer it: a kernel without NUMA (ENOSYS), or a seccomp
// filter that refuses it (EPERM: Docker's default profile allows the NUMA
// calls only with CAP_SYS_NICE).
func unsupported(err error) bool {
	return errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM)
}

func getMempolicyError(err error) error {
	if unsupported(err) {
		err = fmt.Errorf("%w (get_mempolicy: %v)", ErrNotSupported, err)
	}
	return fmt.Errorf("numa: get_mempolicy: %w", err)
}

func retryEINTR(f func() error) error {
	for {
		err := f()
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
