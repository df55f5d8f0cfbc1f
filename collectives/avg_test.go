package collectives

import (
	"errors"
	"fmt"
	"testing"

	"github.com/shmcoll/shmcoll/simd"
)

// avgInput is rank r's element i: a value whose sums round (thirds and
// tenths), as a float64 to convert.
func avgInput(r, i int) float64 { return float64(i%17-8)/3 + float64(r)*1.1 + 1e-3*float64(i) }

// fromF64 converts x to T, one of the floating element types.
func fromF64[T simd.Element](x float64) T {
	var z T
	var v any
	switch any(z).(type) {
	case float32:
		v = float32(x)
	case float64:
		v = x
	case weight:
		v = weight(x)
	case simd.BFloat16:
		v = simd.BFloat16FromFloat32(float32(x))
	case simd.Float16:
		v = simd.Float16FromFloat32(float32(x))
	case complex64:
		v = complex(float32(x), float32(-2*x))
	case complex128:
		v = complex(x, -2*x)
	}
	return v.(T)
}

// avgRef divides sum, the result of Sum, by k as Avg documents, written
// out per type (not with divide).
func avgRef[T simd.Element](sum []T, k int) []T {
	out := make([]T, len(sum))
	for i, s := range sum {
		var v any
		switch x := any(s).(type) {
		case float32:
			v = x / float32(k)
		case float64:
			v = x / float64(k)
		case weight:
			v = x / weight(k)
		case simd.BFloat16:
			v = simd.BFloat16FromFloat32(x.Float32() / float32(k))
		case simd.Float16:
			v = simd.Float16FromFloat32(x.Float32() / float32(k))
		case complex64:
			v = complex(real(x)/float32(k), imag(x)/float32(k))
		case complex128:
			v = complex(real(x)/float64(k), imag(x)/float64(k))
		}
		out[i] = v.(T)
	}
	return out
}

// sameBits reports whether a and b hold the same bytes.
func sameBits[T simd.Element](a, b []T) bool {
	return string(simd.AsBytes(a)) == string(simd.AsBytes(b))
}

