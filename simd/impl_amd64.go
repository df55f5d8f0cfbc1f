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

// asmFor returns the vector function of implementation i for (t, op) from the generated
// table, or id 0 when there is none.
func asmFor(i impl, t Type, op Op) (id, gran int) {
	for _, e := range asmKernels {
		if e.impl == i && e.t == t && e.op == op {
			return e.id, e.gran
		}
	}
	return 0, 0
}

type asmKernel struct {
	impl impl
	t    Type
	op   Op
	id   int
	gran int
}
