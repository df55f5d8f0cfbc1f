package collectives

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/shmcoll/shmcoll/shm"
	"github.com/shmcoll/shmcoll/simd"
)

// runAll runs f on p in-process ranks, each closing its communicator
// after f, and returns every rank's error: f's, else Close's (the late
// report of a call that returned early). A rank whose f fails aborts the
// arena (a no-op when it is aborted already), so that a test's own check
// that fails on some ranks only fails the others' waits instead of
// leaving them to the test's timeout.
func runAll(t *testing.T, p int, opt Options, f func(c *Comm) error) []error {
	t.Helper()
	cs, err := NewLocal(p, opt)
	if err != nil {
		t.Fatal(err)
	}
	errs := make([]error, p)
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			if errs[i] = f(c); errs[i] != nil && c.ep.Ok() {
				c.ep.Abort(fmt.Errorf("test: rank %d failed: %w", i, errs[i]))
			}
			if err := c.Close(); errs[i] == nil {
				errs[i] = err
			}
		})
	}
	wg.Wait()
	return errs
}

// sameAbort checks that every rank failed with an error wrapping target
// and ErrAborted, whose abort record is the same on every rank, and returns
// its text.
func sameAbort(t *testing.T, what string, errs []error, target error) string {
	t.Helper()
	text := ""
	for r, err := range errs {
		if !errors.Is(err, target) || !errors.Is(err, ErrAborted) {
			t.Errorf("%s: rank %d: error %v, want one wrapping %v and %v", what, r, err, target, ErrAborted)
			continue
		}
		var ae *shm.AbortError
		if !errors.As(err, &ae) {
			t.Errorf("%s: rank %d: %v has no abort record", what, r, err)
			continue
		}
		if text == "" {
			text = ae.Error()
		} else if ae.Error() != text {
			t.Errorf("%s: rank %d: abort %q, rank 0 %q", what, r, ae.Error(), text)
		}
	}
	return text
}

func TestMismatch(t *testing.T) {
	const p = 4
	cases := []struct {
		name string
		want string
		f    func(c *Comm) error
	}{
		{"count", "count", func(c *Comm) error {
			n := 10 + c.Rank()/3
			return Allreduce(bg, c, make([]float64, n), make([]float64, n), Sum)
		}},
		{"count zero", "count", func(c *Comm) error {
			n := 5
			if c.Rank() == 2 {
				n = 0
			}
			return Allreduce(bg, c, make([]float64, n), make([]float64, n), Sum)
		}},
		{"type", "passed", func(c *Comm) error {
			if c.Rank() == 1 {
				return Allreduce(bg, c, make([]int64, 8), make([]int64, 8), Sum)
			}
			return Allreduce(bg, c, make([]float64, 8), make([]float64, 8), Sum)
		}},
		{"operator", "operators", func(c *Comm) error {
			op := Sum
			if c.Rank() == 3 {
				op = Max
			}
			return Allreduce(bg, c, make([]float64, 8), make([]float64, 8), op)
		}},
		{"root", "root", func(c *Comm) error {
			return Bcast(bg, c, make([]int64, 100), c.Rank()/2)
		}},
		{"collective", "called", func(c *Comm) error {
			if c.Rank() == 2 {
				return Bcast(bg, c, make([]float64, 8), 0)
			}
			return Allreduce(bg, c, make([]float64, 8), make([]float64, 8), Sum)
		}},
		{"algorithm", "algorithm", func(c *Comm) error {
			if c.Rank() == 1 {
				setPin(c, CollAllreduce, Flat)
			} else {
				setPin(c, CollAllreduce, Circulant)
			}
			return Allreduce(bg, c, make([]int32, 8), make([]int32, 8), Sum)
		}},
		{"counts", "count vectors", func(c *Comm) error {
			counts := []int{1, 2, 3, 4}
			if c.Rank() == 0 {
				counts = []int{2, 1, 3, 4}
			}
			return ReduceScatter(bg, c, make([]int32, 10), make([]int32, counts[c.Rank()]), counts, Sum)
		}},
		{"counts small", "count vectors", func(c *Comm) error {
			// A matching call binds int32's sum first, so that the
			// mismatched one takes the small-call path.
			counts := []int{1, 2, 3, 4}
			if err := ReduceScatter(bg, c, make([]int32, 10), make([]int32, counts[c.Rank()]), counts, Sum); err != nil {
				return err
			}
			if c.Rank() == 0 {
				counts = []int{2, 1, 3, 4}
			}
			return ReduceScatter(bg, c, make([]int32, 10), make([]int32, counts[c.Rank()]), counts, Sum)
		}},
		{"alltoallv counts", "expects", func(c *Comm) error {
			sc := []int{1, 1, 1, 1}
			rc := []int{1, 1, 1, 1}
			if c.Rank() == 2 {
				rc[1] = 2
			}
			return Alltoallv(bg, c, make([]int32, 4), sc, nil, make([]int32, 5), rc, nil)
		}},
		{"calls", "call", func(c *Comm) error {
			if c.Rank() == 0 {
				if err := Barrier(bg, c); err != nil {
					return err
				}
			}
			return Allreduce(bg, c, make([]float64, 8), make([]float64, 8), Sum)
		}},
	}
	// Each case cold (the first call: the general path) and warm (after
	// calls that put the matching ranks on the small-call path).
	for _, warm := range []bool{false, true} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s warm=%v", tc.name, warm), func(t *testing.T) {
				mismatch(t, p, tc.name, tc.want, warm, tc.f)
			})
		}
	}
}

