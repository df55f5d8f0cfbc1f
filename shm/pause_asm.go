//go:build (amd64 || arm64) && !purego && !noasm

package shm

// pause tells the CPU that this is a spin-wait loop (PAUSE on amd64, YIELD
// on arm64): it saves power and frees the core's resources for its SMT
// sibling.
//
//go:noescape
func pause()
