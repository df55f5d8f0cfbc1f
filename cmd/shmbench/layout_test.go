package main

import (
	"testing"

	"github.com/shmcoll/shmcoll/simd"
)

// TestLayoutInverse checks that source and dest describe the same data
// movement: every result element comes from inputs that exist, and every
// input element lands where source says it comes from.
func TestLayoutInverse(t *testing.T) {
	for _, coll := range benchColls {
		if coll == "barrier" {
			continue
		}
		for p := 1; p <= 6; p++ {
			for _, bytes := range []int64{1, 8, 24, 1000, 4096} {
				l := newLayout(coll, bytes, 8, p)
				if l.n < 1 || (l.m > 0 && l.n < l.m) {
					t.Fatalf("%s p=%d %d B: n=%d m=%d", coll, p, bytes, l.n, l.m)
				}
				for r := range p {
					for i := range l.recvLen(r) {
						qlo, qhi, j, ok := l.source(r, i)
						if !ok {
							if coll != "exscan" || r != 0 {
								t.Fatalf("%s p=%d r=%d i=%d: no source", coll, p, r, i)
							}
							continue
						}
						if qlo < 0 || qhi > p || qlo >= qhi {
							t.Fatalf("%s p=%d r=%d i=%d: ranks %d..%d", coll, p, r, i, qlo, qhi)
						}
						for q := qlo; q < qhi; q++ {
							if j < 0 || j >= l.inputLen(q) {
								t.Fatalf("%s p=%d r=%d i=%d: input %d of rank %d (len %d)", coll, p, r, i, j, q, l.inputLen(q))
							}
							dr, di, ok := l.dest(q, j)
							if !ok || (dr != r && dr != -1) || di != i {
								t.Fatalf("%s p=%d %d B: result %d of rank %d from input %d of rank %d, which goes to rank %d at %d", coll, p, bytes, i, r, j, q, dr, di)
							}
						}
					}
				}
				if coll == "alltoallv" {
					for q := range p {
						s, rc := 0, 0
						for tt := range p {
							s += l.scount[q][tt]
							rc += l.rcount[q][tt]
						}
						if s != l.n || rc != l.n {
							t.Fatalf("alltoallv p=%d: rank %d sends %d, receives %d, want %d", p, q, s, rc, l.n)
						}
					}
				}
			}
		}
	}
}

// TestValuesExact checks that the reference results fit the element
// types exactly: the largest sum and product of p inputs converts back to
// the same integer.
func TestValuesExact(t *testing.T) {
	for _, typ := range []simd.Type{simd.BFloat16T, simd.Float16T, simd.Float32, simd.Float64} {
		for _, p := range []int{2, 3, 8, 56} {
			for _, op := range []simd.Op{simd.Sum, simd.Prod} {
				v, err := newValues(typ, op, p)
				if err != nil {
					t.Fatal(err)
				}
				for j := range 64 {
					for it := -1; it < 8; it++ {
						acc := v.at(0, j, it, j)
						for q := 1; q < p; q++ {
							acc = v.combine(acc, v.at(q, j, it, j))
						}
						if back := toFloat(typ, acc); back != float64(acc) {
							t.Fatalf("%v %v p=%d: %d becomes %v", typ, op, p, acc, back)
						}
					}
				}
			}
		}
	}
	if _, err := newValues(simd.Float32Int32T, simd.MinLoc, 2); err == nil {
		t.Error("pair type accepted")
	}
}

func toFloat(typ simd.Type, x int64) float64 {
	switch typ {
	case simd.BFloat16T:
		return float64(converter[simd.BFloat16]()(x).Float32())
	case simd.Float16T:
		return float64(converter[simd.Float16]()(x).Float32())
	case simd.Float32:
		return float64(converter[float32]()(x))
	}
	return converter[float64]()(x)
}
