//go:build !amd64 || purego || noasm || race

package shm

import "sync/atomic"

// spin loads w up to n times until it reaches v (true), touching data
// after each load.
func (e *Endpoint) spin(w *atomic.Uint64, v uint64, n int, data []byte) bool {
	for range n {
		if w.Load() >= v {
			return true
		}
		e.touch(data)
	}
	return false
}
