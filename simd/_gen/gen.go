// Command gen writes simd's amd64 vector kernels: kernels_amd64.s, their Go declarations
// kernels_amd64_stub.go, and the dispatch table dispatch_amd64.go. Run it with
// `go generate` in simd/ (see gen_amd64.go there).
//
// Every kernel has the signature func(dst *byte, srcs *[8]*byte, k, n int) and computes
// dst = srcs[0] op srcs[1] op ... op srcs[k-1] over n bytes (n a multiple of the kernel's
// granule, the input bytes of one vector), in the operand order and with the NaN,
// signed-zero and rounding rules of simd's pure-Go loops. The loop loads the first
// source into accumulators, folds the other sources in one after another, and stores:
// one pass over memory for up to 8 sources; k == 2 takes a loop of its own without the
// loop over sources. Each kernel also has a variant (name suffix NT) that stores with
// non-temporal hints into a vector-aligned dst and ends with SFENCE.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"log"
	"os"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"
)

var dispatch = flag.String("dispatch", "dispatch_amd64.go", "file for the Go dispatch table")

// isa is a vector instruction set: AVX2 with 32-byte vectors, AVX-512 with 64.
type isa struct {
	name string // as in Go identifiers: AVX2, AVX512
	impl string // simd's impl constant
	vb   int    // vector bytes
}

var (
	avx2   = isa{"AVX2", "implAVX2", 32}
	avx512 = isa{"AVX512", "implAVX512", 64}
)

func (is isa) z() bool { return is.vb == 64 }

// vec allocates a full-width vector register.
func (is isa) vec() VecVirtual {
	if is.z() {
		return ZMM()
	}
	return YMM()
}

// conv says how elements are loaded and stored: as they are, or bfloat16/float16 widened
// to float32 in the accumulators.
type conv int

const (
	plain conv = iota
	bf16
	fp16
)

// kernel is one generated function.
type kernel struct {
	name  string
	isa   isa
	types []string // simd Type constants the kernel serves
	op    string   // simd Op constant
	conv  conv
	// setup broadcasts constants before the loop; combine emits acc = acc op x, with x a
	// register or (when memOK) a memory operand.
	setup   func()
	combine func(acc VecVirtual, x Op)
	memOK   bool
}

// inBytes is the number of source bytes one accumulator holds.
func (k *kernel) inBytes() int {
	if k.conv != plain {
		return k.isa.vb / 2
	}
	return k.isa.vb
}

var kernels []*kernel

func add(k *kernel) { kernels = append(kernels, k) }

// broadcast32 returns a vector register with v in every 32-bit element.
func broadcast32(is isa, v uint32) VecVirtual {
	r := GP32()
	MOVL(U32(v), r)
	x := XMM()
	MOVD(r, x)
	z := is.vec()
	VPBROADCASTD(x, z)
	return z
}

// broadcast64 returns a vector register with v in every 64-bit element.
func broadcast64(is isa, v uint64) VecVirtual {
	r := GP64()
	MOVQ(U64(v), r)
	x := XMM()
	MOVQ(r, x)
	z := is.vec()
	VPBROADCASTQ(x, z)
	return z
}

// v3 adapts a three-operand instruction to the variadic form.
func v3(f func(a, b, c Op)) func(...Op) { return func(o ...Op) { f(o[0], o[1], o[2]) } }

// simple is an operator that is one instruction acc = acc op x (x may be in memory).
func simple(is isa, name string, types []string, op string, inst func(...Op)) {
	add(&kernel{
		name: name + is.name, isa: is, types: types, op: op, memOK: true,
		combine: func(acc VecVirtual, x Op) { inst(x, acc, acc) },
	})
}

