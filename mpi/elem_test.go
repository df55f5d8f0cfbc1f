package mpi

import (
	"testing"
	"unsafe"
)

type meters float64

type tally uint16

func TestTypeOfKinds(t *testing.T) {
	intType := map[uintptr]Datatype{4: Int32, 8: Int64}[unsafe.Sizeof(int(0))]
	uintType := map[uintptr]Datatype{4: Uint32, 8: Uint64}[unsafe.Sizeof(uintptr(0))]
	for _, c := range []struct {
		got, want Datatype
		name      string
	}{
		{TypeOf[int](), intType, "int"},
		{TypeOf[uint](), uintType, "uint"},
		{TypeOf[uintptr](), uintType, "uintptr"},
		{TypeOf[meters](), Float64, "meters"},
		{TypeOf[tally](), Uint16, "tally"},
		{TypeOf[int8](), Int8, "int8"},
		{TypeOf[complex64](), Complex64, "complex64"},
		{TypeOf[complex128](), Complex128, "complex128"},
	} {
		if c.got != c.want {
			t.Errorf("TypeOf[%s] = %v, want %v", c.name, c.got, c.want)
		}
	}
}
