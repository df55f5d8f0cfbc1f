package collectives

import (
	"context"
	"os"
	"testing"

	"github.com/shmcoll/shmcoll/simd"
)

// long reports whether SHMCOLL_LONG=1 asks for the whole matrix.
var long = os.Getenv("SHMCOLL_LONG") == "1"

// sizes of communicators the matrix runs.
func testSizes() []int {
	if long {
		ps := []int{}
		for p := 1; p <= 17; p++ {
			ps = append(ps, p)
		}
		return append(ps, 31, 32, 33, 64, 100)
	}
	if testing.Short() {
		return []int{1, 2, 3, 5, 8, 13}
	}
	return []int{1, 2, 3, 4, 5, 7, 8, 13, 17, 32, 33}
}

// testCounts are the element counts of the matrix for p ranks: 0, 1, p-1,
// p, primes larger than a 4 KiB slot half holds.
func testCounts(p int) []int {
	cs := []int{0, 1, p - 1, p, 1009}
	if long {
		cs = append(cs, 4099)
		if p <= 17 {
			cs = append(cs, 100003)
		}
	}
	return cs
}

// pinAll returns options with a 4 KiB slot (so that counts of a few hundred
// elements already run several segments) and alg pinned for every
// collective it implements.
func pinAll(alg Algorithm) Options {
	o := Options{SlotBytes: 4096, Algorithms: map[Collective]Algorithm{}}
	for coll := range numColls {
		if alg == Auto || algorithms[coll][alg] != nil {
			o.Algorithms[coll] = alg
		}
	}
	return o
}

// implements reports whether alg serves coll.
func implements(alg Algorithm, coll Collective) bool { return algorithms[coll][alg] != nil }

// val converts a small integer to T exactly.
func val[T simd.Element](x int) T {
	var z T
	var r any
	switch any(z).(type) {
	case int8:
		r = int8(x)
	case int16:
		r = int16(x)
	case int32:
		r = int32(x)
	case int64:
		r = int64(x)
	case uint8:
		r = uint8(x)
	case uint16:
		r = uint16(x)
	case uint32:
		r = uint32(x)
	case uint64:
		r = uint64(x)
	case float32:
		r = float32(x)
	case float64:
		r = float64(x)
	case simd.BFloat16:
		r = simd.BFloat16FromFloat32(float32(x))
	case simd.Float16:
		r = simd.Float16FromFloat32(float32(x))
	case complex64:
		r = complex(float32(x), float32(x%3))
	case complex128:
		r = complex(float64(x), float64(x%3))
	case simd.Float32Int32:
		r = simd.Float32Int32{Value: float32(x % 4), Index: int32(x)}
	case simd.Float64Int32:
		r = simd.Float64Int32{Value: float64(x % 4), Index: int32(x)}
	case simd.Int16Int32:
		r = simd.Int16Int32{Value: int16(x % 4), Index: int32(x)}
	case simd.Int32Int32:
		r = simd.Int32Int32{Value: int32(x % 4), Index: int32(x)}
	case simd.Int64Int32:
		r = simd.Int64Int32{Value: int64(x % 4), Index: int32(x)}
	case simd.Int64Int64:
		r = simd.Int64Int64{Value: int64(x % 4), Index: int64(x)}
	}
	return r.(T)
}

// input is rank r's element i of a test vector: small values, so that sums
// and products of up to 100 of them are exact in every type.
func input[T simd.Element](r, i, mod int) T { return val[T]((r*7+i*3+1)%mod + 1) }

// refReduce combines xs[0] op xs[1] op ... element-wise, left to right.
func refReduce[T simd.Element](t *testing.T, op Op, xs [][]T) []T {
	t.Helper()
	out, err := reduceRef(op, xs)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// reduceRef is refReduce for callers without a testing.T.
func reduceRef[T simd.Element](op Op, xs [][]T) ([]T, error) {
	out := append([]T(nil), xs[0]...)
	red, err := op.bind(simd.TypeOf[T]())
	if err != nil {
		return nil, err
	}
	for _, x := range xs[1:] {
		red.reduce(simd.AsBytes(out), simd.AsBytes(x))
	}
	return out, nil
}

func equal[T comparable](a, b []T) (int, bool) {
	if len(a) != len(b) {
		return -1, false
	}
	for i := range a {
		if a[i] != b[i] {
			return i, false
		}
	}
	return 0, true
}

// expect reports the first difference of got from want.
func expect[T comparable](t *testing.T, what string, got, want []T) bool {
	t.Helper()
	if i, ok := equal(got, want); !ok {
		if i < 0 {
			t.Errorf("%s: %d elements, want %d", what, len(got), len(want))
		} else {
			t.Errorf("%s: element %d = %v, want %v", what, i, got[i], want[i])
		}
		return false
	}
	return true
}

var bg = context.Background()

// allocsTwoRanks warms calls up twice on both of cs's two ranks, then
// measures rank 0's allocations per call over 50 runs while rank 1 makes
// the same calls in a goroutine; check, if not nil, runs after each
// measured call on rank 0.
func allocsTwoRanks(t *testing.T, cs []*Comm, calls func(*Comm) error, check func()) float64 {
	t.Helper()
	const runs = 50
	done := make(chan error, 1)
	go func() {
		var err error
		for range runs + 1 + 2 { // AllocsPerRun runs once more to warm up
			if err = calls(cs[1]); err != nil {
				break
			}
		}
		done <- err
	}()
	for range 2 {
		if err := calls(cs[0]); err != nil {
			t.Fatal(err)
		}
	}
	allocs := testing.AllocsPerRun(runs, func() {
		if err := calls(cs[0]); err != nil {
			t.Fatal(err)
		}
		if check != nil {
			check()
		}
	})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return allocs
}

// setPin pins alg for coll on c, as Options.Algorithms does, and drops what
// selection remembers for coll, which holds for the pins it was worked out with.
func setPin(c *Comm, coll Collective, alg Algorithm) {
	c.pinned[coll] = alg
	c.chosen[coll] = choice{}
	for i := range smallPaths {
		if smallPaths[i].coll == coll {
			c.small[i] = smallMemo{}
		}
	}
}
