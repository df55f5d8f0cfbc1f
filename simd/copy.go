package simd

// Copy copies min(len(dst), len(src)) bytes from src to dst, like the built-in copy
// (overlapping slices included). Large copies between non-overlapping buffers use
// non-temporal stores on the vector paths when that is faster on this machine (see
// [NonTemporalThreshold]); everything else is the runtime's memmove.
func Copy(dst, src []byte) {
	n := min(len(dst), len(src))
	if n >= NonTemporalThreshold && current != implGeneric && !overlap(dst[:n], src[:n]) &&
		copyNonTemporal(dst[:n], src[:n]) {
		return
	}
	copy(dst, src)
}

// NonTemporalThreshold is the size in bytes from which [Copy] streams around the caches.
// Non-temporal stores only pay when the destination would not stay in cache anyway, and
// they evict it, so the default is well beyond the last-level cache. A variable so that
// benchmarks and tuners can move it; set it before use, not concurrently with Copy.
var NonTemporalThreshold = 64 << 20

func overlap(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa, pb := uintptrOf(a), uintptrOf(b)
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}
