package simd

import (
	"math"
	"testing"
)

// f16Value is an independent decoding of a binary16 number.
func f16Value(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e, m := int(h>>10)&0x1f, float64(h&0x3ff)
	switch e {
	case 0x1f:
		if m == 0 {
			return math.Inf(int(sign))
		}
		return math.NaN()
	case 0:
		return sign * math.Ldexp(m, -24)
	}
	return sign * math.Ldexp(1024+m, e-25)
}

func TestFloat16ToFloat32AllValues(t *testing.T) {
	for u := range 1 << 16 {
		h := Float16(u)
		got := h.Float32()
		want := f16Value(uint16(u))
		if math.IsNaN(want) {
			b := math.Float32bits(got)
			if wantBits := uint32(u&0x8000)<<16 | 0x7fc00000 | uint32(u&0x3ff)<<13; b != wantBits {
				t.Fatalf("Float16(%#04x).Float32() = %#08x, want quiet NaN %#08x", u, b, wantBits)
			}
			continue
		}
		if float64(got) != want || math.Signbit(float64(got)) != math.Signbit(want) {
			t.Fatalf("Float16(%#04x).Float32() = %v, want %v", u, got, want)
		}
	}
}

// checkRounding checks a float32 → 16-bit conversion on every 16-bit number, the
// midpoints between neighbours (ties go to the even one) and the float32 numbers next to
// the midpoints (they go to the nearer one).
func checkRounding(t *testing.T, name string, toF32 func(uint16) float32, from func(float32) uint16, maxFinite uint16) {
	t.Helper()
	for u := range uint16(0x8000) {
		for _, sign := range []uint16{0, 0x8000} {
			h := u | sign
			f := toF32(h)
			if f != f {
				continue
			}
			if got := from(f); got != h {
				t.Fatalf("%s(%v) = %#04x, want %#04x", name, f, got, h)
			}
			if u >= maxFinite {
				continue
			}
			lo, hi := f, toF32(h+1)
			mid := float32((float64(lo) + float64(hi)) / 2) // exact: 16-bit formats have < 24 bits
			even := h
			if h&1 == 1 {
				even = h + 1
			}
			if got := from(mid); got != even {
				t.Fatalf("%s(%v) (tie between %#04x and %#04x) = %#04x, want %#04x", name, mid, h, h+1, got, even)
			}
			below := math.Nextafter32(mid, 0)
			above := math.Nextafter32(mid, float32(math.Inf(int(1-2*int(sign>>15)))))
			if got := from(below); got != h {
				t.Fatalf("%s(%v) (just nearer %#04x) = %#04x", name, below, h, got)
			}
			if got := from(above); got != h+1 {
				t.Fatalf("%s(%v) (just nearer %#04x) = %#04x", name, above, h+1, got)
			}
		}
	}
}

func TestFloat16Rounding(t *testing.T) {
	checkRounding(t, "Float16FromFloat32", func(h uint16) float32 { return Float16(h).Float32() },
		func(f float32) uint16 { return uint16(Float16FromFloat32(f)) }, 0x7bff)
	// past the largest finite value: 65504, ties from 65520 up go to infinity
	for _, c := range []struct {
		f    float32
		want uint16
	}{
		{65519.996, 0x7bff}, {65520, 0x7c00}, {1e10, 0x7c00}, {-65520, 0xfc00},
		{float32(math.Inf(1)), 0x7c00}, {float32(math.Inf(-1)), 0xfc00},
		{math.Float32frombits(1), 0}, {math.Float32frombits(0x80000001), 0x8000},
		{math.Float32frombits(0x33000000), 0}, {math.Float32frombits(0x33000001), 1}, // 2^-25: tie to 0
		{math.Float32frombits(0x7f800001), 0x7e00}, {math.Float32frombits(0xffc02000), 0xfe01},
	} {
		if got := Float16FromFloat32(c.f); uint16(got) != c.want {
			t.Errorf("Float16FromFloat32(%v = %#08x) = %#04x, want %#04x", c.f, math.Float32bits(c.f), got, c.want)
		}
	}
}

func TestBFloat16Rounding(t *testing.T) {
	checkRounding(t, "BFloat16FromFloat32", func(h uint16) float32 { return BFloat16(h).Float32() },
		func(f float32) uint16 { return uint16(BFloat16FromFloat32(f)) }, 0x7f7f)
	for _, c := range []struct {
		bits uint32
		want uint16
	}{
		{0x7f7fffff, 0x7f80}, // rounds up to infinity
		{0x7f7f7fff, 0x7f7f},
		{0x7f800001, 0x7fc0}, // signalling NaN: quiet, payload's upper bits
		{0xff812345, 0xffc1},
		{0x00008000, 0x0000}, // subnormal tie to even
		{0x00018000, 0x0002},
	} {
		if got := BFloat16FromFloat32(math.Float32frombits(c.bits)); uint16(got) != c.want {
			t.Errorf("BFloat16FromFloat32(%#08x) = %#04x, want %#04x", c.bits, got, c.want)
		}
	}
}

// TestHalfAllValues runs every 16-bit pattern through every operator of bfloat16 and
// float16 against a spread of right operands, on every implementation: the vector
// paths' widening (VCVTPH2PS, shifts) and rounding (VCVTPS2PH, integer rounding) must
// match the pure-Go conversions on all of them.
func TestHalfAllValues(t *testing.T) {
	const n = 1 << 16
	a := make([]uint16, n)
	for i := range a {
		a[i] = uint16(i)
	}
	rights := []uint16{0, 0x8000, 1, 0x8001, 0x3c00, 0xbc00, 0x3f80, 0xbf80, 0x7c00, 0xfc00,
		0x7f80, 0x7e00, 0x7fc0, 0x0400, 0x0080, 0x3555, 0x4049, 0xc2c8, 0x7bff, 0x7f7f, 0x1234, 0x0001}
	b := make([]uint16, n)
	for _, typ := range []Type{BFloat16T, Float16T} {
		for _, op := range []Op{Sum, Prod, Min, Max} {
			for ri, r := range rights {
				for i := range b {
					b[i] = r ^ uint16(i*ri)&0x8000 // vary the sign too
				}
				want := refReduceK(typ, op, [][]byte{AsBytes(a), AsBytes(b)})
				for _, i := range availableImpls() {
					k, _ := lookupImpl(i, typ, op)
					got := make([]byte, 2*n)
					k.Reduce3(got, AsBytes(a), AsBytes(b))
					if d := firstDiff(typ, got, want); d != "" {
						t.Fatalf("impl=%v %v %v with right operand %#04x: %s", i, op, typ, r, d)
					}
				}
			}
		}
	}
}