// floatMinMax emits acc = min(acc, x) (or max) with simd's rules: a NaN operand wins (acc
// first), ties give acc|x for min and acc&x for max (so -0 beats +0 in min).
func floatMinMax(is isa, isMax bool, f64 bool) func(acc VecVirtual, x Op) {
	minmax, cmp := VMINPS, VCMPPS
	or := VPORD
	if is.z() && f64 {
		or = VPORQ
	}
	if !is.z() {
		or = v3(VPOR)
	}
	blend := VBLENDVPS
	mov := VMOVAPS
	if f64 {
		minmax, cmp, blend, mov = VMINPD, VCMPPD, VBLENDVPD, VMOVAPD
	}
	if isMax {
		minmax = VMAXPS
		or = VPANDD
		if f64 {
			minmax = VMAXPD
			or = VPANDQ
		}
		if !is.z() {
			or = v3(VPAND)
		}
	}
	return func(acc VecVirtual, xo Op) {
		x := xo.(VecVirtual)
		if is.z() {
			// t = x < acc ? x : acc (acc also when either is NaN or they are equal)
			t := is.vec()
			minmax(acc, x, t)
			keq, kx, k := K(), K(), K()
			cmp(Imm(0), x, t, keq) // t == x (ordered): take t|x, the tie rule
			or(x, t, keq, t)
			cmp(Imm(3), x, x, kx)        // x is NaN
			cmp(Imm(7), acc, acc, kx, k) // ... and acc is not: take x
			mov(x, k, t)
			mov(t, acc)
			return
		}
		t, eq, o, xn, an := is.vec(), is.vec(), is.vec(), is.vec(), is.vec()
		minmax(acc, x, t)
		cmp(Imm(0), x, t, eq)
		or(x, t, o)
		blend(eq, o, t, t)
		cmp(Imm(3), x, x, xn)
		cmp(Imm(3), acc, acc, an)
		VPANDN(xn, an, xn) // x NaN and acc not
		blend(xn, x, t, acc)
	}
}

// int64MinMaxAVX2 emulates VPMIN/MAX[SU]Q, which AVX2 lacks, with compares and blends.
func int64MinMaxAVX2(isMax, unsigned bool) (setup func(), combine func(acc VecVirtual, x Op)) {
	var bias VecVirtual
	setup = func() {
		if unsigned {
			bias = broadcast64(avx2, 1<<63)
		}
	}
	combine = func(acc VecVirtual, xo Op) {
		x := xo.(VecVirtual)
		a, b := acc, x
		if unsigned {
			a, b = YMM(), YMM()
			VPXOR(bias, acc, a)
			VPXOR(bias, x, b)
		}
		gt := YMM()
		if isMax {
			VPCMPGTQ(a, b, gt) // x > acc
		} else {
			VPCMPGTQ(b, a, gt) // acc > x
		}
		VBLENDVPD(gt, x, acc, acc)
	}
	return
}

func intKernels(is isa) {
	types := []string{"Int8", "Int16", "Int32", "Int64", "Uint8", "Uint16", "Uint32", "Uint64"}
	short := []string{"8", "16", "32", "64"}
	sum := []func(...Op){VPADDB, VPADDW, VPADDD, VPADDQ}
	for i, s := range short {
		simple(is, "sumInt"+s, []string{types[i], types[i+4]}, "Sum", sum[i])
	}
	simple(is, "prodInt16", []string{"Int16", "Uint16"}, "Prod", VPMULLW)
	simple(is, "prodInt32", []string{"Int32", "Uint32"}, "Prod", VPMULLD)
	if is.z() {
		simple(is, "prodInt64", []string{"Int64", "Uint64"}, "Prod", VPMULLQ)
	}
	mins := []func(...Op){VPMINSB, VPMINSW, VPMINSD, VPMINSQ}
	maxs := []func(...Op){VPMAXSB, VPMAXSW, VPMAXSD, VPMAXSQ}
	minu := []func(...Op){VPMINUB, VPMINUW, VPMINUD, VPMINUQ}
	maxu := []func(...Op){VPMAXUB, VPMAXUW, VPMAXUD, VPMAXUQ}
	for i, s := range short {
		if i == 3 && !is.z() {
			for _, u := range []bool{false, true} {
				for _, mx := range []bool{false, true} {
					setup, combine := int64MinMaxAVX2(mx, u)
					name, t, op := "minInt64", "Int64", "Min"
					if u {
						name, t = "minUint64", "Uint64"
					}
					if mx {
						name, op = "max"+name[3:], "Max"
					}
					add(&kernel{name: name + is.name, isa: is, types: []string{t}, op: op, setup: setup, combine: combine})
				}
			}
			continue
		}
		simple(is, "minInt"+s, []string{types[i]}, "Min", mins[i])
		simple(is, "maxInt"+s, []string{types[i]}, "Max", maxs[i])
		simple(is, "minUint"+s, []string{types[i+4]}, "Min", minu[i])
		simple(is, "maxUint"+s, []string{types[i+4]}, "Max", maxu[i])
	}
	prodInt8(is)
	if !is.z() {
		prodInt64AVX2()
	}
	logicalKernels(is)
	and, or, xor := v3(VPAND), v3(VPOR), v3(VPXOR)
	if is.z() {
		and, or, xor = VPANDQ, VPORQ, VPXORQ
	}
	simple(is, "band", types, "Band", and)
	simple(is, "bor", types, "Bor", or)
	simple(is, "bxor", types, "Bxor", xor)
}

