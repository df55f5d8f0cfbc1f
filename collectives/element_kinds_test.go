package collectives

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/shmcoll/shmcoll/simd"
)

type weight float32

type tick int

type meters float64

type flags16 uint16

// halfAlias is defined on simd.BFloat16; its underlying type is uint16, so
// the collectives treat it as uint16.
type halfAlias simd.BFloat16

// kindNum is the numeric subset of simd.Element that the test computes in.
type kindNum interface {
	~int | ~uint | ~uintptr | ~float32 | ~float64 | ~uint16
}

// kindFamilies runs allreduce, bcast, allgather, alltoall and reduce of T
// with n elements per rank, checks the results exactly and that every call
// ran on the kernels and descriptor of type want.
func kindFamilies[T kindNum](c *Comm, n int, want simd.Type) error {
	p, r := c.Size(), c.Rank()
	typ := func(what string) error {
		if c.desc.typ() != want {
			return fmt.Errorf("%s of %T ran as %v, want %v", what, T(0), c.desc.typ(), want)
		}
		return nil
	}
	x := func(q, i int) T { return T(q*7 + i%50) }
	mine := make([]T, n)
	for i := range mine {
		mine[i] = x(r, i)
	}
	sum := make([]T, n)
	if err := Allreduce(bg, c, mine, sum, Sum); err != nil {
		return err
	}
	for i := range sum {
		if w := T(p*(i%50) + 7*p*(p-1)/2); sum[i] != w {
			return fmt.Errorf("allreduce %T [%d]: %v, want %v", T(0), i, sum[i], w)
		}
	}
	if err := typ("allreduce"); err != nil {
		return err
	}
	buf := make([]T, n)
	if r == p-1 {
		copy(buf, mine)
	}
	if err := Bcast(bg, c, buf, p-1); err != nil {
		return err
	}
	for i := range buf {
		if buf[i] != x(p-1, i) {
			return fmt.Errorf("bcast %T [%d]: %v", T(0), i, buf[i])
		}
	}
	if err := typ("bcast"); err != nil {
		return err
	}
	all := make([]T, p*n)
	if err := Allgather(bg, c, mine, all); err != nil {
		return err
	}
	for q := range p {
		for i := range n {
			if all[q*n+i] != x(q, i) {
				return fmt.Errorf("allgather %T [%d][%d]: %v", T(0), q, i, all[q*n+i])
			}
		}
	}
	if err := typ("allgather"); err != nil {
		return err
	}
	a2aIn, a2a := make([]T, p*n), make([]T, p*n)
	for j := range p {
		for i := range n {
			a2aIn[j*n+i] = T(r*5 + j + i%9)
		}
	}
	if err := Alltoall(bg, c, a2aIn, a2a); err != nil {
		return err
	}
	for q := range p {
		for i := range n {
			if w := T(q*5 + r + i%9); a2a[q*n+i] != w {
				return fmt.Errorf("alltoall %T [%d][%d]: %v, want %v", T(0), q, i, a2a[q*n+i], w)
			}
		}
	}
	if err := typ("alltoall"); err != nil {
		return err
	}
	var mx []T
	if r == 0 {
		mx = make([]T, n)
	}
	if err := Reduce(bg, c, mine, mx, Max, 0); err != nil {
		return err
	}
	for i := range mx {
		if mx[i] != x(p-1, i) {
			return fmt.Errorf("reduce max %T [%d]: %v", T(0), i, mx[i])
		}
	}
	return typ("reduce")
}

// TestElementKinds: int, uint, uintptr and defined types run every
// collective family with the kernels of their sized type, on the small-call
// path (n = 3) and the general one with several segments (n = 600).
func TestElementKinds(t *testing.T) {
	intT := [9]simd.Type{4: simd.Int32, 8: simd.Int64}[unsafe.Sizeof(int(0))]
	uintT := [9]simd.Type{4: simd.Uint32, 8: simd.Uint64}[unsafe.Sizeof(uint(0))]
	for _, p := range []int{1, 2, 3, 4} {
		for _, n := range []int{3, 600} {
			t.Run(fmt.Sprintf("p=%d/n=%d", p, n), func(t *testing.T) {
				err := Run(p, Options{SlotBytes: 4096}, func(c *Comm) error {
					for _, err := range []error{
						kindFamilies[int](c, n, intT),
						kindFamilies[uint](c, n, uintT),
						kindFamilies[uintptr](c, n, uintT),
						kindFamilies[tick](c, n, intT),
						kindFamilies[weight](c, n, simd.Float32),
						kindFamilies[meters](c, n, simd.Float64),
						kindFamilies[flags16](c, n, simd.Uint16),
					} {
						if err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestHalfNotUint16: the same flags16 summed as bfloat16, float16, uint16
// and a type defined on BFloat16 (uint16 underneath): the half types round
// as floats, the others add as integers.
func TestHalfNotUint16(t *testing.T) {
	const p = 3
	bf, fp := simd.BFloat16FromFloat32(1.5), simd.Float16FromFloat32(1.5)
	err := Run(p, Options{}, func(c *Comm) error {
		b := []simd.BFloat16{bf}
		if err := Allreduce(bg, c, nil, b, Sum); err != nil {
			return err
		}
		if b[0].Float32() != 4.5 || c.desc.typ() != simd.BFloat16T {
			return fmt.Errorf("bfloat16: %v as %v", b[0].Float32(), c.desc.typ())
		}
		f := []simd.Float16{fp}
		if err := Allreduce(bg, c, nil, f, Sum); err != nil {
			return err
		}
		if f[0].Float32() != 4.5 || c.desc.typ() != simd.Float16T {
			return fmt.Errorf("float16: %v as %v", f[0].Float32(), c.desc.typ())
		}
		u := []uint16{uint16(bf)}
		if err := Allreduce(bg, c, nil, u, Sum); err != nil {
			return err
		}
		if u[0] != uint16(p*uint16(bf)) || c.desc.typ() != simd.Uint16 {
			return fmt.Errorf("uint16: %#x as %v", u[0], c.desc.typ())
		}
		h := []halfAlias{halfAlias(bf)}
		if err := Allreduce(bg, c, nil, h, Sum); err != nil {
			return err
		}
		if uint16(h[0]) != uint16(p*uint16(bf)) || c.desc.typ() != simd.Uint16 {
			return fmt.Errorf("halfAlias: %#x as %v", uint16(h[0]), c.desc.typ())
		}
		// A user operator made for bfloat16 does not apply to uint16.
		op := NewOp("bfmax", func(dst, src []simd.BFloat16) {}, true)
		if err := op.Check(simd.Uint16); err == nil {
			return fmt.Errorf("a bfloat16 operator applies to uint16")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