// mismatch runs f, a call that does not match on every rank, on p
// in-process ranks (after warmSmall when warm), and checks that every rank
// fails with the same ErrMismatch, whose cause says want, and stays
// aborted.
func mismatch(t *testing.T, p int, name, want string, warm bool, f func(c *Comm) error) {
	t.Helper()
	errs := runAll(t, p, Options{}, func(c *Comm) error {
		if warm {
			if _, err := warmSmall(c, 2); err != nil {
				return err
			}
		}
		err := f(c)
		// The communicator stays aborted. A rank that returned early from
		// f's call gets the mismatch from its next call.
		err2 := Barrier(bg, c)
		if !errors.Is(err2, ErrAborted) {
			return fmt.Errorf("barrier after the mismatch: %v", err2)
		}
		if err == nil {
			return err2
		}
		return err
	})
	text := sameAbort(t, name, errs, ErrMismatch)
	if text != "" && !strings.Contains(text, want) {
		t.Errorf("abort %q does not say %q", text, want)
	}
}

// affine is a non-commutative, associative operator on simd.Int64Int64:
// (a, b) is the map x -> a*x + b, and dst op src is dst ∘ src.
var affine = NewOp("affine", func(dst, src []simd.Int64Int64) {
	for i := range dst {
		d, s := dst[i], src[i]
		dst[i] = simd.Int64Int64{Value: d.Value * s.Value, Index: d.Value*s.Index + d.Index}
	}
}, false)

func affineIn(r, n int) []simd.Int64Int64 {
	v := make([]simd.Int64Int64, n)
	for i := range v {
		v[i] = simd.Int64Int64{Value: int64(r%3 + 1 + i%2), Index: int64(r*5 - i)}
	}
	return v
}

