//go:build !linux

package shm

import "fmt"

// Outside Linux there is no process_vm_readv: cross-memory attach is
// available between goroutine ranks only.

func vmCopy(pid int, local []byte, remote []Remote, write bool) (Remote, error) {
	return Remote{}, fmt.Errorf("%w: process_vm_readv", ErrNotSupported)
}

func allowPtrace() {}

func cmaThread() int { return 0 }

func collapse([]byte) error { return ErrNotSupported }
