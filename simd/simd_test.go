package simd

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"
)

const guard = 64

var longMode = os.Getenv("SHMCOLL_LONG") == "1"

// availableImpls lists every implementation this machine and build can run.
func availableImpls() []impl {
	var is []impl
	for i := range numImpls {
		if implAvailable(i) {
			is = append(is, i)
		}
	}
	return is
}

// buffer is a slice at offset off inside a larger allocation whose other bytes hold a
// guard pattern, so that a kernel that writes outside its slice is caught.
type buffer struct {
	all []byte
	off int
	n   int
}

func newBuffer(n, off int) *buffer {
	all := make([]byte, n+off+2*guard)
	for i := range all {
		all[i] = byte(0xa5 ^ i)
	}
	return &buffer{all: all, off: guard + off, n: n}
}

func (b *buffer) bytes() []byte { return b.all[b.off : b.off+b.n : b.off+b.n] }

func (b *buffer) checkGuard(t *testing.T, what string) {
	t.Helper()
	for i, v := range b.all {
		if (i < b.off || i >= b.off+b.n) && v != byte(0xa5^i) {
			t.Fatalf("%s: guard byte %d (slice at %d..%d) overwritten: %#x", what, i, b.off, b.off+b.n, v)
		}
	}
}

// Special values for the float types: NaNs (quiet and signalling, both signs, payloads),
// infinities, signed zeros, subnormals, extremes.
var (
	special32 = []uint32{
		0x7fc00000, 0xffc00000, 0x7fa00001, 0xff800123, 0x7fc12345, // NaNs
		0x7f800000, 0xff800000, 0, 0x80000000, // ±Inf, ±0
		1, 0x80000001, 0x007fffff, 0x00400000, 0x80400000, // subnormals
		0x00800000, 0x7f7fffff, 0xff7fffff, 0x3f800000, 0xbf800000, // min normal, max, ±1
		0x3f800001, 0x4b800000, 0x33800000, 0x477ff000, 0x477fe000, 0x38800000, 0x387fc000,
	}
	special64 = []uint64{
		0x7ff8000000000000, 0xfff8000000000000, 0x7ff4000000000001, 0xfff0000000000123, 0x7ff8123456789abc,
		0x7ff0000000000000, 0xfff0000000000000, 0, 0x8000000000000000,
		1, 0x8000000000000001, 0x000fffffffffffff, 0x0010000000000000, 0x7fefffffffffffff,
		0x3ff0000000000000, 0xbff0000000000000, 0x3ff0000000000001,
	}
	special16 = []uint16{ // for bfloat16 and float16 alike
		0x7fc0, 0xffc0, 0x7f81, 0x7e00, 0xfe01, 0x7c01, 0x7d00, // NaNs of one or the other
		0x7f80, 0xff80, 0x7c00, 0xfc00, 0, 0x8000, // infinities, zeros
		1, 0x8001, 0x03ff, 0x0400, 0x007f, 0x0080, 0x7bff, 0xfbff, 0x7f7f, 0x3c00, 0x3f80, 0x4380, 0x3c01,
	}
)

func fillFloat32(rng *rand.Rand, b []byte) {
	for i := 0; i+4 <= len(b); i += 4 {
		var u uint32
		switch rng.IntN(8) {
		case 0, 1:
			u = special32[rng.IntN(len(special32))]
		case 2:
			u = rng.Uint32()
		default:
			u = math.Float32bits(float32(rng.NormFloat64() * 100))
		}
		le.PutUint32(b[i:], u)
	}
}

func fillFloat64(rng *rand.Rand, b []byte) {
	for i := 0; i+8 <= len(b); i += 8 {
		var u uint64
		switch rng.IntN(8) {
		case 0, 1:
			u = special64[rng.IntN(len(special64))]
		case 2:
			u = rng.Uint64()
		default:
			u = math.Float64bits(rng.NormFloat64() * 100)
		}
		le.PutUint64(b[i:], u)
	}
}

