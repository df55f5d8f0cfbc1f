//go:build (amd64 || arm64) && !purego && !noasm

package shm

import (
	"sync/atomic"
	"unsafe"
)

// pause tells the CPU that this is a spin-wait loop (PAUSE on amd64, YIELD
// on arm64): it saves power and frees the core's resources for its SMT
// sibling.
//
//go:noescape
func pause()

// plainPosts: storeRelease does not wait for the counter's line.
const plainPosts = true

// storeRelease stores v in w with release order only (MOV on amd64, STLR
// on arm64): the poster goes on while its store travels, where the
// sequentially consistent store of sync/atomic (XCHG) waits for the line.
// A load after it may be performed before it (no store-load order); Post
// and the futex sleep cope with that (see Post).
//
//go:noescape
func storeRelease(w *atomic.Uint64, v uint64)

// prefetchw asks for the line at p in the state for writing (PREFETCHW on
// amd64, PRFM PSTL1KEEP on arm64), without ordering anything.
//
//go:noescape
func prefetchw(p unsafe.Pointer)