// prodInt8 multiplies bytes as words: the low byte of a 16-bit product depends only on
// the low bytes of the factors, so even bytes come from one VPMULLW and odd bytes from a
// second on the operands shifted right by 8.
func prodInt8(is isa) {
	var mask VecVirtual
	and, or := v3(VPAND), v3(VPOR)
	if is.z() {
		and, or = VPANDQ, VPORQ
	}
	add(&kernel{name: "prodInt8" + is.name, isa: is, types: []string{"Int8", "Uint8"}, op: "Prod",
		setup: func() { mask = broadcast32(is, 0x00ff00ff) },
		combine: func(acc VecVirtual, xo Op) {
			x := xo.(VecVirtual)
			even, ah, xh := is.vec(), is.vec(), is.vec()
			VPMULLW(x, acc, even)
			VPSRLW(Imm(8), acc, ah)
			VPSRLW(Imm(8), x, xh)
			VPMULLW(xh, ah, ah)
			VPSLLW(Imm(8), ah, ah)
			and(mask, even, even)
			or(ah, even, acc)
		}})
}

// prodInt64AVX2 multiplies 64-bit lanes modulo 2^64 from 32-bit products (AVX2 has no
// VPMULLQ): lo·lo + (hi(a)·lo(x) + lo(a)·hi(x)) << 32.
func prodInt64AVX2() {
	add(&kernel{name: "prodInt64AVX2", isa: avx2, types: []string{"Int64", "Uint64"}, op: "Prod",
		combine: func(acc VecVirtual, xo Op) {
			x := xo.(VecVirtual)
			ah, xh := YMM(), YMM()
			VPSRLQ(Imm(32), acc, ah)
			VPSRLQ(Imm(32), x, xh)
			VPMULUDQ(x, ah, ah)
			VPMULUDQ(xh, acc, xh)
			VPADDQ(xh, ah, ah)
			VPSLLQ(Imm(32), ah, ah)
			VPMULUDQ(x, acc, acc)
			VPADDQ(ah, acc, acc)
		}})
}

// logicalKernels generates land and lor: 1 where the logical result is true, else 0.
func logicalKernels(is isa) {
	sizes := []struct {
		s      string
		types  []string
		ones   uint64
		eqz    func(...Op) // AVX2 compare for equality
		testm  func(...Op) // AVX-512: mask of non-zero lanes
		testnm func(...Op) // AVX-512: mask of zero lanes
		m2v    func(k, v Op)
	}{
		{"8", []string{"Int8", "Uint8"}, 0x0101010101010101, VPCMPEQB, VPTESTMB, VPTESTNMB, VPMOVM2B},
		{"16", []string{"Int16", "Uint16"}, 0x0001000100010001, VPCMPEQW, VPTESTMW, VPTESTNMW, VPMOVM2W},
		{"32", []string{"Int32", "Uint32"}, 0x0000000100000001, VPCMPEQD, VPTESTMD, VPTESTNMD, VPMOVM2D},
		{"64", []string{"Int64", "Uint64"}, 1, VPCMPEQQ, VPTESTMQ, VPTESTNMQ, VPMOVM2Q},
	}
	for _, sz := range sizes {
		for _, isOr := range []bool{false, true} {
			var ones, zero VecVirtual
			name, op := "landInt", "Land"
			if isOr {
				name, op = "lorInt", "Lor"
			}
			add(&kernel{name: name + sz.s + is.name, isa: is, types: sz.types, op: op,
				setup: func() {
					ones = broadcast64(is, sz.ones)
					if !is.z() {
						zero = YMM()
						VPXOR(zero, zero, zero)
					}
				},
				combine: func(acc VecVirtual, xo Op) {
					x := xo.(VecVirtual)
					if is.z() {
						k1, k2 := K(), K()
						if isOr { // both zero -> 0, else 1
							sz.testnm(acc, acc, k1)
							sz.testnm(x, x, k1, k2)
							v := ZMM()
							sz.m2v(k2, v)
							VPANDNQ(ones, v, acc)
						} else { // both non-zero -> 1
							sz.testm(acc, acc, k1)
							sz.testm(x, x, k1, k2)
							sz.m2v(k2, acc)
							VPANDQ(ones, acc, acc)
						}
						return
					}
					az, xz := YMM(), YMM()
					sz.eqz(zero, acc, az)
					sz.eqz(zero, x, xz)
					if isOr {
						VPAND(az, xz, az)
					} else {
						VPOR(az, xz, az)
					}
					VPANDN(ones, az, acc)
				}})
		}
	}
}

// pairType describes a minloc/maxloc pair layout for the vector kernels.
type pairType struct {
	name         string
	q            bool // qword lanes
	float        bool
	idx64, pad32 bool
	value16      bool // int16 value in the low half of a dword, padding above
}

