//go:build amd64 && !noasm && !purego

package simd

var asmKernels = []asmKernel{}

func callAsm(id int, dst *byte, srcs *[maxK]*byte, k, n int) {
	panic("simd: unknown vector kernel")
}

func copyNonTemporal(dst, src []byte) bool { return false }
