//go:build !linux

package numa

import "fmt"

func notSupported(what string) error {
	return fmt.Errorf("%w: %s needs Linux", ErrNotSupported, what)
}

func pinThread(cpus []int) error { return notSupported("pinning a thread") }

// AllowedCPUs returns the CPUs this process may run on; outside Linux it
// returns an error wrapping [ErrNotSupported].
func AllowedCPUs() ([]int, error) { return nil, notSupported("reading CPU affinity") }

// UnpinThread undoes [PinThread]; outside Linux it returns an error wrapping
// [ErrNotSupported].
func UnpinThread() error { return notSupported("unpinning a thread") }

// Affinity returns the CPUs thread or process pid may run on; outside Linux
// it returns an error wrapping [ErrNotSupported].
func Affinity(pid int) ([]int, error) { return nil, notSupported("reading CPU affinity") }

// SetAffinity restricts thread or process pid to the given CPUs; outside
// Linux it returns an error wrapping [ErrNotSupported].
func SetAffinity(pid int, cpus []int) error { return notSupported("setting CPU affinity") }

// SetMemoryPolicy sets the memory policy of b's pages; outside Linux it
// returns an error wrapping [ErrNotSupported].
func SetMemoryPolicy(b []byte, mode Mode, nodes ...int) error {
	return notSupported("setting a memory policy")
}

// MemoryPolicy reads back the memory policy of b; outside Linux it returns an
// error wrapping [ErrNotSupported].
func MemoryPolicy(b []byte) (Mode, []int, error) {
	return 0, nil, notSupported("reading a memory policy")
}

// MemoryNode returns the NUMA node of b's first page; outside Linux it
// returns an error wrapping [ErrNotSupported].
func MemoryNode(b []byte) (int, error) { return -1, notSupported("reading a page's node") }
