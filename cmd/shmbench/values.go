package main

import (
	"fmt"

	"github.com/shmcoll/shmcoll/simd"
)

// values are the benchmark's data: small integers, chosen per operator so
// that every result is exact in the element type whatever the order of
// combination (sums stay below the type's largest exact integer, products
// are powers of two, integer overflow wraps the same in int64 and in the
// type). The reference result is computed in int64 and converted.
type values struct {
	op    simd.Op
	p     int
	limit int64 // inputs are in [0, limit]
}

// exactLimit is the largest integer up to which t represents every integer
// (0: not an integer-valued type shmbench supports).
func exactLimit(t simd.Type) int64 {
	switch t {
	case simd.BFloat16T:
		return 256
	case simd.Float16T:
		return 2048
	case simd.Float32, simd.Complex64:
		return 1 << 24
	case simd.Float64, simd.Complex128:
		return 1 << 53
	case simd.Int8, simd.Int16, simd.Int32, simd.Int64, simd.Uint8, simd.Uint16, simd.Uint32, simd.Uint64:
		return 1 << 62 // integer arithmetic wraps identically in int64 and in t
	}
	return 0
}

func newValues(t simd.Type, op simd.Op, p int) (values, error) {
	lim := exactLimit(t)
	if lim == 0 {
		return values{}, fmt.Errorf("dtype %v: shmbench measures scalar types (pair types need minloc/maxloc data)", t)
	}
	switch op {
	case simd.Sum, simd.Prod, simd.Min, simd.Max, simd.Band, simd.Bor, simd.Bxor, simd.Land, simd.Lor:
	default:
		return values{}, fmt.Errorf("operator %v: shmbench has no reference result for it", op)
	}
	if !simd.Supports(t, op) {
		return values{}, fmt.Errorf("operator %v is not defined for %v", op, t)
	}
	if op == simd.Prod && t == simd.Float16T && p > 56 {
		return values{}, fmt.Errorf("prod on float16 overflows beyond 56 ranks with shmbench's data")
	}
	v := values{op: op, p: p, limit: 100}
	switch op {
	case simd.Sum:
		v.limit = max(1, min(100, lim/int64(p)))
	case simd.Band, simd.Bor, simd.Bxor:
		v.limit = 127
	case simd.Prod, simd.Land, simd.Lor:
		v.limit = 2
	}
	return v, nil
}

// base is element j of rank q's input before any iteration changed it.
func (v values) base(q, j int) int64 {
	switch v.op {
	case simd.Prod: // at most ceil(p/4)+1 factors of two per element
		if (q+j)%4 == 0 {
			return 2
		}
		return 1
	case simd.Land:
		if (q+j)%5 == 0 {
			return 0
		}
		return 1
	case simd.Lor:
		if (3*q+j)%5 == 0 {
			return 1
		}
		return 0
	}
	return int64(q*7+j*3+1) % (v.limit + 1)
}

// at is element j of rank q's input in iteration k, where iteration k
// changes element touch (k < 0: no change).
func (v values) at(q, j, k, touch int) int64 {
	x := v.base(q, j)
	if k < 0 || j != touch {
		return x
	}
	switch v.op {
	case simd.Prod, simd.Land, simd.Lor:
		if q == k%v.p { // one rank flips, keeping products small
			if v.op == simd.Prod {
				return 3 - x
			}
			return 1 - x
		}
		return x
	case simd.Band, simd.Bor, simd.Bxor:
		return x ^ 1<<(k%7)
	}
	return (x + 1 + int64(k%3)) % (v.limit + 1)
}

// combine is the operator on the int64 reference values.
func (v values) combine(a, b int64) int64 {
	switch v.op {
	case simd.Sum:
		return a + b
	case simd.Prod:
		return a * b
	case simd.Min:
		return min(a, b)
	case simd.Max:
		return max(a, b)
	case simd.Band:
		return a & b
	case simd.Bor:
		return a | b
	case simd.Bxor:
		return a ^ b
	case simd.Land:
		return b2i(a != 0 && b != 0)
	case simd.Lor:
		return b2i(a != 0 || b != 0)
	}
	panic("shmbench: no reference for operator " + v.op.String())
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// converter returns the function that makes the element of type T holding
// the integer x (integers wrap as Go conversions do).
func converter[T simd.Element]() func(int64) T {
	var z T
	var f any
	switch any(z).(type) {
	case int8:
		f = func(x int64) int8 { return int8(x) }
	case int16:
		f = func(x int64) int16 { return int16(x) }
	case int32:
		f = func(x int64) int32 { return int32(x) }
	case int64:
		f = func(x int64) int64 { return x }
	case uint8:
		f = func(x int64) uint8 { return uint8(x) }
	case uint16:
		f = func(x int64) uint16 { return uint16(x) }
	case uint32:
		f = func(x int64) uint32 { return uint32(x) }
	case uint64:
		f = func(x int64) uint64 { return uint64(x) }
	case float32:
		f = func(x int64) float32 { return float32(x) }
	case float64:
		f = func(x int64) float64 { return float64(x) }
	case simd.BFloat16:
		f = func(x int64) simd.BFloat16 { return simd.BFloat16FromFloat32(float32(x)) }
	case simd.Float16:
		f = func(x int64) simd.Float16 { return simd.Float16FromFloat32(float32(x)) }
	case complex64:
		f = func(x int64) complex64 { return complex(float32(x), 0) }
	case complex128:
		f = func(x int64) complex128 { return complex(float64(x), 0) }
	default:
		panic(fmt.Sprintf("shmbench: no conversion to %v", simd.TypeOf[T]()))
	}
	return f.(func(int64) T)
}