var pairTypes = []pairType{
	{"Int16Int32", false, false, false, false, true},
	{"Float32Int32", false, true, false, false, false},
	{"Int32Int32", false, false, false, false, false},
	{"Float64Int32", true, true, false, true, false},
	{"Int64Int32", true, false, false, true, false},
	{"Int64Int64", true, false, true, false, false},
}

// pairKernels generates minloc and maxloc for the pair types whose value and index
// each fill a lane (AVX-512 only): dword lanes for Float32Int32, Int32Int32 and
// Int16Int32 (value compared shifted left by 16, padding zeroed), qword lanes for Float64Int32, Int64Int32 (index in the low dword, padding zeroed) and
// Int64Int64. Values sit in even lanes, indices in odd lanes; decisions are made on the
// even bits of the compare masks and copied to the odd bits.
func pairKernels() {
	for _, pt := range pairTypes {
		for _, isMax := range []bool{false, true} {
			var padMask VecVirtual
			var evenK OpmaskVirtual
			name, op := "minloc", "MinLoc"
			if isMax {
				name, op = "maxloc", "MaxLoc"
			}
			kor, kand, kandn, kshl := KORW, KANDW, KANDNW, KSHIFTLW
			fcmp, icmp, mov, or, and := VCMPPS, VPCMPD, VMOVDQA32, VPORD, VPANDD
			if pt.q {
				kor, kand, kandn, kshl = KORB, KANDB, KANDNB, KSHIFTLB
				fcmp, icmp, mov, or, and = VCMPPD, VPCMPQ, VMOVDQA64, VPORQ, VPANDQ
			}
			add(&kernel{name: name + pt.name + "AVX512", isa: avx512, types: []string{pt.name + "T"}, op: op,
				setup: func() {
					r := GP32()
					if pt.q {
						MOVL(U32(0x55), r)
					} else {
						MOVL(U32(0x5555), r)
					}
					evenK = K()
					KMOVW(r, evenK)
					if pt.value16 {
						padMask = broadcast64(avx512, 0xffffffff0000ffff)
					}
					if pt.pad32 {
						g := GP64()
						MOVQ(U64(0xffffffff), g)
						x := XMM()
						MOVQ(g, x)
						// [all ones, 0x00000000ffffffff] repeated: keep values, clear pads
						ones := ZMM()
						VPTERNLOGQ(Imm(0xff), ones, ones, ones)
						lo := ZMM()
						VPBROADCASTQ(x, lo)
						padMask = ZMM()
						VPUNPCKLQDQ(lo, ones, padMask)
					}
				},
				combine: func(acc VecVirtual, xo Op) {
					x := xo.(VecVirtual)
					take, k2, k3 := K(), K(), K()
					// take = x better than acc (and acc not NaN), or x NaN and acc not
					if pt.float {
						pred := 1 // LT_OS: x < acc
						if isMax {
							pred = 14 // GT_OS: x > acc
						}
						fcmp(Imm(uint64(pred)), acc, x, take)
						fcmp(Imm(3), x, x, k2) // x NaN
						kor(take, k2, take)
						fcmp(Imm(3), acc, acc, k2) // acc NaN
						kandn(take, k2, take)
					} else {
						pred := 1 // LT
						if isMax {
							pred = 6 // NLE: x > acc
						}
						a, b := acc, x
						if pt.value16 { // compare value<<16: the padding drops out
							a, b = ZMM(), ZMM()
							VPSLLD(Imm(16), acc, a)
							VPSLLD(Imm(16), x, b)
						}
						icmp(Imm(uint64(pred)), a, b, take)
						icmp(Imm(0), a, b, k3)
					}
					kand(evenK, take, take)
					kshl(Imm(1), take, k2)
					kor(k2, take, take)
					// ties: value acc|x (min) or acc&x (max), the smaller index
					if pt.float {
						fcmp(Imm(0), acc, x, k2) // EQ_OQ
					} else {
						KMOVW(k3, k2) // the equality computed above
					}
					kand(evenK, k2, k2)
					kshl(Imm(1), k2, k3)
					kor(k3, k2, k2)
					tv := ZMM()
					if pt.idx64 {
						VPMINSQ(x, acc, tv)
					} else {
						VPMINSD(x, acc, tv)
					}
					if isMax {
						and(x, acc, evenK, tv)
					} else {
						or(x, acc, evenK, tv)
					}
					mov(x, take, acc)
					mov(tv, k2, acc)
					if pt.pad32 || pt.value16 {
						VPANDQ(padMask, acc, acc)
					}
				}})
		}
	}
}

