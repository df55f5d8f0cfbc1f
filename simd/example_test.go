package simd_test

import (
	"fmt"

	"github.com/shmcoll/shmcoll/simd"
)

func ExampleLookup() {
	k, err := simd.Lookup(simd.Float32, simd.Sum)
	if err != nil {
		panic(err)
	}
	dst := []float32{1, 2, 3}
	src := []float32{10, 20, 30}
	k.Reduce(simd.AsBytes(dst), simd.AsBytes(src))
	fmt.Println(dst)

	_, err = simd.Lookup(simd.Float64, simd.Band)
	fmt.Println(err)
	// Output:
	// [11 22 33]
	// simd: unsupported operator and type: band on float64
}

func ExampleKernel_ReduceK() {
	k, _ := simd.Lookup(simd.Int32, simd.Max)
	a, b, c := []int32{1, 9, -4}, []int32{5, 2, -7}, []int32{3, 3, -1}
	dst := make([]int32, 3)
	k.ReduceK(simd.AsBytes(dst), [][]byte{simd.AsBytes(a), simd.AsBytes(b), simd.AsBytes(c)})
	fmt.Println(dst)
	// Output: [5 9 -1]
}

func ExampleKernel_Reduce3() {
	k, _ := simd.Lookup(simd.Float32Int32T, simd.MinLoc)
	a := []simd.Float32Int32{{Value: 2, Index: 0}, {Value: 1, Index: 3}}
	b := []simd.Float32Int32{{Value: 2, Index: 1}, {Value: 5, Index: 1}}
	dst := make([]simd.Float32Int32, 2)
	k.Reduce3(simd.AsBytes(dst), simd.AsBytes(a), simd.AsBytes(b))
	fmt.Println(dst)
	// Output: [{2 0} {1 3}]
}

func ExampleReduce() {
	dst := []simd.BFloat16{simd.BFloat16FromFloat32(1.5)}
	src := []simd.BFloat16{simd.BFloat16FromFloat32(2.25)}
	if err := simd.Reduce(simd.Sum, dst, src); err != nil {
		panic(err)
	}
	fmt.Println(dst[0].Float32())
	// Output: 3.75
}

func ExampleParseType() {
	t, _ := simd.ParseType("bf16")
	op, _ := simd.ParseOp("minloc")
	fmt.Println(t, t.Size(), op)
	// Output: bfloat16 2 minloc
}

func ExampleCopy() {
	src := []byte("shared memory")
	dst := make([]byte, len(src))
	simd.Copy(dst, src)
	fmt.Println(string(dst))
	// Output: shared memory
}
