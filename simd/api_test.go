package simd

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
	"unsafe"
)

func TestParseTypeAndOp(t *testing.T) {
	for _, typ := range Types() {
		got, err := ParseType(strings.ToUpper(typ.String()))
		if err != nil || got != typ {
			t.Errorf("ParseType(%q) = %v, %v", typ.String(), got, err)
		}
	}
	for alias, want := range map[string]Type{"bf16": BFloat16T, "fp16": Float16T, "half": Float16T,
		"float_int": Float32Int32T, "double_int": Float64Int32T, "2int": Int32Int32T,
		"short_int": Int16Int32T, "long_int": Int64Int32T} {
		if got, err := ParseType(alias); err != nil || got != want {
			t.Errorf("ParseType(%q) = %v, %v; want %v", alias, got, err, want)
		}
	}
	for _, op := range Ops() {
		if got, err := ParseOp(op.String()); err != nil || got != op {
			t.Errorf("ParseOp(%q) = %v, %v", op.String(), got, err)
		}
	}
	if _, err := ParseType("float128"); err == nil {
		t.Error("ParseType(float128) succeeded")
	}
	if _, err := ParseOp("avg"); err == nil {
		t.Error("ParseOp(avg) succeeded")
	}
	if s := Type(200).String(); s != "Type(200)" {
		t.Errorf("Type(200).String() = %q", s)
	}
}

func TestTypeOfAndSize(t *testing.T) {
	check := func(got Type, size uintptr, want Type) {
		t.Helper()
		if got != want || uintptr(got.Size()) != size {
			t.Errorf("TypeOf = %v (size %d), want %v (size %d)", got, got.Size(), want, size)
		}
	}
	check(TypeOf[int8](), 1, Int8)
	check(TypeOf[uint16](), 2, Uint16)
	check(TypeOf[int64](), 8, Int64)
	check(TypeOf[float32](), 4, Float32)
	check(TypeOf[BFloat16](), 2, BFloat16T)
	check(TypeOf[Float16](), 2, Float16T)
	check(TypeOf[complex128](), 16, Complex128)
	check(TypeOf[Float32Int32](), unsafe.Sizeof(Float32Int32{}), Float32Int32T)
	check(TypeOf[Float64Int32](), unsafe.Sizeof(Float64Int32{}), Float64Int32T)
	check(TypeOf[Int16Int32](), unsafe.Sizeof(Int16Int32{}), Int16Int32T)
	check(TypeOf[Int32Int32](), unsafe.Sizeof(Int32Int32{}), Int32Int32T)
	check(TypeOf[Int64Int32](), unsafe.Sizeof(Int64Int32{}), Int64Int32T)
	check(TypeOf[Int64Int64](), unsafe.Sizeof(Int64Int64{}), Int64Int64T)
	if unsafe.Offsetof(Int16Int32{}.Index) != 4 || unsafe.Offsetof(Float64Int32{}.Index) != 8 {
		t.Error("pair layout differs from the C structs")
	}
}

func TestLookupUnsupported(t *testing.T) {
	for _, typ := range Types() {
		for _, op := range Ops() {
			k, err := Lookup(typ, op)
			if Supports(typ, op) {
				if err != nil || k.Type() != typ || k.Op() != op {
					t.Errorf("Lookup(%v, %v) = %v, %v", typ, op, k, err)
				}
				continue
			}
			if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), op.String()+" on "+typ.String()) {
				t.Errorf("Lookup(%v, %v): error %v", typ, op, err)
			}
		}
	}
	if _, err := Lookup(numTypes, Sum); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Lookup(invalid type): %v", err)
	}
}

func TestAsBytesFromBytes(t *testing.T) {
	s := []float64{1, -2}
	b := AsBytes(s)
	if len(b) != 16 || unsafe.Pointer(&b[0]) != unsafe.Pointer(&s[0]) {
		t.Fatalf("AsBytes: len %d", len(b))
	}
	back := FromBytes[float64](b)
	if len(back) != 2 || back[1] != -2 {
		t.Fatalf("FromBytes: %v", back)
	}
	if AsBytes[int32](nil) != nil || FromBytes[int32](nil) != nil {
		t.Error("empty slices should map to nil")
	}
	defer func() {
		if recover() == nil {
			t.Error("FromBytes of 3 bytes as float32 did not panic")
		}
	}()
	FromBytes[float32](make([]byte, 3))
}

