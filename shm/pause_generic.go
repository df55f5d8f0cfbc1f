//go:build !(amd64 || arm64) || purego || noasm

package shm

import (
	"sync/atomic"
	"unsafe"
)

// pause is the portable spin-wait hint: nothing; the caller's next load is
// the delay.
func pause() {}

// plainPosts: without assembly, posts are sequentially consistent swaps.
const plainPosts = false

func storeRelease(w *atomic.Uint64, v uint64) { w.Store(v) }

func prefetchw(unsafe.Pointer) {}
