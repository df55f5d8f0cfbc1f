package cpu

import (
	"runtime"
	"testing"
)

func TestFeatureTable(t *testing.T) {
	t.Logf("X86 %+v, L1D %d, L2 %d, L3 %d, line %d", X86, CacheL1D, CacheL2, CacheL3, CacheLine)
	if X86.HasAVX512BF16 && !X86.HasAVX512 || X86.HasAVX512FP16 && !X86.HasAVX512 {
		t.Error("a BF16/FP16 feature is reported usable without the AVX-512 base")
	}
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "386" && (X86.HasAVX2 || X86.HasAVX512) {
		t.Errorf("x86 features on %s", runtime.GOARCH)
	}
}
