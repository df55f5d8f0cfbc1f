package simd

import (
	"testing"
	"unsafe"
)

type weight float32

type tick int

type bits uint16

// halfAlias is defined on BFloat16: its underlying type is uint16, so it
// is a uint16 element, not a bfloat16 one.
type halfAlias BFloat16

func TestTypeOfKinds(t *testing.T) {
	intType := [9]Type{4: Int32, 8: Int64}[unsafe.Sizeof(int(0))]
	uintType := [9]Type{4: Uint32, 8: Uint64}[unsafe.Sizeof(uintptr(0))]
	for _, c := range []struct {
		got, want Type
		name      string
	}{
		{TypeOf[int](), intType, "int"},
		{TypeOf[uint](), uintType, "uint"},
		{TypeOf[uintptr](), uintType, "uintptr"},
		{TypeOf[weight](), Float32, "weight"},
		{TypeOf[tick](), intType, "tick"},
		{TypeOf[bits](), Uint16, "bits"},
		{TypeOf[uint16](), Uint16, "uint16"},
		{TypeOf[BFloat16](), BFloat16T, "BFloat16"},
		{TypeOf[Float16](), Float16T, "Float16"},
		{TypeOf[halfAlias](), Uint16, "halfAlias"},
		{TypeOf[Int64Int64](), Int64Int64T, "Int64Int64"},
		{TypeOf[Float32Int32](), Float32Int32T, "Float32Int32"},
	} {
		if c.got != c.want {
			t.Errorf("TypeOf[%s] = %v, want %v", c.name, c.got, c.want)
		}
	}
}

// TestDefinedTypeKernels: the typed helpers run the kernel of the sized
// type on a defined type: float rounding for weight, wrap-around for tick,
// bfloat16 rounding for BFloat16 and integer addition for bits.
func TestDefinedTypeKernels(t *testing.T) {
	w := []weight{1e8, 0.5}
	if err := Reduce(Sum, w, []weight{1, 0.25}); err != nil || w[0] != 1e8 || w[1] != 0.75 {
		t.Errorf("weight sum: %v %v", w, err)
	}
	k := []tick{-3, 4}
	if err := Reduce(Prod, k, []tick{5, -6}); err != nil || k[0] != -15 || k[1] != -24 {
		t.Errorf("tick prod: %v %v", k, err)
	}
	one := BFloat16FromFloat32(1)
	h := []BFloat16{one}
	if err := Reduce(Sum, h, []BFloat16{one}); err != nil || h[0].Float32() != 2 {
		t.Errorf("bfloat16 sum: %v %v", h, err)
	}
	b := []bits{bits(one)}
	if err := Reduce(Sum, b, []bits{bits(one)}); err != nil || b[0] != 2*bits(one) {
		t.Errorf("bits sum: %v %v (integer addition of the bit patterns)", b, err)
	}
	if err := Reduce(Band, w, w); err == nil {
		t.Error("band on weight: no error")
	}
}
