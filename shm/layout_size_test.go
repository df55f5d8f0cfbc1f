package shm

import (
	"testing"
	"unsafe"
)

// TestEndpointSize: an Endpoint stays at most 512 bytes. Larger heap
// objects that hold pointers carry an 8-byte header in front, which moves
// every field off the cache-line offsets the hot ones (counters, spin
// budget, posts) have now; where ranks share CPUs, each line a wait
// touches costs every call. Keep rarely used state behind a pointer.
func TestEndpointSize(t *testing.T) {
	if n := unsafe.Sizeof(Endpoint{}); n > 512 {
		t.Errorf("Endpoint is %d bytes, more than 512", n)
	}
}