func TestNonCommutative(t *testing.T) {
	for _, p := range []int{2, 3, 5, 8} {
		n := 300 // several segments in 4 KiB slots
		in := make([][]simd.Int64Int64, p)
		for r := range in {
			in[r] = affineIn(r, p*n)
		}
		want := refReduce(t, affine, in)
		err := Run(p, Options{SlotBytes: 4096}, func(c *Comm) error {
			r := c.Rank()
			got := make([]simd.Int64Int64, p*n)
			if err := Allreduce(bg, c, in[r], got, affine); err != nil {
				return err
			}
			expect(t, fmt.Sprintf("p=%d allreduce", p), got, want)
			blk := make([]simd.Int64Int64, n)
			if err := ReduceScatterBlock(bg, c, in[r], blk, affine); err != nil {
				return err
			}
			expect(t, fmt.Sprintf("p=%d reduce_scatter_block", p), blk, want[r*n:(r+1)*n])
			var out []simd.Int64Int64
			if r == p-1 {
				out = make([]simd.Int64Int64, p*n)
			}
			if err := Reduce(bg, c, in[r], out, affine, p-1); err != nil {
				return err
			}
			if out != nil {
				expect(t, fmt.Sprintf("p=%d reduce", p), out, want)
			}
			if err := Scan(bg, c, in[r], got, affine); err != nil {
				return err
			}
			expect(t, fmt.Sprintf("p=%d scan", p), got, refReduce(t, affine, in[:r+1]))
			if r > 0 {
				if err := Exscan(bg, c, in[r], got, affine); err != nil {
					return err
				}
				expect(t, fmt.Sprintf("p=%d exscan", p), got, refReduce(t, affine, in[:r]))
			} else if err := Exscan(bg, c, in[r], got, affine); err != nil {
				return err
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// Pinning an algorithm that reorders operands fails on every rank.
	opt := Options{Algorithms: map[Collective]Algorithm{CollAllreduce: Circulant}}
	errs := runAll(t, 3, opt, func(c *Comm) error {
		return Allreduce(bg, c, affineIn(c.Rank(), 6), make([]simd.Int64Int64, 6), affine)
	})
	for r, err := range errs {
		if !errors.Is(err, ErrNotCommutative) {
			t.Errorf("rank %d: %v, want ErrNotCommutative", r, err)
		}
	}
}

func TestCancelAndPanic(t *testing.T) {
	// A cancelled context on one rank aborts the call on every rank.
	errs := runAll(t, 4, Options{}, func(c *Comm) error {
		ctx := bg
		if c.Rank() == 2 {
			cctx, cancel := context.WithCancel(bg)
			cancel()
			ctx = cctx
		}
		return Allreduce(ctx, c, make([]float64, 1000), make([]float64, 1000), Sum)
	})
	for r, err := range errs {
		if !errors.Is(err, ErrAborted) {
			t.Errorf("cancel: rank %d: %v, want ErrAborted", r, err)
		}
	}
	// A panic in a user operator aborts the call on every rank.
	boom := NewOp("boom", func(dst, src []int32) { panic("boom") }, true)
	errs = runAll(t, 3, Options{}, func(c *Comm) error {
		return Allreduce(bg, c, make([]int32, 30), make([]int32, 30), boom)
	})
	text := sameAbort(t, "panic", errs, ErrAborted)
	if !strings.Contains(text, "boom") {
		t.Errorf("abort %q does not name the panic", text)
	}
	// A bad argument on one rank fails every rank instead of hanging them.
	errs = runAll(t, 3, Options{}, func(c *Comm) error {
		root := 0
		if c.Rank() == 1 {
			root = 7
		}
		return Bcast(bg, c, make([]int32, 4), root)
	})
	sameAbort(t, "bad root", errs, ErrAborted)
	if !errors.Is(errs[1], ErrInvalidArgument) {
		t.Errorf("bad root: rank 1: %v, want ErrInvalidArgument", errs[1])
	}
}

func TestClosed(t *testing.T) {
	cs, err := NewLocal(1, Options{})
	if err != nil {
		t.Fatal(err)
	}
	cs[0].Close()
	if err := Barrier(bg, cs[0]); !errors.Is(err, ErrClosed) {
		t.Errorf("barrier after Close: %v, want ErrClosed", err)
	}
}

// mapCtx is a Context whose dynamic type is not comparable: comparing two
// of them panics, so the library must never compare contexts.
type mapCtx struct {
	context.Context
	m map[string]int
}

// TestUncomparableContext: calls take any Context, including one whose
// type is not comparable, twice in a row with different values.
func TestUncomparableContext(t *testing.T) {
	err := Run(2, Options{}, func(c *Comm) error {
		for i := range 3 {
			ctx := mapCtx{context.Background(), map[string]int{"i": i}}
			got := []int64{0}
			if err := Allreduce(ctx, c, []int64{int64(c.Rank() + i)}, got, Sum); err != nil {
				return err
			}
			if got[0] != int64(1+2*i) {
				return fmt.Errorf("call %d: got %d", i, got[0])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