// pairKernelsAVX2 is pairKernels with vector masks and blends instead of mask registers:
// decisions on even lanes, copied to odd lanes by a shift.
func pairKernelsAVX2() {
	for _, pt := range pairTypes {
		for _, isMax := range []bool{false, true} {
			var evenMask, padMask VecVirtual
			name, op := "minloc", "MinLoc"
			if isMax {
				name, op = "maxloc", "MaxLoc"
			}
			spread := func(v VecVirtual) { // copy even lanes into the odd lanes above them
				sh := YMM()
				if pt.q {
					VPSLLDQ(Imm(8), v, sh)
				} else {
					VPSLLQ(Imm(32), v, sh)
				}
				VPOR(sh, v, v)
			}
			add(&kernel{name: name + pt.name + "AVX2", isa: avx2, types: []string{pt.name + "T"}, op: op,
				setup: func() {
					ones, zero := YMM(), YMM()
					VPCMPEQD(ones, ones, ones)
					VPXOR(zero, zero, zero)
					evenMask = YMM()
					if pt.q {
						VPBLENDD(Imm(0xcc), zero, ones, evenMask) // odd qwords zero
					} else {
						VPBLENDD(Imm(0xaa), zero, ones, evenMask) // odd dwords zero
					}
					switch {
					case pt.pad32:
						padMask = YMM()
						VPBLENDD(Imm(0x88), zero, ones, padMask) // the dword above each index
					case pt.value16:
						padMask = broadcast64(avx2, 0xffffffff0000ffff)
					}
				},
				combine: func(acc VecVirtual, xo Op) {
					x := xo.(VecVirtual)
					take, eq := YMM(), YMM()
					if pt.float {
						cmp := VCMPPS
						if pt.q {
							cmp = VCMPPD
						}
						pred := 1 // LT_OS: x < acc
						if isMax {
							pred = 14 // GT_OS
						}
						cmp(Imm(uint64(pred)), acc, x, take)
						n := YMM()
						cmp(Imm(3), x, x, n) // x NaN
						VPOR(n, take, take)
						cmp(Imm(3), acc, acc, n) // acc NaN: keep acc
						VPANDN(take, n, take)
						cmp(Imm(0), acc, x, eq)
					} else {
						gt, eqf := VPCMPGTD, VPCMPEQD
						if pt.q {
							gt, eqf = VPCMPGTQ, VPCMPEQQ
						}
						a, b := acc, x
						if pt.value16 {
							a, b = YMM(), YMM()
							VPSLLD(Imm(16), acc, a)
							VPSLLD(Imm(16), x, b)
						}
						if isMax {
							gt(a, b, take) // x > acc
						} else {
							gt(b, a, take) // acc > x
						}
						eqf(a, b, eq)
					}
					VPAND(evenMask, take, take)
					spread(take)
					VPAND(evenMask, eq, eq)
					spread(eq)
					// tie: value acc|x (min) or acc&x (max) in even lanes, smaller index in odd
					tv, v := YMM(), YMM()
					if pt.idx64 {
						g := YMM()
						VPCMPGTQ(x, acc, g) // acc > x
						VBLENDVPD(g, x, acc, tv)
					} else {
						VPMINSD(x, acc, tv)
					}
					if isMax {
						VPAND(x, acc, v)
					} else {
						VPOR(x, acc, v)
					}
					if pt.q {
						VPBLENDD(Imm(0x33), v, tv, tv)
					} else {
						VPBLENDD(Imm(0x55), v, tv, tv)
					}
					VPBLENDVB(take, x, acc, acc)
					VPBLENDVB(eq, tv, acc, acc)
					if pt.pad32 || pt.value16 {
						VPAND(padMask, acc, acc)
					}
				}})
		}
	}
}

