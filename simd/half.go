package simd

import "math"

// BFloat16 is a bfloat16 number: the upper 16 bits of an IEEE float32.
type BFloat16 uint16

// Float16 is an IEEE 754 binary16 number.
type Float16 uint16

// BFloat16FromFloat32 rounds f to the nearest bfloat16, ties to even. Overflow gives an
// infinity, subnormals are kept (no flush to zero), and a NaN stays a NaN with its upper
// payload bits and the quiet bit set.
func BFloat16FromFloat32(f float32) BFloat16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return BFloat16(b>>16 | 0x40)
	}
	b += 0x7fff + (b>>16)&1
	return BFloat16(b >> 16)
}

// Float32 returns h as a float32 (exact).
func (h BFloat16) Float32() float32 { return math.Float32frombits(uint32(h) << 16) }

// Float16FromFloat32 rounds f to the nearest float16, ties to even, as the x86
// VCVTPS2PH instruction does with rounding control 0: values from 65520 up become
// infinities, results below 2^-14 become subnormals or zeros (never flushed), and a
// NaN becomes a quiet NaN that keeps the upper 9 bits of its payload.
func Float16FromFloat32(f float32) Float16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	a := b & 0x7fffffff
	switch {
	case a > 0x7f800000: // NaN
		return Float16(sign | 0x7e00 | uint16(a>>13)&0x3ff)
	case a >= 0x477ff000: // rounds to 65536 or more: infinity
		return Float16(sign | 0x7c00)
	case a >= 0x38800000: // normal result (2^-14 and up)
		a -= 112 << 23 // rebias the exponent from 127 to 15
		a += 0xfff + (a>>13)&1
		return Float16(sign | uint16(a>>13))
	case a < 0x33000000: // below 2^-25: rounds to zero
		return Float16(sign)
	default: // subnormal result: units of 2^-24
		e := a >> 23
		m := a&0x7fffff | 0x800000
		shift := 126 - e // 14..24
		r := m >> shift
		rem := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || rem == half && r&1 == 1 {
			r++
		}
		return Float16(sign | uint16(r))
	}
}

// Float32 returns h as a float32: exact for numbers; a NaN becomes a quiet float32 NaN
// with h's payload in its upper bits (as the x86 VCVTPH2PS instruction does).
func (h Float16) Float32() float32 {
	sign := uint32(h&0x8000) << 16
	e := uint32(h>>10) & 0x1f
	m := uint32(h & 0x3ff)
	switch e {
	case 0x1f:
		if m == 0 {
			return math.Float32frombits(sign | 0x7f800000)
		}
		return math.Float32frombits(sign | 0x7fc00000 | m<<13)
	case 0:
		if m == 0 {
			return math.Float32frombits(sign)
		}
		e = 113
		for m&0x400 == 0 {
			m <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (m&0x3ff)<<13)
	default:
		return math.Float32frombits(sign | (e+112)<<23 | m<<13)
	}
}
