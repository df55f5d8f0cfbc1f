package simd

import (
	"encoding/binary"
	"math"
)

// This file is the test oracle: an element-at-a-time restatement of the semantics in
// doc.go, written independently of generic.go (integers in 64-bit arithmetic truncated
// to size, floats through math and explicit NaN rules).

var le = binary.LittleEndian

func getU(b []byte, size int) uint64 {
	switch size {
	case 1:
		return uint64(b[0])
	case 2:
		return uint64(le.Uint16(b))
	case 4:
		return uint64(le.Uint32(b))
	}
	return le.Uint64(b)
}

func putU(b []byte, size int, v uint64) {
	switch size {
	case 1:
		b[0] = byte(v)
	case 2:
		le.PutUint16(b, uint16(v))
	case 4:
		le.PutUint32(b, uint32(v))
	default:
		le.PutUint64(b, v)
	}
}

func signExt(v uint64, size int) int64 {
	s := 64 - 8*uint(size)
	return int64(v<<s) >> s
}

func isSigned(t Type) bool { return t <= Int64 }

func refInt(t Type, op Op, a, b uint64) uint64 {
	size := t.Size()
	sa, sb := signExt(a, size), signExt(b, size)
	less := a < b
	if isSigned(t) {
		less = sa < sb
	}
	switch op {
	case Sum:
		return a + b
	case Prod:
		return a * b
	case Min:
		if less {
			return a
		}
		return b
	case Max:
		if less {
			return b
		}
		return a
	case Band:
		return a & b
	case Bor:
		return a | b
	case Bxor:
		return a ^ b
	case Land:
		if a != 0 && b != 0 {
			return 1
		}
		return 0
	case Lor:
		if a != 0 || b != 0 {
			return 1
		}
		return 0
	}
	panic("refInt: " + op.String())
}

// refF64 applies op to float64 values a and b, both given and returned as float64 bits.
func refF64(op Op, a, b uint64) uint64 {
	x, y := math.Float64frombits(a), math.Float64frombits(b)
	const quiet = 1 << 51
	switch op {
	case Sum, Prod:
		if math.IsNaN(x) {
			return a | quiet
		}
		if math.IsNaN(y) {
			return b | quiet
		}
		var r float64
		if op == Sum {
			r = x + y
		} else {
			r = x * y
		}
		if math.IsNaN(r) {
			return 0xfff8000000000000 // x86 default NaN
		}
		return math.Float64bits(r)
	case Min, Max:
		if math.IsNaN(x) {
			return a
		}
		if math.IsNaN(y) {
			return b
		}
		if x == y {
			if x == 0 {
				neg := math.Signbit(x) || math.Signbit(y)
				if op == Max {
					neg = math.Signbit(x) && math.Signbit(y)
				}
				return math.Float64bits(math.Copysign(0, map[bool]float64{true: -1, false: 1}[neg]))
			}
			return a
		}
		if (x < y) == (op == Min) {
			return a
		}
		return b
	}
	panic("refF64: " + op.String())
}

// refF32 is refF64 for float32: the arithmetic is done in float64 and rounded, which
// gives the correctly rounded float32 sum and product.
func refF32(op Op, a, b uint32) uint32 {
	x, y := math.Float32frombits(a), math.Float32frombits(b)
	const quiet = 1 << 22
	switch op {
	case Sum, Prod:
		if x != x {
			return a | quiet
		}
		if y != y {
			return b | quiet
		}
		var r float32
		if op == Sum {
			r = float32(float64(x) + float64(y))
		} else {
			r = float32(float64(x) * float64(y))
		}
		if r != r {
			return 0xffc00000
		}
		return math.Float32bits(r)
	default: // Min, Max: NaN operands come back bit for bit
		if x != x {
			return a
		}
		if y != y {
			return b
		}
		r := refF64(op, math.Float64bits(float64(x)), math.Float64bits(float64(y)))
		return math.Float32bits(float32(math.Float64frombits(r)))
	}
}

