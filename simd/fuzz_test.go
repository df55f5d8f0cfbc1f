package simd

import (
	"fmt"
	"testing"
)

// FuzzKernels compares every implementation with the reference on fuzzer-chosen data,
// type, operator, number of sources, length and offsets:
//
//	go test -fuzz FuzzKernels -fuzztime 1m ./simd
func FuzzKernels(f *testing.F) {
	f.Add(uint8(Float32), uint8(Sum), uint8(2), uint8(0), uint8(3), []byte("0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0123456789ab"))
	f.Add(uint8(BFloat16T), uint8(Max), uint8(9), uint8(5), uint8(1), make([]byte, 600))
	f.Add(uint8(Float16T), uint8(Prod), uint8(3), uint8(1), uint8(2), []byte{0x00, 0x7c, 0x01, 0x7e, 0xff, 0xfb, 0x00, 0x80})
	f.Add(uint8(Float64Int32T), uint8(MinLoc), uint8(2), uint8(8), uint8(0), make([]byte, 64))
	impls := availableImpls()
	f.Fuzz(func(t *testing.T, typ, op, k, offA, offB uint8, data []byte) {
		ty, o := Type(typ%uint8(numTypes)), Op(op%uint8(numOps))
		if !Supports(ty, o) {
			return
		}
		nsrc := int(k%17) + 1
		sz := ty.Size()
		n := len(data) / nsrc / sz * sz
		srcs := make([][]byte, nsrc)
		for j := range srcs {
			srcs[j] = data[j*n : (j+1)*n]
		}
		want := refReduceK(ty, o, srcs)
		offs := make([]int, nsrc+1)
		for j := range offs {
			offs[j] = int(offA+uint8(j)*offB) % 64
		}
		f := form{name: fmt.Sprintf("reducek/k=%d", nsrc), k: nsrc, alias: -1}
		if nsrc == 2 {
			f = forms[int(offB)%4] // reduce, reduce3 and its aliasing forms
		} else if offA%2 == 1 {
			f.alias = 0
		}
		for _, i := range impls {
			kern, _ := lookupImpl(i, ty, o)
			got := run(t, kern, f, srcs, offs)
			if d := firstDiff(ty, got, want); d != "" {
				t.Fatalf("impl=%v %v %v %s n=%d offsets=%v: %s", i, o, ty, f.name, n, offs, d)
			}
		}
	})
}
