package collectives

import (
	"errors"
	"testing"

	"github.com/shmcoll/shmcoll/simd"
)

func TestOpApply(t *testing.T) {
	if op, ok := Max.Builtin(); !ok || op != simd.Max {
		t.Errorf("Max.Builtin() = %v, %v", op, ok)
	}
	sub := NewOp("sub", func(dst, src []int32) {
		for i := range dst {
			dst[i] -= src[i]
		}
	}, false)
	if _, ok := sub.Builtin(); ok {
		t.Error("a user operator reports a built-in")
	}
	if _, ok := (Op{}).Builtin(); ok {
		t.Error("the zero Op reports a built-in")
	}
	dst, src := []int32{5, 7}, []int32{1, 2}
	if err := sub.Apply(simd.Int32, simd.AsBytes(dst), simd.AsBytes(src)); err != nil || dst[0] != 4 || dst[1] != 5 {
		t.Errorf("sub: %v, %v (dst is the left operand)", dst, err)
	}
	if err := Sum.Apply(simd.Int32, simd.AsBytes(dst), simd.AsBytes(src)); err != nil || dst[0] != 5 || dst[1] != 7 {
		t.Errorf("sum: %v, %v", dst, err)
	}
	for _, err := range []error{
		sub.Check(simd.Int64),
		Band.Check(simd.Float32),
		sub.Apply(simd.Int32, simd.AsBytes(dst), simd.AsBytes(src[:1])),
		NewOp("boom", func(dst, src []int32) { panic("boom") }, true).Apply(simd.Int32, simd.AsBytes(dst), simd.AsBytes(src)),
	} {
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("got %v, want ErrInvalidArgument", err)
		}
	}
}