// complexProd generates complex64/complex128 products with the pure-Go loop's order:
// re = ar·br − ai·bi, im = ar·bi + ai·br (first operands first, for the NaN rule).
func complexProd(is isa, c128 bool) {
	var kOdd OpmaskVirtual
	name, t := "prodComplex64", "Complex64"
	mul, sub, addp := VMULPS, VSUBPS, VADDPS
	if c128 {
		name, t = "prodComplex128", "Complex128"
		mul, sub, addp = VMULPD, VSUBPD, VADDPD
	}
	add(&kernel{name: name + is.name, isa: is, types: []string{t}, op: "Prod",
		setup: func() {
			if is.z() {
				r := GP32()
				if c128 {
					MOVL(U32(0xaa), r)
				} else {
					MOVL(U32(0xaaaa), r)
				}
				kOdd = K()
				KMOVW(r, kOdd)
			}
		},
		combine: func(acc VecVirtual, xo Op) {
			x := xo.(VecVirtual)
			bre, bim, aswap, t1, t2 := is.vec(), is.vec(), is.vec(), is.vec(), is.vec()
			if c128 {
				VMOVDDUP(x, bre)
				VPERMILPD(Imm(0xff), x, bim)
				VPERMILPD(Imm(0x55), acc, aswap)
			} else {
				VMOVSLDUP(x, bre)
				VMOVSHDUP(x, bim)
				VPERMILPS(Imm(0xb1), acc, aswap)
			}
			mul(bre, acc, t1)   // [ar·br, ai·br]
			mul(bim, aswap, t2) // [ai·bi, ar·bi]
			if is.z() {
				sub(t2, t1, acc)        // ar·br − ai·bi (kept in even lanes)
				addp(t1, t2, kOdd, acc) // odd lanes: ar·bi + ai·br
				return
			}
			{
				r := is.vec()
				sub(t2, t1, r)   // even lanes: ar·br − ai·bi
				addp(t1, t2, t2) // odd lanes: ar·bi + ai·br
				if c128 {
					VBLENDPD(Imm(0xa), t2, r, acc)
				} else {
					VBLENDPS(Imm(0xaa), t2, r, acc)
				}
			}
		}})
}

func floatKernels(is isa) {
	simple(is, "sumFloat32", []string{"Float32", "Complex64"}, "Sum", VADDPS)
	simple(is, "sumFloat64", []string{"Float64", "Complex128"}, "Sum", VADDPD)
	simple(is, "prodFloat32", []string{"Float32"}, "Prod", VMULPS)
	simple(is, "prodFloat64", []string{"Float64"}, "Prod", VMULPD)
	complexProd(is, false)
	complexProd(is, true)
	for _, f64 := range []bool{false, true} {
		t, s := "Float32", "Float32"
		if f64 {
			t, s = "Float64", "Float64"
		}
		add(&kernel{name: "min" + s + is.name, isa: is, types: []string{t}, op: "Min", combine: floatMinMax(is, false, f64)})
		add(&kernel{name: "max" + s + is.name, isa: is, types: []string{t}, op: "Max", combine: floatMinMax(is, true, f64)})
	}
	for _, c := range []conv{bf16, fp16} {
		t, s := "BFloat16T", "BFloat16"
		if c == fp16 {
			t, s = "Float16T", "Float16"
		}
		add(&kernel{name: "sum" + s + is.name, isa: is, types: []string{t}, op: "Sum", conv: c,
			combine: func(acc VecVirtual, x Op) { VADDPS(x, acc, acc) }})
		add(&kernel{name: "prod" + s + is.name, isa: is, types: []string{t}, op: "Prod", conv: c,
			combine: func(acc VecVirtual, x Op) { VMULPS(x, acc, acc) }})
		add(&kernel{name: "min" + s + is.name, isa: is, types: []string{t}, op: "Min", conv: c, combine: floatMinMax(is, false, false)})
		add(&kernel{name: "max" + s + is.name, isa: is, types: []string{t}, op: "Max", conv: c, combine: floatMinMax(is, true, false)})
	}
}

// Constants of the bfloat16 rounding, set up per function.
var bfOne, bf7fff, bfQuiet VecVirtual

// load returns the accumulator-format value of the vector at m.
func (k *kernel) load(m Mem) VecVirtual {
	r := k.isa.vec()
	switch k.conv {
	case plain:
		if k.isa.z() {
			VMOVDQU64(m, r)
		} else {
			VMOVDQU(m, r)
		}
	case bf16:
		VPMOVZXWD(m, r)
		VPSLLD(Imm(16), r, r)
	case fp16:
		VCVTPH2PS(m, r)
	}
	return r
}

// operand returns the vector at m as an operand for combine: m itself when the
// instruction can take memory, else a register.
func (k *kernel) operand(m Mem) Op {
	if k.memOK && k.conv == plain {
		return m
	}
	return k.load(m)
}

// half allocates a register of half the vector width.
func (k *kernel) half() VecVirtual {
	if k.isa.z() {
		return YMM()
	}
	return XMM()
}

