//go:build !purego && !noasm && !race

package shm

import (
	"sync/atomic"
	"unsafe"
)

// spin loads w up to n times until it reaches v (true), and after each
// load one byte of every cache line of data (see touch). The loop is in
// assembly on a cache line of its own: a wait's first spins decide how soon
// it sees a post, and a Go loop's timing there changes with where the
// linker happens to place it. Not under the race detector, which does not
// see an assembly load synchronize (spin_generic.go).
func (e *Endpoint) spin(w *atomic.Uint64, v uint64, n int, data []byte) bool {
	return spinUntil(w, v, n, unsafe.SliceData(data), len(data))
}

//go:noescape
func spinUntil(w *atomic.Uint64, v uint64, n int, data *byte, dlen int) bool
