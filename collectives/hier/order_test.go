//go:build mpi

package hier

import (
	"context"
	"errors"
	"hash/fnv"
	"testing"

	"github.com/shmcoll/shmcoll/collectives"
	"github.com/shmcoll/shmcoll/mpi"
	"github.com/shmcoll/shmcoll/simd"
)

// A 2x2 matrix of integers mod 2^16 packed in one uint64 (a, b; c, d from
// the low bits up): one element, so no algorithm can cut a matrix apart.
func mat(a, b, c, d uint64) uint64 {
	return a&0xffff | (b&0xffff)<<16 | (c&0xffff)<<32 | (d&0xffff)<<48
}

func matMul(x, y uint64) uint64 {
	e := func(m uint64, k int) uint64 { return (m >> (16 * k)) & 0xffff }
	return mat(e(x, 0)*e(y, 0)+e(x, 1)*e(y, 2), e(x, 0)*e(y, 1)+e(x, 1)*e(y, 3),
		e(x, 2)*e(y, 0)+e(x, 3)*e(y, 2), e(x, 2)*e(y, 1)+e(x, 3)*e(y, 3))
}

// matProd is the non-commutative operator dst = dst · src.
var matProd = collectives.NewOp("mat2x2", func(dst, src []uint64) {
	for i := range dst {
		dst[i] = matMul(dst[i], src[i])
	}
}, false)

// matIn is rank r's matrix at index i: products of these in different
// orders differ.
func matIn(r, i int) uint64 {
	return mat(uint64((r+i)%5+1), uint64((3*r+i)%4), uint64((7*i+r)%3), uint64(1+r%2+i%3))
}

// matRef is the rank-order product at index i, computed sequentially.
func matRef(p, i int) uint64 {
	m := matIn(0, i)
	for r := 1; r < p; r++ {
		m = matMul(m, matIn(r, i))
	}
	return m
}

// irregular are the counts of the irregular tests: some ranks get nothing.
func irregular(p, scale int) []int {
	counts := make([]int, p)
	for q := range counts {
		counts[q] = ((q*3 + 1) % 5) * scale
	}
	return counts
}

// sameEverywhere fails the test unless every rank's v has the same bits.
func sameEverywhere(t *testing.T, what string, v []byte) {
	t.Helper()
	h := fnv.New64a()
	h.Write(v)
	sums := make([]uint64, mpi.World().Size())
	must(t, mpi.Allgather(mpi.World(), []uint64{h.Sum64()}, sums))
	for r, s := range sums {
		if s != sums[0] {
			t.Errorf("%s: rank %d's result differs from rank 0's", what, r)
			return
		}
	}
}

// TestRankNonCommutative checks the rank-order product of 2x2 matrices
// exactly, in every collective that reduces, with each algorithm.
func TestRankNonCommutative(t *testing.T) {
	ctx := context.Background()
	sizes := []int{1, 7, 1000, 40000}
	if quick() {
		sizes = []int{7, 1000}
	}
	for _, alg := range []Algorithm{Leader, MultiLane, Auto} {
		c := newComm(t, alg)
		p, r := c.Size(), c.Rank()
		check := func(what string, got []uint64, at func(k int) int) {
			t.Helper()
			for k := range got {
				if want := matRef(p, at(k)); got[k] != want {
					t.Errorf("%v %s: [%d] = %#x, want %#x", alg, what, k, got[k], want)
					return
				}
			}
		}
		for _, n := range sizes {
			send := make([]uint64, n)
			for i := range send {
				send[i] = matIn(r, i)
			}
			recv := make([]uint64, n)
			must(t, Allreduce(ctx, c, send, recv, matProd))
			check("allreduce", recv, func(k int) int { return k })
			sameEverywhere(t, "allreduce", simd.AsBytes(recv))

			root := (n + 1) % p
			var out []uint64
			if r == root {
				out = make([]uint64, n)
			}
			must(t, Reduce(ctx, c, send, out, matProd, root))
			check("reduce", out, func(k int) int { return k })

			counts := irregular(p, n/p+1)
			total := 0
			for _, k := range counts {
				total += k
			}
			in := make([]uint64, total)
			for i := range in {
				in[i] = matIn(r, i)
			}
			displ := packed(counts)[r]
			got := make([]uint64, counts[r])
			must(t, ReduceScatter(ctx, c, in, got, counts, matProd))
			check("reduce_scatter", got, func(k int) int { return displ + k })

			blk := make([]uint64, p*(n/p+1))
			for i := range blk {
				blk[i] = matIn(r, i)
			}
			must(t, ReduceScatterBlock(ctx, c, nil, blk, matProd))
			nb := len(blk) / p
			check("reduce_scatter_block in place", blk[r*nb:(r+1)*nb], func(k int) int { return r*nb + k })
		}
	}
}

// TestRankNonCommutativeRoundRobin: with nodes whose ranks are not
// consecutive, a non-commutative operator is refused on every rank.
func TestRankNonCommutativeRoundRobin(t *testing.T) {
	c := newCommOpt(t, Options{NodeOf: func(r int) int { return r % 2 }, ReturnErrors: true})
	if c.contiguous {
		t.Skip("round-robin nodes are consecutive here")
	}
	v := make([]uint64, 10)
	err := Allreduce(context.Background(), c, nil, v, matProd)
	if !errors.Is(err, collectives.ErrNotCommutative) {
		t.Fatalf("non-commutative operator on round-robin nodes: %v, want ErrNotCommutative", err)
	}
}