func TestLengthPanics(t *testing.T) {
	k, _ := Lookup(Int32, Sum)
	for name, f := range map[string]func(){
		"Reduce lengths":  func() { k.Reduce(make([]byte, 8), make([]byte, 4)) },
		"Reduce size":     func() { k.Reduce(make([]byte, 6), make([]byte, 6)) },
		"Reduce3 lengths": func() { k.Reduce3(make([]byte, 8), make([]byte, 8), make([]byte, 4)) },
		"ReduceK no srcs": func() { k.ReduceK(make([]byte, 8), nil) },
		"ReduceK lengths": func() { k.ReduceK(make([]byte, 8), [][]byte{make([]byte, 8), make([]byte, 12)}) },
		"ReduceK size":    func() { k.ReduceK(make([]byte, 2), [][]byte{make([]byte, 2)}) },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil {
					t.Errorf("%s: no panic", name)
				} else if !strings.Contains(fmt.Sprint(r), "sum int32") {
					t.Errorf("%s: panic %q does not name the kernel", name, r)
				}
			}()
			f()
		}()
	}
}

func TestNoAllocations(t *testing.T) {
	for _, i := range availableImpls() {
		for _, p := range []struct {
			t  Type
			op Op
		}{{Float32, Sum}, {BFloat16T, Sum}, {Int8, Max}, {Float64Int32T, MinLoc}, {Complex64, Prod}} {
			k, _ := lookupImpl(i, p.t, p.op)
			n := 1000 * p.t.Size()
			a, b, c := make([]byte, n), make([]byte, n), make([]byte, n)
			srcs := [][]byte{a, b, c, a, b, c, a, b, c, a}
			allocs := testing.AllocsPerRun(10, func() {
				k.Reduce(a, b)
				k.Reduce3(c, a, b)
				k.ReduceK(a, srcs)
			})
			if allocs != 0 {
				t.Errorf("impl=%v %v %v: %v allocations per run", i, p.op, p.t, allocs)
			}
		}
	}
}

func TestTypedHelpers(t *testing.T) {
	dst := []int16{1, 2, 3}
	if err := Reduce(Prod, dst, []int16{4, 5, -6}); err != nil || dst[2] != -18 {
		t.Fatalf("Reduce: %v %v", dst, err)
	}
	out := make([]uint8, 2)
	if err := Reduce3(Bxor, out, []uint8{0xf0, 1}, []uint8{0xff, 1}); err != nil || out[0] != 0x0f || out[1] != 0 {
		t.Fatalf("Reduce3: %v %v", out, err)
	}
	if err := ReduceK(Lor, out, []uint8{0, 0}, []uint8{0, 7}, []uint8{0, 0}); err != nil || out[0] != 0 || out[1] != 1 {
		t.Fatalf("ReduceK: %v %v", out, err)
	}
	if err := Reduce(Band, []float32{1}, []float32{2}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Reduce(band, float32): %v", err)
	}
	if err := Reduce(Sum, []int32{1}, []int32{2, 3}); err == nil {
		t.Error("Reduce with different lengths succeeded")
	}
	if err := ReduceK[int32](Sum, nil); err == nil {
		t.Error("ReduceK without sources succeeded")
	}
}

func TestChooseImpl(t *testing.T) {
	best := availableImpls()[len(availableImpls())-1]
	if got := chooseImpl(""); got != best {
		t.Errorf("chooseImpl(\"\") = %v, want %v", got, best)
	}
	if got := chooseImpl("bogus"); got != best {
		t.Errorf("chooseImpl(bogus) = %v, want %v", got, best)
	}
	if got := chooseImpl("GENERIC"); got != implGeneric {
		t.Errorf("chooseImpl(GENERIC) = %v", got)
	}
	for i := range numImpls {
		got := chooseImpl(i.String())
		if got > i || !implAvailable(got) || (implAvailable(i) && got != i) {
			t.Errorf("chooseImpl(%v) = %v", i, got)
		}
	}
}

// TestImplFromEnvironment starts the test binary with SHMCOLL_SIMD set and checks Impl.
func TestImplFromEnvironment(t *testing.T) {
	if want := os.Getenv("SHMCOLL_SIMD_WANT"); want != "" {
		if Impl() != want {
			t.Fatalf("SHMCOLL_SIMD=%s: Impl() = %q, want %q", os.Getenv("SHMCOLL_SIMD"), Impl(), want)
		}
		return
	}
	for _, i := range availableImpls() {
		cmd := exec.Command(os.Args[0], "-test.run=^TestImplFromEnvironment$", "-test.count=1")
		cmd.Env = append(os.Environ(), "SHMCOLL_SIMD="+i.String(), "SHMCOLL_SIMD_WANT="+i.String())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("SHMCOLL_SIMD=%v: %v\n%s", i, err, out)
		}
	}
}

