package simd

import (
	"fmt"
	"unsafe"
)

func uintptrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// Reduce computes dst[i] = dst[i] op src[i] for typed slices of equal length, with the
// kernel [Lookup] returns. The error wraps [ErrUnsupported] when op is not defined for T.
func Reduce[T Element](op Op, dst, src []T) error {
	k, err := Lookup(TypeOf[T](), op)
	if err != nil {
		return err
	}
	if len(dst) != len(src) {
		return fmt.Errorf("simd: Reduce: lengths differ (%d and %d elements)", len(dst), len(src))
	}
	k.Reduce(AsBytes(dst), AsBytes(src))
	return nil
}

// Reduce3 computes dst[i] = a[i] op b[i] for typed slices of equal length; dst may be a
// or b exactly.
func Reduce3[T Element](op Op, dst, a, b []T) error {
	k, err := Lookup(TypeOf[T](), op)
	if err != nil {
		return err
	}
	if len(dst) != len(a) || len(dst) != len(b) {
		return fmt.Errorf("simd: Reduce3: lengths differ (%d, %d and %d elements)", len(dst), len(a), len(b))
	}
	k.Reduce3(AsBytes(dst), AsBytes(a), AsBytes(b))
	return nil
}

// ReduceK computes dst = srcs[0] op srcs[1] op ... left to right (see [Kernel.ReduceK]).
// It allocates a slice header per source; collectives on hot paths use [Kernel.ReduceK].
func ReduceK[T Element](op Op, dst []T, srcs ...[]T) error {
	k, err := Lookup(TypeOf[T](), op)
	if err != nil {
		return err
	}
	if len(srcs) == 0 {
		return fmt.Errorf("simd: ReduceK: no sources")
	}
	bs := make([][]byte, len(srcs))
	for i, s := range srcs {
		if len(s) != len(dst) {
			return fmt.Errorf("simd: ReduceK: source %d has %d elements, dst %d", i, len(s), len(dst))
		}
		bs[i] = AsBytes(s)
	}
	k.ReduceK(AsBytes(dst), bs)
	return nil
}
