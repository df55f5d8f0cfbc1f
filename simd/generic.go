package simd

import (
	"math"
	"unsafe"
)

// This file is the pure-Go path: one element loop per (operator, type family), always
// built. Each function computes d = a op b element by element, in that operand order;
// d may alias a or b exactly. The vector paths reproduce these loops bit for bit.

type integer interface {
	int8 | int16 | int32 | int64 | uint8 | uint16 | uint32 | uint64
}

type float interface{ float32 | float64 }

// view returns b as a []T (len(b) must be a multiple of the size of T).
func view[T any](b []byte) []T {
	if len(b) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b))/unsafe.Sizeof(z))
}

// two computes d = a op b over whole elements.
type two func(d, a, b []byte)

func sumInt[T integer](d, a, b []byte) {
	dd, aa, bb := view[T](d), view[T](a), view[T](b)
	aa, bb = aa[:len(dd)], bb[:len(dd)]
	for i := range dd {
		dd[i] = aa[i] + bb[i]
	}
}

func prodInt[T integer](d, a, b []byte) {
	dd, aa, bb := view[T](d), view[T](a), view[T](b)
	aa, bb = aa[:len(dd)], bb[:len(dd)]
	for i := range dd {
		dd[i] = aa[i] * bb[i]
	}
}

func minInt[T integer](d, a, b []byte) {
	dd, aa, bb := view[T](d), view[T](a), view[T](b)
	aa, bb = aa[:len(dd)], bb[:len(dd)]
	for i := range dd {
		x, y := aa[i], bb[i]
		if y < x {
			x = y
		}
		dd[i] = x
	}
}

func maxInt[T integer](d, a, b []byte) {
	dd, aa, bb := view[T](d), view[T](a), view[T](b)
	aa, bb = aa[:len(dd)], bb[:len(dd)]
	for i := range dd {
		x, y := aa[i], bb[i]
		if y > x {
			x = y
		}
		dd[i] = x
	}
}

func landInt[T integer](d, a, b []byte) {
	dd, aa, bb := view[T](d), view[T](a), view[T](b)
	aa, bb = aa[:len(dd)], bb[:len(dd)]
	for i := range dd {
		var r T
		if aa[i] != 0 && bb[i] != 0 {
			r = 1
		}
		dd[i] = r
	}
}

func lorInt[T integer](d, a, b []byte) {
	dd, aa, bb := view[T](d), view[T](a), view[T](b)
	aa, bb = aa[:len(dd)], bb[:len(dd)]
	for i := range dd {
		var r T
		if aa[i] != 0 || bb[i] != 0 {
			r = 1
		}
		dd[i] = r
	}
}

// The bitwise operators do not depend on the element type: they run on 64-bit words and
// then bytes.

func band(d, a, b []byte) {
	n := len(d) &^ 7
	dd, aa, bb := view[uint64](d[:n]), view[uint64](a[:n]), view[uint64](b[:n])
	aa, bb = aa[:len(dd)], bb[:len(dd)]
	for i := range dd {
		dd[i] = aa[i] & bb[i]
	}
	for i := n; i < len(d); i++ {
		d[i] = a[i] & b[i]
	}
}

func bor(d, a, b []byte) {
	n := len(d) &^ 7
	dd, aa, bb := view[uint64](d[:n]), view[uint64](a[:n]), view[uint64](b[:n])
	aa, bb = aa[:len(dd)], bb[:len(dd)]
	for i := range dd {
		dd[i] = aa[i] | bb[i]
	}
	for i := n; i < len(d); i++ {
		d[i] = a[i] | b[i]
	}
}

func bxor(d, a, b []byte) {
	n := len(d) &^ 7
	dd, aa, bb := view[uint64](d[:n]), view[uint64](a[:n]), view[uint64](b[:n])
	aa, bb = aa[:len(dd)], bb[:len(dd)]
	for i := range dd {
		dd[i] = aa[i] ^ bb[i]
	}
	for i := n; i < len(d); i++ {
		d[i] = a[i] ^ b[i]
	}
}

// Float helpers. Bits are handled through unsafe so that one generic body serves float32
// and float64; the size test is a constant in each instantiation.

func fbits[T float](x T) uint64 {
	if unsafe.Sizeof(x) == 4 {
		return uint64(*(*uint32)(unsafe.Pointer(&x)))
	}
	return *(*uint64)(unsafe.Pointer(&x))
}

func ffrom[T float](u uint64) T {
	var x T
	if unsafe.Sizeof(x) == 4 {
		*(*uint32)(unsafe.Pointer(&x)) = uint32(u)
	} else {
		*(*uint64)(unsafe.Pointer(&x)) = u
	}
	return x
}

func quietBit[T float]() uint64 {
	var x T
	if unsafe.Sizeof(x) == 4 {
		return 1 << 22
	}
	return 1 << 51
}