// store writes acc to m, rounding to bfloat16/float16 to nearest even.
func (k *kernel) store(acc VecVirtual, m Mem, nt bool) {
	z := k.isa.z()
	switch k.conv {
	case plain:
		if nt {
			VMOVNTDQ(acc, m)
		} else if z {
			VMOVDQU64(acc, m)
		} else {
			VMOVDQU(acc, m)
		}
	case fp16:
		if nt {
			h := k.half()
			VCVTPS2PH(Imm(0), acc, h)
			VMOVNTDQ(h, m)
			return
		}
		VCVTPS2PH(Imm(0), acc, m)
	case bf16:
		// t = acc + 0x7fff + ((acc >> 16) & 1); a NaN becomes acc | 0x400000 (quiet)
		t := k.isa.vec()
		VPSRLD(Imm(16), acc, t)
		if z {
			VPANDD(bfOne, t, t)
		} else {
			VPAND(bfOne, t, t)
		}
		VPADDD(bf7fff, t, t)
		VPADDD(acc, t, t)
		if z {
			kn := K()
			VCMPPS(Imm(3), acc, acc, kn)
			VPORD(bfQuiet, acc, kn, t)
			VPSRLD(Imm(16), t, t)
			if nt {
				h := YMM()
				VPMOVDW(t, h)
				VMOVNTDQ(h, m)
				return
			}
			VPMOVDW(t, m)
			return
		}
		n, q := YMM(), YMM()
		VCMPPS(Imm(3), acc, acc, n)
		VPOR(bfQuiet, acc, q)
		VBLENDVPS(n, q, t, t)
		VPSRLD(Imm(16), t, t)
		hi := XMM()
		VEXTRACTI128(Imm(1), t, hi)
		VPACKUSDW(hi, t.AsX(), hi)
		if nt {
			VMOVNTDQ(hi, m)
		} else {
			VMOVDQU(hi, m)
		}
	}
}

// unroll is the number of vectors per step of the k-source loop, unroll2 of the
// two-source loop.
const unroll, unroll2 = 4, 8

// generate writes the kernel; with nt, a variant that stores with non-temporal hints
// (dst aligned to the vector size) and ends with SFENCE, so that a later release store
// still orders after the data.
func (k *kernel) generate(nt bool) {
	name := k.name
	if nt {
		name += "NT"
	}
	TEXT(name, NOSPLIT, "func(dst *byte, srcs *[8]*byte, k, n int)")
	Pragma("noescape")
	Doc(fmt.Sprintf("%s computes dst = srcs[0] %s ... %s srcs[k-1] over n bytes of %v (n a multiple of %d).",
		name, k.op, k.op, k.types, k.inBytes()))
	if nt {
		Doc(fmt.Sprintf("It stores with non-temporal hints: dst must be aligned to %d bytes.", k.isa.vb))
	}
	dst := Load(Param("dst"), GP64())
	srcs := Load(Param("srcs"), GP64())
	kk := Load(Param("k"), GP64())
	n := Load(Param("n"), GP64())
	off := GP64()
	XORQ(off, off)
	if k.setup != nil {
		k.setup()
	}
	if k.conv == bf16 {
		bfOne = broadcast32(k.isa, 1)
		bf7fff = broadcast32(k.isa, 0x7fff)
		bfQuiet = broadcast32(k.isa, 0x400000)
	}
	ib := k.inBytes()
	body := func(u int, tag string) {
		p := GP64()
		MOVQ(Mem{Base: srcs}, p)
		accs := make([]VecVirtual, u)
		for i := range accs {
			accs[i] = k.load(Mem{Base: p, Index: off, Scale: 1, Disp: i * ib})
		}
		j := GP64()
		MOVQ(U64(1), j)
		Label(name + "_src" + tag)
		CMPQ(j, kk)
		JAE(LabelRef(name + "_store" + tag))
		MOVQ(Mem{Base: srcs, Index: j, Scale: 8}, p)
		for i := range accs {
			k.combine(accs[i], k.operand(Mem{Base: p, Index: off, Scale: 1, Disp: i * ib}))
		}
		INCQ(j)
		JMP(LabelRef(name + "_src" + tag))
		Label(name + "_store" + tag)
		for i := range accs {
			k.store(accs[i], Mem{Base: dst, Index: off, Scale: 1, Disp: i * ib}, nt)
		}
	}
	// Two sources (Reduce, Reduce3): a loop without the loop over sources, unrolled
	// further; its remainder goes to the one-vector loop below.
	CMPQ(kk, Imm(2))
	JNE(LabelRef(name + "_blocks"))
	p0, p1 := GP64(), GP64()
	MOVQ(Mem{Base: srcs}, p0)
	MOVQ(Mem{Base: srcs, Disp: 8}, p1)
	Label(name + "_pairs")
	CMPQ(n, U32(unroll2*ib))
	JB(LabelRef(name + "_vectors"))
	for i := range unroll2 {
		acc := k.load(Mem{Base: p0, Index: off, Scale: 1, Disp: i * ib})
		k.combine(acc, k.operand(Mem{Base: p1, Index: off, Scale: 1, Disp: i * ib}))
		k.store(acc, Mem{Base: dst, Index: off, Scale: 1, Disp: i * ib}, nt)
	}
	ADDQ(U32(unroll2*ib), off)
	SUBQ(U32(unroll2*ib), n)
	JMP(LabelRef(name + "_pairs"))

	Label(name + "_blocks")
	CMPQ(n, U32(unroll*ib))
	JB(LabelRef(name + "_vectors"))
	body(unroll, "U")
	ADDQ(U32(unroll*ib), off)
	SUBQ(U32(unroll*ib), n)
	JMP(LabelRef(name + "_blocks"))
	Label(name + "_vectors")
	CMPQ(n, U32(ib))
	JB(LabelRef(name + "_done"))
	body(1, "1")
	ADDQ(U32(ib), off)
	SUBQ(U32(ib), n)
	JMP(LabelRef(name + "_vectors"))
	Label(name + "_done")
	if nt {
		SFENCE()
	}
	VZEROUPPER()
	RET()
}

