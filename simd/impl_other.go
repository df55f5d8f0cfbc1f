//go:build !amd64 || noasm || purego

package simd

// Without assembly only the pure-Go path exists.

func implAvailable(i impl) bool { return i == implGeneric }

var asmKernels []asmKernel

func callAsm(id int, dst *byte, srcs *[maxK]*byte, k, n int) {
	panic("simd: no vector kernels in this build")
}

func copyNonTemporal(dst, src []byte) bool { return false }
func copyString(dst, src []byte) bool      { return false }
func copyLines(dst, src []byte) bool       { return false }
func prefetch(b []byte)                    {}
func prefetchW(b []byte)                   {}