// avgCalls runs every reduction with Avg and with Sum on the same inputs
// and checks that Avg's result is Sum's divided as documented, bitwise,
// and the same on every rank (compared through an allgather of its bytes);
// and that an average that is exact in every order comes out exact.
func avgCalls[T simd.Element](c *Comm, n int) error {
	typ := simd.TypeOf[T]()
	p, r := c.Size(), c.Rank()
	in := make([]T, p*n)
	for i := range in {
		in[i] = fromF64[T](avgInput(r, i))
	}
	check := func(what string, got, sum []T, k int) error {
		if want := avgRef(sum, k); !sameBits(got, want) {
			return fmt.Errorf("%v p=%d n=%d rank %d %s: %v, want %v", typ, p, n, r, what, got[:min(3, len(got))], want[:min(3, len(want))])
		}
		return nil
	}
	sum, avg := make([]T, p*n), make([]T, p*n)
	if err := Allreduce(bg, c, in, sum, Sum); err != nil {
		return err
	}
	if err := Allreduce(bg, c, in, avg, Avg); err != nil {
		return err
	}
	if err := check("allreduce", avg, sum, p); err != nil {
		return err
	}
	mine := append([]byte(nil), simd.AsBytes(avg)...)
	all := make([]byte, p*len(mine))
	if err := Allgather(bg, c, mine, all); err != nil {
		return err
	}
	for q := range p {
		if string(all[q*len(mine):(q+1)*len(mine)]) != string(mine) {
			return fmt.Errorf("%v p=%d n=%d: rank %d's average differs from rank %d's", typ, p, n, q, r)
		}
	}
	// in place
	inPlace := append([]T(nil), in...)
	if err := Allreduce(bg, c, nil, inPlace, Avg); err != nil {
		return err
	}
	if err := check("allreduce in place", inPlace, sum, p); err != nil {
		return err
	}
	var rsum, ravg []T
	if r == p-1 {
		rsum, ravg = make([]T, p*n), make([]T, p*n)
	}
	if err := Reduce(bg, c, in, rsum, Sum, p-1); err != nil {
		return err
	}
	if err := Reduce(bg, c, in, ravg, Avg, p-1); err != nil {
		return err
	}
	if err := check("reduce", ravg, rsum, p); err != nil {
		return err
	}
	bsum, bavg := make([]T, n), make([]T, n)
	if err := ReduceScatterBlock(bg, c, in, bsum, Sum); err != nil {
		return err
	}
	if err := ReduceScatterBlock(bg, c, in, bavg, Avg); err != nil {
		return err
	}
	if err := check("reduce_scatter_block", bavg, bsum, p); err != nil {
		return err
	}
	counts := make([]int, p)
	for q := range counts {
		counts[q] = n - q%2
	}
	total := 0
	for _, k := range counts {
		total += k
	}
	vsum, vavg := make([]T, counts[r]), make([]T, counts[r])
	if err := ReduceScatter(bg, c, in[:total], vsum, counts, Sum); err != nil {
		return err
	}
	if err := ReduceScatter(bg, c, in[:total], vavg, counts, Avg); err != nil {
		return err
	}
	if err := check("reduce_scatter", vavg, vsum, p); err != nil {
		return err
	}
	ssum, savg := make([]T, n), make([]T, n)
	if err := Scan(bg, c, in[:n], ssum, Sum); err != nil {
		return err
	}
	if err := Scan(bg, c, in[:n], savg, Avg); err != nil {
		return err
	}
	if err := check("scan", savg, ssum, r+1); err != nil {
		return err
	}
	esum, eavg := make([]T, n), make([]T, n)
	if err := Exscan(bg, c, in[:n], esum, Sum); err != nil {
		return err
	}
	if err := Exscan(bg, c, in[:n], eavg, Avg); err != nil {
		return err
	}
	if r > 0 {
		if err := check("exscan", eavg, esum, r); err != nil {
			return err
		}
	}
	// Exact: rank r holds r+1 + i%5, so the average is (p+1)/2 + i%5
	// in every order (p = 1..4: halves at most).
	ex := make([]T, n)
	for i := range ex {
		ex[i] = fromF64[T](float64(r+1) + float64(i%5))
	}
	if err := Allreduce(bg, c, nil, ex, Avg); err != nil {
		return err
	}
	for i := range ex {
		if want := fromF64[T](float64(p+1)/2 + float64(i%5)); ex[i] != want {
			return fmt.Errorf("%v p=%d exact average [%d]: %v, want %v", typ, p, i, ex[i], want)
		}
	}
	return nil
}

// avgAll runs avgCalls for every floating type and a type defined on
// float32.
func avgAll(c *Comm, n int) error {
	return errors.Join(
		avgCalls[float32](c, n),
		avgCalls[float64](c, n),
		avgCalls[simd.BFloat16](c, n),
		avgCalls[simd.Float16](c, n),
		avgCalls[complex64](c, n),
		avgCalls[complex128](c, n),
		avgCalls[weight](c, n),
	)
}