func fillHalf(rng *rand.Rand, t Type, b []byte) {
	for i := 0; i+2 <= len(b); i += 2 {
		var u uint16
		switch rng.IntN(8) {
		case 0, 1:
			u = special16[rng.IntN(len(special16))]
		case 2:
			u = uint16(rng.Uint32())
		default: // numbers of similar magnitude, so that sums round, often to a tie
			if t == BFloat16T {
				u = uint16(rng.IntN(2))<<15 | uint16(125+rng.IntN(5))<<7 | uint16(rng.IntN(128))
			} else {
				u = uint16(rng.IntN(2))<<15 | uint16(13+rng.IntN(5))<<10 | uint16(rng.IntN(1024))
			}
		}
		le.PutUint16(b[i:], u)
	}
}

func fillInt(rng *rand.Rand, size int, b []byte) {
	for i := 0; i+size <= len(b); i += size {
		var u uint64
		switch rng.IntN(8) {
		case 0:
			u = 0
		case 1:
			u = uint64(rng.IntN(3)) - 1
		case 2:
			u = 1 << (8*uint(size) - 1) // the most negative
		default:
			u = rng.Uint64()
		}
		putU(b[i:], size, u)
	}
}

// fill writes random elements of type t, rich in the values that break kernels.
func fill(rng *rand.Rand, t Type, b []byte) {
	switch {
	case t <= Uint64:
		fillInt(rng, t.Size(), b)
	case t == Float32 || t == Complex64:
		fillFloat32(rng, b)
	case t == Float64 || t == Complex128:
		fillFloat64(rng, b)
	case t == BFloat16T || t == Float16T:
		fillHalf(rng, t, b)
	default: // pairs: few distinct values and indices, so that ties happen
		sz := t.Size()
		for i := 0; i+sz <= len(b); i += sz {
			e := b[i : i+sz]
			switch t {
			case Float32Int32T:
				fillFloat32(rng, e[:4])
				if rng.IntN(2) == 0 {
					le.PutUint32(e, math.Float32bits(float32(rng.IntN(3))))
				}
				le.PutUint32(e[4:], uint32(rng.IntN(4)))
			case Float64Int32T:
				fillFloat64(rng, e[:8])
				if rng.IntN(2) == 0 {
					le.PutUint64(e, math.Float64bits(float64(rng.IntN(3))))
				}
				le.PutUint32(e[8:], uint32(rng.IntN(4)-1))
				le.PutUint32(e[12:], rng.Uint32()) // padding: ignored, written as zero
			case Int16Int32T:
				le.PutUint16(e, uint16(rng.IntN(5)-2))
				le.PutUint16(e[2:], uint16(rng.Uint32()))
				le.PutUint32(e[4:], uint32(rng.IntN(4)-1))
			case Int32Int32T:
				le.PutUint32(e, uint32(rng.IntN(5)-2))
				le.PutUint32(e[4:], uint32(rng.IntN(4)-1))
			case Int64Int32T:
				le.PutUint64(e, uint64(rng.IntN(5)-2))
				le.PutUint32(e[8:], uint32(rng.IntN(4)-1))
				le.PutUint32(e[12:], rng.Uint32())
			case Int64Int64T:
				le.PutUint64(e, uint64(rng.IntN(5)-2))
				le.PutUint64(e[8:], uint64(rng.IntN(4)-1))
			}
		}
	}
}

// form is one way of calling a kernel.
type form struct {
	name  string
	k     int // number of sources
	alias int // -1: separate dst; else dst is source alias
}

var forms = []form{
	{"reduce", 2, 0},
	{"reduce3", 2, -1},
	{"reduce3/dst=a", 2, 0},
	{"reduce3/dst=b", 2, 1},
	{"reducek/k=1", 1, -1},
	{"reducek/k=3", 3, 0},
	{"reducek/k=4", 4, -1},
	{"reducek/k=8", 8, -1},
	{"reducek/k=8/dst=s0", 8, 0},
	{"reducek/k=9", 9, -1},
	{"reducek/k=17", 17, 0},
}

