package collectives

import (
	"fmt"
	"testing"

	"github.com/shmcoll/shmcoll/simd"
)

// testType runs allreduce, reduce_scatter_block, reduce and scan of T with
// every operator simd supports for T, against the left-to-right reference.
// Inputs are small integers so that every result is exact in every order.
func testType[T simd.Element](t *testing.T, p int, alg Algorithm) {
	typ := simd.TypeOf[T]()
	for _, sop := range simd.Ops() {
		if !simd.Supports(typ, sop) {
			continue
		}
		op := Builtin(sop)
		mod := 4
		if sop == simd.Prod {
			mod = 2
		}
		n := 2*p + 3
		in := make([][]T, p)
		for r := range in {
			in[r] = make([]T, p*n)
			for i := range in[r] {
				in[r][i] = input[T](r, i, mod)
			}
		}
		want := refReduce(t, op, in)
		err := Run(p, pinAll(alg), func(c *Comm) error {
			r := c.Rank()
			what := fmt.Sprintf("%v %v p=%d %v rank %d", typ, sop, p, alg, r)
			got := make([]T, p*n)
			if err := Allreduce(bg, c, in[r], got, op); err != nil {
				return err
			}
			expect(t, what+" allreduce", got, want)
			blk := make([]T, n)
			if err := ReduceScatterBlock(bg, c, in[r], blk, op); err != nil {
				return err
			}
			expect(t, what+" reduce_scatter_block", blk, want[r*n:(r+1)*n])
			var out []T
			if r == 1%p {
				out = make([]T, p*n)
			}
			if err := Reduce(bg, c, in[r], out, op, 1%p); err != nil {
				return err
			}
			if out != nil {
				expect(t, what+" reduce", out, want)
			}
			sc := make([]T, p*n)
			if err := Scan(bg, c, in[r], sc, op); err != nil {
				return err
			}
			expect(t, what+" scan", sc, refReduce(t, op, in[:r+1]))
			return nil
		})
		if err != nil {
			t.Fatalf("%v %v p=%d %v: %v", typ, sop, p, alg, err)
		}
	}
}

var typeTests = []func(*testing.T, int, Algorithm){
	testType[int8], testType[int16], testType[int32], testType[int64],
	testType[uint8], testType[uint16], testType[uint32], testType[uint64],
	testType[float32], testType[float64], testType[simd.BFloat16], testType[simd.Float16],
	testType[complex64], testType[complex128],
	testType[simd.Float32Int32], testType[simd.Float64Int32], testType[simd.Int16Int32],
	testType[simd.Int32Int32], testType[simd.Int64Int32], testType[simd.Int64Int64],
}

func TestTypesAndOperators(t *testing.T) {
	ps := []int{2, 3, 5}
	if long {
		ps = append(ps, 8, 13)
	}
	for _, alg := range []Algorithm{Flat, Circulant, Replicated} {
		for _, p := range ps {
			for _, f := range typeTests {
				f(t, p, alg)
			}
		}
	}
}
