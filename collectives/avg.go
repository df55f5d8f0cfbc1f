package collectives

import (
	"fmt"

	"github.com/shmcoll/shmcoll/simd"
)

// Avg is the average operator (torch's ReduceOp.AVG, NCCL's ncclAvg) for
// the floating types: the call computes the sum exactly as [Sum] does (the
// same algorithms, operand order and kernels), and each rank then divides
// its result by the number of operands summed: p for [Allreduce],
// [Reduce] (at the root), [ReduceScatterBlock] and [ReduceScatter]; r+1 on
// rank r for [Scan] and r for [Exscan] (rank 0's result, left unchanged,
// is not divided). Since every rank divides the same sum in the same way,
// the results are bitwise the same on every rank, as Sum's are.
//
// The division, for each element:
//   - float32, float64: the IEEE quotient sum / p in the type (correctly
//     rounded);
//   - complex64, complex128: the real and imaginary parts divided by p
//     separately (not Go's complex division, which could round
//     differently);
//   - bfloat16, float16: the sum (rounded to the type, as Sum rounds it)
//     converted to float32, divided by p in float32 and rounded to the
//     type, ties to even. float32 has more than twice the precision plus
//     two bits, so the double rounding gives the correctly rounded
//     quotient of the half-precision sum.
//
// With one rank the result is the input. Integers and the pair types are
// refused with [ErrInvalidArgument] on every rank: an integer average
// would have to choose a rounding that a program may not expect; sum with
// [Sum] and divide as the program needs. Avg is not a binary operator:
// [Op.Apply] refuses it, and [Op.Builtin] reports false for it.
var Avg = Op{builtin: simd.Sum, name: "avg", hash: avgHash, commutative: true}

// avgHash identifies Avg in call descriptors: neither a built-in's (op+1)
// nor a user operator's (bit 63 set).
const avgHash = 1<<62 | 0x617667

// avgType reports whether Avg applies to t.
func avgType(t simd.Type) bool {
	switch t {
	case simd.Float32, simd.Float64, simd.BFloat16T, simd.Float16T, simd.Complex64, simd.Complex128:
		return true
	}
	return false
}

// errAvgType is the error of Avg on a type it does not apply to.
func errAvgType(t simd.Type) error {
	return fmt.Errorf("%w: operator avg is for floating types, not %v (use sum and divide)", ErrInvalidArgument, t)
}

// averaged divides the result of the call a that just ran by the number
// of its operands, if its operator is Avg.
func (c *Comm) averaged(a *call) {
	if a.opID == avgHash {
		c.divideResult(a)
	}
}

func (c *Comm) divideResult(a *call) {
	k := c.size
	switch a.coll {
	case CollScan:
		k = c.rank + 1
	case CollExscan:
		k = c.rank
	}
	if k > 1 {
		divide(a.typ, a.recv, k)
	}
}

// divide divides the elements of type t in b by k, as Avg documents.
func divide(t simd.Type, b []byte, k int) {
	switch t {
	case simd.Float32, simd.Complex64:
		v, d := simd.FromBytes[float32](b), float32(k)
		for i := range v {
			v[i] /= d
		}
	case simd.Float64, simd.Complex128:
		v, d := simd.FromBytes[float64](b), float64(k)
		for i := range v {
			v[i] /= d
		}
	case simd.BFloat16T:
		v, d := simd.FromBytes[simd.BFloat16](b), float32(k)
		for i := range v {
			v[i] = simd.BFloat16FromFloat32(v[i].Float32() / d)
		}
	case simd.Float16T:
		v, d := simd.FromBytes[simd.Float16](b), float32(k)
		for i := range v {
			v[i] = simd.Float16FromFloat32(v[i].Float32() / d)
		}
	}
}