// run calls kern in form f on copies of srcs (each at its own offset in a guarded buffer)
// and returns the result.
func run(t *testing.T, kern *Kernel, f form, srcs [][]byte, offs []int) []byte {
	t.Helper()
	n := len(srcs[0])
	bufs := make([]*buffer, len(srcs))
	in := make([][]byte, len(srcs))
	for j := range srcs {
		bufs[j] = newBuffer(n, offs[j])
		in[j] = bufs[j].bytes()
		copy(in[j], srcs[j])
	}
	var dst []byte
	var dbuf *buffer
	if f.alias >= 0 {
		dst = in[f.alias]
	} else {
		dbuf = newBuffer(n, offs[len(offs)-1])
		dst = dbuf.bytes()
	}
	switch {
	case f.name == "reduce":
		kern.Reduce(dst, in[1])
	case f.name[:7] == "reduce3":
		kern.Reduce3(dst, in[0], in[1])
	default:
		kern.ReduceK(dst, in)
	}
	for j, b := range bufs {
		b.checkGuard(t, fmt.Sprintf("source %d", j))
		if j != f.alias && !bytes.Equal(in[j], srcs[j]) {
			t.Fatalf("source %d was modified", j)
		}
	}
	if dbuf != nil {
		dbuf.checkGuard(t, "dst")
	}
	return bytes.Clone(dst)
}

func firstDiff(t Type, got, want []byte) string {
	sz := t.Size()
	for i := 0; i < len(got); i += sz {
		if !bytes.Equal(got[i:i+sz], want[i:i+sz]) {
			return fmt.Sprintf("element %d of %d: got %x, want %x", i/sz, len(got)/sz, got[i:i+sz], want[i:i+sz])
		}
	}
	return ""
}

// TestKernels checks every (type, operator, form, implementation) against the reference
// for lengths 0..300 elements, every operand at its own random offset, guard bands around
// every buffer.
func TestKernels(t *testing.T) {
	t.Logf("implementations: %v (in use: %s)", availableImpls(), Impl())
	step := 1
	if testing.Short() {
		step = 7
	}
	checkAll(t, step)
}

// TestKernelsNonTemporal runs the vector paths with non-temporal stores, which
// otherwise start at NonTemporalThreshold.
func TestKernelsNonTemporal(t *testing.T) {
	old := NonTemporalThreshold
	t.Cleanup(func() { NonTemporalThreshold = old }) // after the parallel subtests
	NonTemporalThreshold = 0
	step := 3
	if testing.Short() {
		step = 11
	}
	checkAll(t, step)
}

func checkAll(t *testing.T, step int) {
	impls := availableImpls()
	for _, typ := range Types() {
		for _, op := range Ops() {
			if !Supports(typ, op) {
				continue
			}
			t.Run(fmt.Sprintf("op=%v/type=%v", op, typ), func(t *testing.T) {
				t.Parallel()
				rng := rand.New(rand.NewPCG(uint64(typ), uint64(op)+uint64(step)<<8))
				for count := rng.IntN(step); count <= 300; count += step {
					f := forms[count%len(forms)]
					if longMode || count < 20 {
						for _, f := range forms {
							checkForm(t, rng, impls, typ, op, f, count)
						}
						continue
					}
					checkForm(t, rng, impls, typ, op, f, count)
				}
			})
		}
	}
}

func checkForm(t *testing.T, rng *rand.Rand, impls []impl, typ Type, op Op, f form, count int) {
	n := count * typ.Size()
	srcs := make([][]byte, f.k)
	offs := make([]int, f.k+1)
	for j := range srcs {
		srcs[j] = make([]byte, n)
		fill(rng, typ, srcs[j])
		offs[j] = rng.IntN(64)
	}
	offs[f.k] = rng.IntN(64)
	want := refReduceK(typ, op, srcs)
	for _, i := range impls {
		kern, err := lookupImpl(i, typ, op)
		if err != nil {
			t.Fatal(err)
		}
		got := run(t, kern, f, srcs, offs)
		if d := firstDiff(typ, got, want); d != "" {
			t.Fatalf("impl=%v (%s) %s count=%d offsets=%v: %s", i, kern.Impl(), f.name, count, offs, d)
		}
	}
}