func TestAvg(t *testing.T) {
	for _, p := range []int{1, 2, 3, 4} {
		for _, n := range []int{1, 5, 700} { // 700: several segments, the general path
			t.Run(fmt.Sprintf("p=%d/n=%d", p, n), func(t *testing.T) {
				if err := Run(p, Options{SlotBytes: 4096}, func(c *Comm) error { return avgAll(c, n) }); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestAvgHalfRounding: Avg of bfloat16 and float16 is the correctly
// rounded quotient of the half-precision sum, checked against float64
// division rounded once (through float32, exact for these quotients'
// rounding) for every sum of two values in a range of bit patterns.
func TestAvgHalfRounding(t *testing.T) {
	for bits := uint16(0); bits < 0x7c00; bits += 7 {
		f := simd.Float16(bits)
		for _, k := range []int{2, 3, 4} {
			got := []simd.Float16{f}
			divide(simd.Float16T, simd.AsBytes(got), k)
			q := float64(f.Float32()) / float64(k)
			want := nearestFloat16(q)
			if got[0] != want {
				t.Fatalf("float16 %#x / %d: %#x, want %#x", bits, k, uint16(got[0]), uint16(want))
			}
		}
	}
	for bits := uint16(0); bits < 0x7f80; bits += 5 {
		b := simd.BFloat16(bits)
		for _, k := range []int{3, 5} {
			got := []simd.BFloat16{b}
			divide(simd.BFloat16T, simd.AsBytes(got), k)
			want := nearestBFloat16(float64(b.Float32()) / float64(k))
			if got[0] != want {
				t.Fatalf("bfloat16 %#x / %d: %#x, want %#x", bits, k, uint16(got[0]), uint16(want))
			}
		}
	}
}

// nearestFloat16 and nearestBFloat16 round x to the nearest value of the
// type, ties to even, by search over the (monotonic) positive bit
// patterns: a reference independent of the conversion functions.
func nearestFloat16(x float64) simd.Float16 {
	return simd.Float16(nearest(x, 0x7bff, func(b uint16) float64 { return float64(simd.Float16(b).Float32()) }))
}

func nearestBFloat16(x float64) simd.BFloat16 {
	return simd.BFloat16(nearest(x, 0x7f7f, func(b uint16) float64 { return float64(simd.BFloat16(b).Float32()) }))
}

func nearest(x float64, most uint16, val func(uint16) float64) uint16 {
	lo, hi := uint16(0), most
	for lo < hi { // the largest pattern with value <= x
		mid := lo + (hi-lo+1)/2
		if val(mid) <= x {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if lo == most || val(lo) == x {
		return lo
	}
	d0, d1 := x-val(lo), val(lo+1)-x
	if d1 < d0 || (d1 == d0 && lo&1 == 1) {
		return lo + 1
	}
	return lo
}

// TestAvgRefused: Avg on integers and pair types fails with
// ErrInvalidArgument on every rank; Apply refuses it.
func TestAvgRefused(t *testing.T) {
	errs := runAll(t, 3, Options{}, func(c *Comm) error {
		return Allreduce(bg, c, make([]int32, 4), make([]int32, 4), Avg)
	})
	text := sameAbort(t, "avg int32", errs, ErrInvalidArgument)
	if text == "" || !errors.Is(errs[0], ErrInvalidArgument) {
		t.Errorf("avg int32: %v", errs[0])
	}
	for _, typ := range []simd.Type{simd.Int8, simd.Uint64, simd.Float32Int32T} {
		if err := Avg.Check(typ); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Avg.Check(%v): %v, want ErrInvalidArgument", typ, err)
		}
	}
	if err := Avg.Check(simd.Float16T); err != nil {
		t.Errorf("Avg.Check(float16): %v", err)
	}
	if err := Avg.Apply(simd.Float32, make([]byte, 4), make([]byte, 4)); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Avg.Apply: %v, want ErrInvalidArgument", err)
	}
	if _, ok := Avg.Builtin(); ok {
		t.Error("Avg.Builtin() reports a built-in simd operator")
	}
}

// TestAvgMismatch: Avg on some ranks and Sum on others is a mismatch on
// every rank, on the small-call path's sizes too.
func TestAvgMismatch(t *testing.T) {
	for _, warm := range []bool{false, true} {
		mismatch(t, 3, "avg", "operators", warm, func(c *Comm) error {
			op := Avg
			if c.Rank() == 1 {
				op = Sum
			}
			return Allreduce(bg, c, make([]float64, 8), make([]float64, 8), op)
		})
	}
}
