package simd

// Copy copies min(len(dst), len(src)) bytes from src to dst, like the built-in copy
// (overlapping slices included). Copies of [StringCopyThreshold] bytes or more between
// non-overlapping buffers use the CPU's string copy where it has enhanced REP MOVSB;
// without it, copies from [NonTemporalThreshold] use non-temporal stores on the vector
// paths. Everything else is the runtime's memmove.
func Copy(dst, src []byte) {
	// Small enough to inline: a call would add a few ns to every short
	// copy in the collectives' critical paths.
	if n := len(src); n >= StringCopyThreshold || n >= NonTemporalThreshold {
		copyLarge(dst, src)
		return
	}
	copy(dst, src)
}

// copyLarge is Copy past its short path: dst may be the shorter.
func copyLarge(dst, src []byte) {
	n := min(len(dst), len(src))
	if n > 0 && !overlap(dst[:n], src[:n]) {
		if n >= StringCopyThreshold && copyString(dst[:n], src[:n]) {
			return
		}
		if n >= NonTemporalThreshold && current != implGeneric && copyNonTemporal(dst[:n], src[:n]) {
			return
		}
	}
	copy(dst, src)
}

// StringCopyThreshold is the size in bytes from which [Copy] uses the CPU's string
// copy (REP MOVSB) where the CPU has enhanced REP MOVSB (ERMS), whose microcode can
// store whole lines without reading them first. Within one core, with hot caches,
// it beats the runtime's memmove only from tens of KiB; the threshold is lower
// because between processes, writing data that another core reads next and
// reading data that another core wrote, it wins from a few KiB in most
// collectives, and most when the cores sit on different dies (simd/BENCH.md has
// the figures). A variable so that benchmarks can move it; set it before use, not
// concurrently with copies.
var StringCopyThreshold = 4 << 10

// CopyLines is [Copy] for a short message that another core polls while it
// is written (up to a few KiB): with AVX-512, one 64-byte store per 64
// bytes (the last one masked), so that each line of a line-aligned dst
// takes one store, where the runtime's memmove makes two to four (16-byte
// stores up to 256 bytes). A line that the reader takes away between two
// stores to it has to be fetched back by the writer, and the stores after
// it wait. Its gain is largest for messages of a few hundred bytes, and
// with the cores on different dies.
func CopyLines(dst, src []byte) {
	n := min(len(dst), len(src))
	if n > 0 && !overlap(dst[:n], src[:n]) && copyLines(dst[:n], src[:n]) {
		return
	}
	copy(dst, src)
}

// Prefetch asks for every cache line of b at once (PREFETCHT0; nothing
// without assembly). For data another core has just written and this one
// reads next, a few KiB: the loads of a reduction that reads it ask for one
// line after another as they reach it, and the prefetcher ramps up, while
// this has all of them in flight; it pays most when the writer sits on
// another die. Meant for up to a few hundred lines: the core
// holds a few dozen misses in flight, and more wait their turn.
func Prefetch(b []byte) {
	if len(b) > 0 {
		prefetch(b)
	}
}

// PrefetchW asks for every cache line of b for writing at once (PREFETCHW;
// nothing without assembly), ahead of stores into lines that another core
// holds, having read them: each store must first take the line away from
// that core, and the stores drain in order, so without it these transfers
// follow one another, and whatever is stored after the lines (the post
// that tells the reader they are ready) waits for all of them. Meant, like
// [Prefetch], for up to a few hundred lines.
func PrefetchW(b []byte) {
	if len(b) > 0 {
		prefetchW(b)
	}
}

// CopyNT is [Copy] with non-temporal stores whatever the size, where the
// vector path has them and the buffers do not overlap: for data that
// another core reads next, which then comes from memory or the shared
// cache instead of the writer's private cache.
func CopyNT(dst, src []byte) {
	n := min(len(dst), len(src))
	if n > 0 && current != implGeneric && !overlap(dst[:n], src[:n]) && copyNonTemporal(dst[:n], src[:n]) {
		return
	}
	copy(dst, src)
}

// NonTemporalThreshold is the size in bytes from which [Copy] and the kernels' vector
// paths store around the caches (non-temporal stores, then SFENCE, so stores published
// afterwards with a release still order after the data). They only pay when the
// destination would not stay in cache anyway, and they evict it; the kernels use them
// only when dst is not also a source. The default, 16 MiB, is where they won on the
// reference machine (32 MiB L3) for Copy, Reduce3 and ReduceK (see BenchmarkNonTemporal
// and BenchmarkCopy). A variable so that benchmarks and tuners can move it; set it before
// use, not concurrently with kernels.
var NonTemporalThreshold = 16 << 20

func overlap(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa, pb := uintptrOf(a), uintptrOf(b)
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}