// refPair computes minloc/maxloc on one pair element.
func refPair(t Type, op Op, d, a, b []byte) {
	var vsize, io int
	var vfloat bool
	switch t {
	case Float32Int32T:
		vsize, io, vfloat = 4, 4, true
	case Float64Int32T:
		vsize, io, vfloat = 8, 8, true
	case Int16Int32T:
		vsize, io = 2, 4
	case Int32Int32T:
		vsize, io = 4, 4
	case Int64Int32T:
		vsize, io = 8, 8
	case Int64Int64T:
		vsize, io = 8, 8
	}
	isize := 4
	if t == Int64Int64T {
		isize = 8
	}
	av, bv := getU(a, vsize), getU(b, vsize)
	ai, bi := signExt(getU(a[io:], isize), isize), signExt(getU(b[io:], isize), isize)
	var v uint64
	var i int64
	if vfloat {
		toF := func(u uint64) float64 {
			if vsize == 4 {
				return float64(math.Float32frombits(uint32(u)))
			}
			return math.Float64frombits(u)
		}
		x, y := toF(av), toF(bv)
		switch {
		case math.IsNaN(x):
			v, i = av, ai
		case math.IsNaN(y):
			v, i = bv, bi
		case x == y:
			mop := Min
			if op == MaxLoc {
				mop = Max
			}
			if vsize == 4 {
				v = uint64(refF32(mop, uint32(av), uint32(bv)))
			} else {
				v = refF64(mop, av, bv)
			}
			i = min(ai, bi)
		case (x < y) == (op == MinLoc):
			v, i = av, ai
		default:
			v, i = bv, bi
		}
	} else {
		x, y := signExt(av, vsize), signExt(bv, vsize)
		switch {
		case x == y:
			v, i = av, min(ai, bi)
		case (x < y) == (op == MinLoc):
			v, i = av, ai
		default:
			v, i = bv, bi
		}
	}
	clear(d[:t.Size()])
	putU(d, vsize, v)
	putU(d[io:], isize, uint64(i))
}

// refCombine computes one element d = a op b for every non-half type.
func refCombine(t Type, op Op, d, a, b []byte) {
	switch {
	case t <= Uint64:
		putU(d, t.Size(), refInt(t, op, getU(a, t.Size()), getU(b, t.Size())))
	case t == Float32:
		le.PutUint32(d, refF32(op, le.Uint32(a), le.Uint32(b)))
	case t == Float64:
		le.PutUint64(d, refF64(op, le.Uint64(a), le.Uint64(b)))
	case t == Complex64 || t == Complex128:
		h := t.Size() / 2
		f := Float32
		if t == Complex128 {
			f = Float64
		}
		if op == Sum {
			refCombine(f, Sum, d, a, b)
			refCombine(f, Sum, d[h:], a[h:], b[h:])
			return
		}
		// (ar + i ai)(br + i bi), each operation rounded, NaN rules of Sum/Prod
		f3 := func(op Op, x, y uint64) uint64 {
			if f == Float32 {
				return uint64(refF32(op, uint32(x), uint32(y)))
			}
			return refF64(op, x, y)
		}
		neg := uint64(1) << (8*h - 1)
		sub := func(x, y uint64) uint64 { // x - y = x + (-y), except that a NaN y keeps its sign
			if isNaNBits(y, h) && !isNaNBits(x, h) {
				return y | quietBits(h)
			}
			return f3(Sum, x, y^neg)
		}
		ar, ai, br, bi := getU(a, h), getU(a[h:], h), getU(b, h), getU(b[h:], h)
		putU(d, h, sub(f3(Prod, ar, br), f3(Prod, ai, bi)))
		putU(d[h:], h, f3(Sum, f3(Prod, ar, bi), f3(Prod, ai, br)))
	case t.IsPair():
		refPair(t, op, d, a, b)
	default:
		panic("refCombine: " + t.String())
	}
}

// refReduceK returns the reference result of ReduceK(srcs) as new memory.
func refReduceK(t Type, op Op, srcs [][]byte) []byte {
	n := len(srcs[0])
	out := make([]byte, n)
	copy(out, srcs[0])
	if len(srcs) == 1 {
		return out
	}
	sz := t.Size()
	if t == BFloat16T || t == Float16T {
		widen := func(u uint16) uint32 {
			if t == BFloat16T {
				return uint32(u) << 16
			}
			return math.Float32bits(Float16(u).Float32())
		}
		narrow := func(u uint32) uint16 {
			if t == BFloat16T {
				return uint16(BFloat16FromFloat32(math.Float32frombits(u)))
			}
			return uint16(Float16FromFloat32(math.Float32frombits(u)))
		}
		for i := 0; i < n; i += 2 {
			acc := widen(le.Uint16(srcs[0][i:]))
			inPass := 1
			for j := 1; j < len(srcs); j++ {
				if inPass == maxK { // a new pass starts from the rounded result
					acc = widen(narrow(acc))
					inPass = 1
				}
				acc = refF32(op, acc, widen(le.Uint16(srcs[j][i:])))
				inPass++
			}
			le.PutUint16(out[i:], narrow(acc))
		}
		return out
	}
	tmp := make([]byte, sz)
	for j := 1; j < len(srcs); j++ {
		for i := 0; i < n; i += sz {
			refCombine(t, op, tmp, out[i:i+sz], srcs[j][i:i+sz])
			copy(out[i:i+sz], tmp)
		}
	}
	return out
}

func isNaNBits(u uint64, size int) bool {
	if size == 4 {
		return u&0x7fffffff > 0x7f800000
	}
	return u&^(1<<63) > 0x7ff0000000000000
}

func quietBits(size int) uint64 {
	if size == 4 {
		return 1 << 22
	}
	return 1 << 51
}