// nanResult is the result of an arithmetic operation a op b whose hardware result r is a
// NaN: the first NaN operand, quieted, as x86 SSE/AVX do; r itself (the hardware's default
// NaN) when neither operand is a NaN. Fixing it here keeps the result independent of the
// operand order the compiler picks, and makes arm64 agree with x86 on NaN operands.
func nanResult[T float](a, b, r T) T {
	if a != a {
		return ffrom[T](fbits(a) | quietBit[T]())
	}
	if b != b {
		return ffrom[T](fbits(b) | quietBit[T]())
	}
	return r
}

// The conversions T(...) round each operation on its own: the compiler may not fuse
// them into multiply-adds.

func addF[T float](a, b T) T {
	r := T(a + b)
	if r != r {
		r = nanResult(a, b, r)
	}
	return r
}

func subF[T float](a, b T) T {
	r := T(a - b)
	if r != r {
		r = nanResult(a, b, r)
	}
	return r
}

func mulF[T float](a, b T) T {
	r := T(a * b)
	if r != r {
		r = nanResult(a, b, r)
	}
	return r
}

// minF is the minimum with the package's NaN and signed-zero rules: a NaN operand is the
// result (a first, bit for bit); min(-0, +0) = -0.
func minF[T float](a, b T) T {
	if a < b {
		return a
	}
	if b < a {
		return b
	}
	if a != a {
		return a
	}
	if b != b {
		return b
	}
	return ffrom[T](fbits(a) | fbits(b)) // equal: the same value, or ±0 (then -0)
}

// maxF is the maximum: a NaN operand is the result (a first); max(-0, +0) = +0.
func maxF[T float](a, b T) T {
	if a > b {
		return a
	}
	if b > a {
		return b
	}
	if a != a {
		return a
	}
	if b != b {
		return b
	}
	return ffrom[T](fbits(a) & fbits(b))
}

func sumFloat[T float](d, a, b []byte) {
	dd, aa, bb := view[T](d), view[T](a), view[T](b)
	aa, bb = aa[:len(dd)], bb[:len(dd)]
	for i := range dd {
		r := T(aa[i] + bb[i]) // addF, written out: generic calls do not inline here
		if r != r {
			r = nanResult(aa[i], bb[i], r)
		}
		dd[i] = r
	}
}

func prodFloat[T float](d, a, b []byte) {
	dd, aa, bb := view[T](d), view[T](a), view[T](b)
	aa, bb = aa[:len(dd)], bb[:len(dd)]
	for i := range dd {
		r := T(aa[i] * bb[i])
		if r != r {
			r = nanResult(aa[i], bb[i], r)
		}
		dd[i] = r
	}
}

func minFloat[T float](d, a, b []byte) {
	dd, aa, bb := view[T](d), view[T](a), view[T](b)
	aa, bb = aa[:len(dd)], bb[:len(dd)]
	for i := range dd {
		x, y := aa[i], bb[i]
		switch {
		case x < y:
		case y < x:
			x = y
		default:
			x = minF(x, y) // equal or unordered: the rare cases
		}
		dd[i] = x
	}
}

func maxFloat[T float](d, a, b []byte) {
	dd, aa, bb := view[T](d), view[T](a), view[T](b)
	aa, bb = aa[:len(dd)], bb[:len(dd)]
	for i := range dd {
		x, y := aa[i], bb[i]
		switch {
		case x > y:
		case y > x:
			x = y
		default:
			x = maxF(x, y)
		}
		dd[i] = x
	}
}

// prodComplex is (ar + i ai)(br + i bi) = (ar br - ai bi) + i (ar bi + ai br), each
// operation rounded on its own and with the NaN rule of [Sum], so every architecture
// gives the same bits. Complex sums use sumFloat on the components.
func prodComplex[T float](d, a, b []byte) {
	dd, aa, bb := view[T](d), view[T](a), view[T](b)
	aa, bb = aa[:len(dd)], bb[:len(dd)]
	for i := 0; i+1 < len(dd); i += 2 {
		ar, ai, br, bi := aa[i], aa[i+1], bb[i], bb[i+1]
		dd[i] = subF(mulF(ar, br), mulF(ai, bi))
		dd[i+1] = addF(mulF(ar, bi), mulF(ai, br))
	}
}

// Pairs for minloc and maxloc: the value at offset 0, the index at offset io, elements
// of sz bytes; padding is written as zeros.

type locValue interface {
	int16 | int32 | int64 | float32 | float64
}

// tieValue is the value of a tie a == b: the operands themselves for integers, the
// signed-zero rule of [Min] or [Max] for floats.
func tieValue[V locValue](a, b V, isMax bool) V {
	switch x := any(a).(type) {
	case float32:
		y := any(b).(float32)
		if isMax {
			return any(maxF(x, y)).(V)
		}
		return any(minF(x, y)).(V)
	case float64:
		y := any(b).(float64)
		if isMax {
			return any(maxF(x, y)).(V)
		}
		return any(minF(x, y)).(V)
	}
	return a
}