// copyNT generates a non-temporal copy: n bytes (a multiple of 4 vectors) from src to
// dst, dst aligned to the vector size.
func copyNT(is isa) {
	name := "copyNT" + is.name
	TEXT(name, NOSPLIT, "func(dst, src *byte, n int)")
	Pragma("noescape")
	Doc(name+" copies n bytes from src to dst with non-temporal stores; dst is aligned to", fmt.Sprintf("%d bytes and n is a multiple of %d.", is.vb, unroll*is.vb))
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("n"), GP64())
	Label(name + "_loop")
	CMPQ(n, U32(unroll*is.vb))
	JB(LabelRef(name + "_done"))
	r := make([]VecVirtual, unroll)
	for i := range r {
		r[i] = is.vec()
		if is.z() {
			VMOVDQU64(Mem{Base: src, Disp: i * is.vb}, r[i])
		} else {
			VMOVDQU(Mem{Base: src, Disp: i * is.vb}, r[i])
		}
	}
	for i := range r {
		VMOVNTDQ(r[i], Mem{Base: dst, Disp: i * is.vb})
	}
	ADDQ(U32(unroll*is.vb), src)
	ADDQ(U32(unroll*is.vb), dst)
	SUBQ(U32(unroll*is.vb), n)
	JMP(LabelRef(name + "_loop"))
	Label(name + "_done")
	SFENCE()
	VZEROUPPER()
	RET()
}

func main() {
	flag.Parse()
	ConstraintExpr("amd64,!noasm,!purego")
	for _, is := range []isa{avx2, avx512} {
		intKernels(is)
		floatKernels(is)
	}
	pairKernels()
	pairKernelsAVX2()
	for _, k := range kernels {
		k.generate(false)
		k.generate(true)
	}
	copyNT(avx2)
	copyNT(avx512)
	Generate()
	writeDispatch()
}

func writeDispatch() {
	var b bytes.Buffer
	fmt.Fprintln(&b, "// Code generated by command: go run gen.go. DO NOT EDIT.")
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "//go:build amd64 && !noasm && !purego")
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "package simd")
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "// asmKernels lists every vector kernel by implementation, type and operator.")
	fmt.Fprintln(&b, "var asmKernels = []asmKernel{")
	// ids: kernel i is function 2i+1, its non-temporal variant 2i+2
	for i, k := range kernels {
		for _, t := range k.types {
			fmt.Fprintf(&b, "{%s, %s, %s, %d, %d, %d},\n", k.isa.impl, t, k.op, 2*i+1, 2*i+2, k.inBytes())
		}
	}
	fmt.Fprintln(&b, "}")
	fmt.Fprintln(&b)
	fmt.Fprintln(&b, "// callAsm calls vector function id (see asmKernels).")
	fmt.Fprintln(&b, "func callAsm(id int, dst *byte, srcs *[maxK]*byte, k, n int) {")
	fmt.Fprintln(&b, "switch id {")
	for i, k := range kernels {
		fmt.Fprintf(&b, "case %d:\n%s(dst, srcs, k, n)\n", 2*i+1, k.name)
		fmt.Fprintf(&b, "case %d:\n%sNT(dst, srcs, k, n)\n", 2*i+2, k.name)
	}
	fmt.Fprintln(&b, "default:\npanic(\"simd: unknown vector kernel\")")
	fmt.Fprintln(&b, "}\n}")
	src, err := format.Source(b.Bytes())
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*dispatch, src, 0o644); err != nil {
		log.Fatal(err)
	}
}