// TestCopy: Copy (non-temporal from threshold 0, the string copy from 0,
// and the default thresholds) and CopyNT copy exactly at every length and alignment, leave
// the guard bands alone, copy the shorter length, and move overlapping
// buffers like memmove.
func TestCopy(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	old, oldString := NonTemporalThreshold, StringCopyThreshold
	defer func() { NonTemporalThreshold, StringCopyThreshold = old, oldString }()
	for _, c := range []struct {
		name      string
		thr, sthr int
		copy      func(dst, src []byte)
	}{
		{"Copy, threshold 0", 0, oldString, Copy},
		{"Copy, string copy from 0", old, 0, Copy},
		{"Copy", old, oldString, Copy},
		{"CopyNT", old, oldString, CopyNT},
		{"CopyLines", old, oldString, CopyLines},
	} {
		NonTemporalThreshold, StringCopyThreshold = c.thr, c.sthr
		for _, n := range []int{0, 1, 63, 64, 65, 127, 128, 200, 255, 256, 257, 1000, 4096 + 17, 100000} {
			for range 4 {
				src := make([]byte, n)
				for i := range src {
					src[i] = byte(rng.Uint32())
				}
				d := newBuffer(n, rng.IntN(64))
				s := newBuffer(n, rng.IntN(64))
				copy(s.bytes(), src)
				c.copy(d.bytes(), s.bytes())
				if !bytes.Equal(d.bytes(), src) {
					t.Fatalf("%s, n %d: copy differs", c.name, n)
				}
				d.checkGuard(t, "dst")
			}
		}
		short := make([]byte, 4)
		c.copy(short, []byte("abcdefgh"))
		if string(short) != "abcd" {
			t.Fatalf("%s, shorter destination: %q", c.name, short)
		}
		buf := []byte("0123456789")
		c.copy(buf[2:], buf)
		if string(buf) != "0101234567" {
			t.Fatalf("%s, overlapping forward: %q", c.name, buf)
		}
		buf = []byte("0123456789")
		c.copy(buf, buf[3:])
		if string(buf) != "3456789789" {
			t.Fatalf("%s, overlapping backward: %q", c.name, buf)
		}
	}
}

// TestReduce3Stream: Reduce3Stream (non-temporal stores at every size)
// gives Reduce3's result bit for bit, at every length and alignment, and
// leaves the guard bands alone.
func TestReduce3Stream(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, i := range availableImpls() {
		for _, p := range []struct {
			t  Type
			op Op
		}{{Float64, Sum}, {Float32, Max}, {BFloat16T, Sum}, {Int32, Prod}, {Uint8, Bxor}} {
			k, err := lookupImpl(i, p.t, p.op)
			if err != nil {
				t.Fatal(err)
			}
			es := p.t.Size()
			for _, n := range []int{0, 1, 7, 64, 65, 1000, 4096 + 3} {
				a, b := make([]byte, n*es), make([]byte, n*es)
				for j := range a {
					a[j], b[j] = byte(rng.Uint32()), byte(rng.Uint32())
				}
				want := make([]byte, n*es)
				k.Reduce3(want, a, b)
				d := newBuffer(n*es, rng.IntN(64/es)*es)
				k.Reduce3Stream(d.bytes(), a, b)
				if !bytes.Equal(d.bytes(), want) {
					t.Fatalf("impl=%v %v %v n=%d: Reduce3Stream differs from Reduce3", i, p.op, p.t, n)
				}
				d.checkGuard(t, "dst")
			}
		}
	}
}

// TestPrefetch: Prefetch and PrefetchW change nothing and do not fault,
// at every length and alignment near a buffer's end, and for nil.
func TestPrefetch(t *testing.T) {
	for name, prefetch := range map[string]func([]byte){"Prefetch": Prefetch, "PrefetchW": PrefetchW} {
		prefetch(nil)
		buf := make([]byte, 1<<13)
		for i := range buf {
			buf[i] = byte(i * 7)
		}
		for off := range 70 {
			for _, n := range []int{0, 1, 63, 64, 65, 127, 1000, 4096, 8000 - off} {
				prefetch(buf[off : off+n])
			}
		}
		for i := range buf {
			if buf[i] != byte(i*7) {
				t.Fatalf("%s: byte %d changed", name, i)
			}
		}
	}
}