func locKernel[V locValue, I int32 | int64](isMax bool, io, sz int) two {
	return func(d, a, b []byte) {
		for off := 0; off+sz <= len(d); off += sz {
			av := *(*V)(unsafe.Pointer(&a[off]))
			ai := *(*I)(unsafe.Pointer(&a[off+io]))
			bv := *(*V)(unsafe.Pointer(&b[off]))
			bi := *(*I)(unsafe.Pointer(&b[off+io]))
			v, i := av, ai
			switch {
			case av != av: // NaN in a: a
			case bv != bv:
				v, i = bv, bi
			case av < bv:
				if isMax {
					v, i = bv, bi
				}
			case bv < av:
				if !isMax {
					v, i = bv, bi
				}
			default: // tie: the smaller index, as MPI defines it
				v, i = tieValue(av, bv, isMax), min(ai, bi)
			}
			clear(d[off : off+sz])
			*(*V)(unsafe.Pointer(&d[off])) = v
			*(*I)(unsafe.Pointer(&d[off+io])) = i
		}
	}
}

// bfloat16 and float16: every operator runs in float32 on the widened values, and the
// result is rounded to nearest even once per pass (see [Kernel.ReduceK]).

const halfChunk = 512

func widenBF16(dst []float32, src []byte) {
	s := view[uint16](src)
	s = s[:len(dst)]
	for i := range dst {
		dst[i] = math.Float32frombits(uint32(s[i]) << 16)
	}
}

func widenFP16(dst []float32, src []byte) {
	s := view[Float16](src)
	s = s[:len(dst)]
	for i := range dst {
		dst[i] = s[i].Float32()
	}
}

func narrowBF16(dst []byte, src []float32) {
	d := view[BFloat16](dst)
	src = src[:len(d)]
	for i := range d {
		d[i] = BFloat16FromFloat32(src[i])
	}
}

func narrowFP16(dst []byte, src []float32) {
	d := view[Float16](dst)
	src = src[:len(d)]
	for i := range d {
		d[i] = Float16FromFloat32(src[i])
	}
}

func combineF32(op Op, acc, x []float32) {
	x = x[:len(acc)]
	switch op {
	case Sum:
		for i := range acc {
			acc[i] = addF(acc[i], x[i])
		}
	case Prod:
		for i := range acc {
			acc[i] = mulF(acc[i], x[i])
		}
	case Min:
		for i := range acc {
			acc[i] = minF(acc[i], x[i])
		}
	case Max:
		for i := range acc {
			acc[i] = maxF(acc[i], x[i])
		}
	}
}

// halfPass computes one pass dst = round(s0 op s1 op ... op s(m-1)) for bfloat16
// (bf true) or float16, accumulating in float32.
func halfPass(bf bool, op Op, dst []byte, srcs *[maxK][]byte, m int) {
	var acc, tmp [halfChunk]float32 // direct calls below keep these on the stack
	for off := 0; off < len(dst); off += 2 * halfChunk {
		end := min(off+2*halfChunk, len(dst))
		a := acc[:(end-off)/2]
		t := tmp[:len(a)]
		if bf {
			widenBF16(a, srcs[0][off:end])
		} else {
			widenFP16(a, srcs[0][off:end])
		}
		for j := 1; j < m; j++ {
			if bf {
				widenBF16(t, srcs[j][off:end])
			} else {
				widenFP16(t, srcs[j][off:end])
			}
			combineF32(op, a, t)
		}
		if bf {
			narrowBF16(dst[off:end], a)
		} else {
			narrowFP16(dst[off:end], a)
		}
	}
}

// many computes d = ((s0 op s1) op s2) ... over whole elements of a short vector,
// len(srcs) >= 2; d may be srcs[0] exactly and overlaps no other source. Each element
// is combined across the sources in a register, in source order, with the rounding
// and NaN rule of the two-operand loop: the result is that of the loop run once per
// source, bit for bit, without a call per source.
type many func(d []byte, srcs [][]byte)

// genericKernelK returns the k-source loop of op on t, nil where ReduceK calls the
// two-operand loop once per source instead.
func genericKernelK(t Type, op Op) many {
	if op != Sum {
		return nil
	}
	switch t {
	case Float32:
		return sumKFloat[float32]
	case Float64:
		return sumKFloat[float64]
	case Int32:
		return sumKInt[int32]
	case Int64:
		return sumKInt[int64]
	case Uint32:
		return sumKInt[uint32]
	case Uint64:
		return sumKInt[uint64]
	}
	return nil
}

func sumKFloat[T float](d []byte, srcs [][]byte) {
	dd := view[T](d)
	s0 := view[T](srcs[0])[:len(dd)]
	for i := range dd {
		r := s0[i]
		for _, s := range srcs[1:] {
			b := view[T](s)[i]
			x := T(r + b)
			if x != x {
				x = nanResult(r, b, x)
			}
			r = x
		}
		dd[i] = r
	}
}

func sumKInt[T integer](d []byte, srcs [][]byte) {
	dd := view[T](d)
	s0 := view[T](srcs[0])[:len(dd)]
	for i := range dd {
		r := s0[i]
		for _, s := range srcs[1:] {
			r += view[T](s)[i]
		}
		dd[i] = r
	}
}
