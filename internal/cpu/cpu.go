// Package cpu is shmcoll's table of CPU features, read once from CPUID at start-up
// (github.com/klauspost/cpuid/v2), so that packages choose their code paths from one
// place and tests can see what the machine offers.
package cpu

import "github.com/klauspost/cpuid/v2"

// X86 holds the x86 features shmcoll's kernels use. All fields are false on other
// architectures.
var X86 struct {
	HasAVX2       bool // AVX2 and FMA, with OS support for YMM state
	HasF16C       bool // VCVTPH2PS / VCVTPS2PH
	HasAVX512     bool // AVX-512 F, BW, VL and DQ, with OS support for ZMM state
	HasAVX512BF16 bool // AVX512_BF16 (needs HasAVX512 to be usable)
	HasAVX512FP16 bool
	HasERMS       bool // enhanced REP MOVSB: the string copy moves whole lines
}

// CacheL1D, CacheL2 and CacheL3 are the data cache sizes in bytes per core (L3: per
// package or group), or -1 when unknown. CacheLine is the line size in bytes.
var CacheL1D, CacheL2, CacheL3, CacheLine int

func init() {
	c := &cpuid.CPU
	X86.HasAVX2 = c.Supports(cpuid.AVX, cpuid.AVX2, cpuid.FMA3)
	X86.HasF16C = c.Has(cpuid.F16C)
	X86.HasAVX512 = c.Supports(cpuid.AVX512F, cpuid.AVX512BW, cpuid.AVX512VL, cpuid.AVX512DQ)
	X86.HasAVX512BF16 = X86.HasAVX512 && c.Has(cpuid.AVX512BF16)
	X86.HasAVX512FP16 = X86.HasAVX512 && c.Has(cpuid.AVX512FP16)
	X86.HasERMS = c.Has(cpuid.ERMS)
	CacheL1D, CacheL2, CacheL3, CacheLine = c.Cache.L1D, c.Cache.L2, c.Cache.L3, c.CacheLine
}
