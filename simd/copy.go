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
// store whole lines without reading them first. On the reference machine (Zen 4):
// within one core, with hot caches (BenchmarkCopy), it beats the runtime's memmove
// from 32 KiB (up to 1.6x, at 32 KiB and 4 MiB) and non-temporal stores up to 64 MiB, and
// ties with them at 256 MiB; at 4-16 KiB the two are within 5 % there. Between
// processes, writing data that another core reads next and reading data that
// another core wrote, it wins from 8 KiB (np=2 bcast of 16 KiB 0.78 -> 0.53 µs,
// allgather of 1 MiB 31 -> 24 µs) and mostly from 4 KiB: with the vCPUs on one
// L3, 4 KiB to 8 KiB went 0.80-0.94x for allgather, bcast and reduce_scatter_block
// and 1.06x for reduce; on different dies, 0.69-0.75x (bcast of 4 KiB 1.08 ->
// 0.75 µs, allgather 0.76 -> 0.56). At 2 KiB it gained only on different dies.
// A variable so that benchmarks can move it; set it before use, not concurrently
// with copies.
var StringCopyThreshold = 4 << 10

// CopyLines is [Copy] for a short message that another core polls while it
// is written (up to a few KiB): with AVX-512, one 64-byte store per 64
// bytes (the last one masked), so that each line of a line-aligned dst
// takes one store, where the runtime's memmove makes two to four (16-byte
// stores up to 256 bytes). A line that the reader takes away between two
// stores to it has to be fetched back by the writer, and the stores after
// it wait. np=2, same-L3, interleaved runs: bcast of 512 B 0.140 ->
// 0.120 µs, allgather of 512 B 0.145 -> 0.110, reduce of 256 B 0.161 ->
// 0.141; bcast of 256 B went 0.130 -> 0.120 in one series and 0.111 ->
// 0.120 in another. From 1 KiB to 4 KiB it is within 5 ns of memmove on one
// L3 and 3-17 % faster with the vCPUs on different dies (allgather of 3 KiB,
// 1.5 KiB blocks: 0.63-0.64 -> 0.52-0.53 µs).
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
// this has all of them in flight. np=2 with the vCPUs on different dies,
// a reduction reading the peer's slot: allreduce 2-8 KiB 6-10 % faster,
// reduce 8-16 KiB 15-20 %. Meant for up to a few hundred lines: the core
// holds a few dozen misses in flight, and more wait their turn.
func Prefetch(b []byte) {
	if len(b) > 0 {
		prefetch(b)
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