// irregularRS checks ReduceScatter with irregular counts, sum, against
// MPI_Reduce_scatter where MPI has the type and against our reference.
func irregularRS[T simd.Element](t *testing.T, c *Comm, scale int) {
	typ := simd.TypeOf[T]()
	p, r := c.Size(), c.Rank()
	counts := irregular(p, scale)
	wd := packed(counts)
	total := wd[p-1] + counts[p-1]
	for _, inPlace := range []bool{false, true} {
		send := make([]T, total)
		for i := range send {
			send[i] = conv[T](input(typ, simd.Sum, r, i))
		}
		var got []T
		if inPlace {
			buf := append([]T(nil), send...)
			must(t, ReduceScatter(context.Background(), c, nil, buf, counts, collectives.Sum))
			got = buf[wd[r] : wd[r]+counts[r]]
		} else {
			got = make([]T, counts[r])
			must(t, ReduceScatter(context.Background(), c, send, got, counts, collectives.Sum))
		}
		for k := range got {
			if want := conv[T](expect(typ, simd.Sum, p, wd[r]+k)); got[k] != want {
				t.Errorf("%v reduce_scatter scale %d inPlace=%v: [%d] = %v, want %v", typ, scale, inPlace, k, got[k], want)
				break
			}
		}
		if dt, mop, ok := byMPI(operator{t: typ, builtin: simd.Sum, isBuiltin: true}); ok && !inPlace {
			ref := make([]T, counts[r])
			must(t, mpi.World().ReduceScatter(simd.AsBytes(send), simd.AsBytes(ref), dt, mop, counts))
			if string(simd.AsBytes(ref)) != string(simd.AsBytes(got)) {
				t.Errorf("%v reduce_scatter scale %d: differs from MPI_Reduce_scatter", typ, scale)
			}
		}
	}
}

func scaled(counts []int, k int) []int {
	out := make([]int, len(counts))
	for i, n := range counts {
		out[i] = n * k
	}
	return out
}

// irregularAG checks Allgatherv with irregular counts, packed and with
// displacements (blocks in reverse rank order, gaps between), in place and
// not, against MPI_Allgatherv's result.
func irregularAG[T simd.Element](t *testing.T, c *Comm, scale int) {
	typ := simd.TypeOf[T]()
	p, r := c.Size(), c.Rank()
	counts := irregular(p, scale)
	for _, gaps := range []bool{false, true} {
		var displs []int
		size := 0
		if gaps {
			displs = make([]int, p)
			for q := p - 1; q >= 0; q-- {
				displs[q] = size + 1
				size += counts[q] + 1
			}
		} else {
			for _, n := range counts {
				size += n
			}
		}
		wd := displs
		if wd == nil {
			wd = packed(counts)
		}
		send := make([]T, counts[r])
		for i := range send {
			send[i] = conv[T](input(typ, simd.Sum, r, i))
		}
		ref := make([]T, size)
		must(t, mpi.World().Allgatherv(simd.AsBytes(send), simd.AsBytes(ref), mpi.Byte, scaled(counts, typ.Size()), scaled(wd, typ.Size())))
		for _, inPlace := range []bool{false, true} {
			got := make([]T, size)
			copy(got, ref) // the gaps keep their values
			for q := range counts {
				for k := range counts[q] {
					got[wd[q]+k] = conv[T](-1, 0)
				}
			}
			if inPlace {
				copy(got[wd[r]:], send)
				must(t, Allgatherv(context.Background(), c, nil, got, counts, displs))
			} else {
				must(t, Allgatherv(context.Background(), c, send, got, counts, displs))
			}
			if string(simd.AsBytes(ref)) != string(simd.AsBytes(got)) {
				t.Errorf("%v allgatherv scale %d gaps=%v inPlace=%v: differs from MPI_Allgatherv", typ, scale, gaps, inPlace)
			}
			sameEverywhere(t, typ.String()+" allgatherv", simd.AsBytes(got))
		}
	}
}

func irregularSuite(t *testing.T, c *Comm) {
	scales := []int{1, 333}
	if quick() {
		irregularRS[int32](t, c, 333)
		irregularRS[simd.BFloat16](t, c, 7)
		irregularAG[int64](t, c, 333)
		return
	}
	for _, s := range scales {
		irregularRS[int8](t, c, s)
		irregularRS[int16](t, c, s)
		irregularRS[int32](t, c, s)
		irregularRS[int64](t, c, s)
		irregularRS[uint8](t, c, s)
		irregularRS[uint16](t, c, s)
		irregularRS[uint32](t, c, s)
		irregularRS[uint64](t, c, s)
		irregularRS[float32](t, c, s)
		irregularRS[float64](t, c, s)
		irregularRS[simd.BFloat16](t, c, s)
		irregularRS[simd.Float16](t, c, s)
		irregularRS[complex64](t, c, s)
		irregularRS[complex128](t, c, s)
		irregularAG[int8](t, c, s)
		irregularAG[int32](t, c, s)
		irregularAG[simd.Float16](t, c, s)
		irregularAG[complex128](t, c, s)
	}
}

// TestRankIrregular runs reduce-scatter and allgatherv with irregular
// counts with each algorithm, and on round-robin nodes.
func TestRankIrregular(t *testing.T) {
	for _, alg := range []Algorithm{Leader, MultiLane} {
		irregularSuite(t, newComm(t, alg))
		irregularSuite(t, newCommOpt(t, Options{Algorithm: alg, NodeOf: func(r int) int { return r % 2 }}))
	}
}
