//go:build amd64 && !noasm && !purego

package simd

import "github.com/shmcoll/shmcoll/internal/cpu"

func implAvailable(i impl) bool {
	switch i {
	case implGeneric:
		return true
	case implAVX2:
		return cpu.X86.HasAVX2 && cpu.X86.HasF16C
	case implAVX512:
		return cpu.X86.HasAVX2 && cpu.X86.HasF16C && cpu.X86.HasAVX512
	}
	return false
}

// copyNonTemporal copies src to dst (equal lengths, not overlapping) with non-temporal
// stores: the head up to dst's vector alignment and the tail with memmove.
func copyNonTemporal(dst, src []byte) bool {
	vb, nt := 64, copyNTAVX512
	switch current {
	case implAVX2:
		vb, nt = 32, copyNTAVX2
	case implGeneric:
		return false
	}
	head := min(int(-uintptrOf(dst))&(vb-1), len(dst))
	copy(dst[:head], src)
	body := (len(dst) - head) &^ (4*vb - 1)
	if body > 0 {
		nt(&dst[head], &src[head], body)
	}
	copy(dst[head+body:], src[head+body:])
	return true
}

//go:noescape
func copyRepMovsb(dst, src *byte, n int)

// copyString copies src to dst (equal lengths, not overlapping) with REP
// MOVSB where the CPU has enhanced REP MOVSB, whose microcode writes whole
// lines without reading them first (read for ownership).
func copyString(dst, src []byte) bool {
	if !cpu.X86.HasERMS || current == implGeneric {
		return false
	}
	copyRepMovsb(&dst[0], &src[0], len(dst))
	return true
}

//go:noescape
func copyLinesAVX512(dst, src *byte, n int)

//go:noescape
func prefetchLines(p *byte, n int)

func prefetch(b []byte) { prefetchLines(&b[0], len(b)) }

//go:noescape
func prefetchwLines(p *byte, n int)

func extFeatures() uint32

// hasPrefetchW: the CPU has PREFETCHW (CPUID 0x80000001 ECX bit 8, PRFCHW);
// where it lacks it the opcode may fault, so PrefetchW does nothing.
var hasPrefetchW = extFeatures()&(1<<8) != 0

func prefetchW(b []byte) {
	if hasPrefetchW {
		prefetchwLines(&b[0], len(b))
	}
}

// copyLines copies src to dst (equal lengths, n > 0) with one 64-byte store
// per 64 bytes, where the AVX-512 path is in use.
func copyLines(dst, src []byte) bool {
	if current != implAVX512 {
		return false
	}
	copyLinesAVX512(&dst[0], &src[0], len(dst))
	return true
}
