package simd

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unsafe"
)

// ErrUnsupported is wrapped by the errors of [Lookup] and the typed helpers when an
// operator is not defined for a type (for example band on float32).
var ErrUnsupported = errors.New("unsupported operator and type")

// Type names an element type of a reduction.
type Type uint8

// The element types. The pair types hold a value and an int32 or int64 index, laid out
// like the C structs MPI uses for MPI_MINLOC and MPI_MAXLOC (see [Float32Int32]).
const (
	Int8 Type = iota
	Int16
	Int32
	Int64
	Uint8
	Uint16
	Uint32
	Uint64
	Float32
	Float64
	BFloat16T
	Float16T
	Complex64
	Complex128
	Float32Int32T // MPI_FLOAT_INT
	Float64Int32T // MPI_DOUBLE_INT
	Int16Int32T   // MPI_SHORT_INT
	Int32Int32T   // MPI_2INT
	Int64Int32T   // MPI_LONG_INT
	Int64Int64T   // (value, 64-bit index)
	numTypes
)

var typeInfo = [numTypes]struct {
	name  string
	alias []string
	size  int
}{
	Int8:          {"int8", nil, 1},
	Int16:         {"int16", nil, 2},
	Int32:         {"int32", nil, 4},
	Int64:         {"int64", nil, 8},
	Uint8:         {"uint8", nil, 1},
	Uint16:        {"uint16", nil, 2},
	Uint32:        {"uint32", nil, 4},
	Uint64:        {"uint64", nil, 8},
	Float32:       {"float32", nil, 4},
	Float64:       {"float64", nil, 8},
	BFloat16T:     {"bfloat16", []string{"bf16"}, 2},
	Float16T:      {"float16", []string{"fp16", "half"}, 2},
	Complex64:     {"complex64", nil, 8},
	Complex128:    {"complex128", nil, 16},
	Float32Int32T: {"float32_int32", []string{"float_int"}, 8},
	Float64Int32T: {"float64_int32", []string{"double_int"}, 16},
	Int16Int32T:   {"int16_int32", []string{"short_int"}, 8},
	Int32Int32T:   {"int32_int32", []string{"2int"}, 8},
	Int64Int32T:   {"int64_int32", []string{"long_int"}, 16},
	Int64Int64T:   {"int64_int64", nil, 16},
}

// Types lists every element type, in the order of their values.
func Types() []Type {
	ts := make([]Type, numTypes)
	for i := range ts {
		ts[i] = Type(i)
	}
	return ts
}

// Size is the size of one element in bytes (0 for an invalid type).
func (t Type) Size() int {
	if t >= numTypes {
		return 0
	}
	return typeInfo[t].size
}

// String is the type's name as [ParseType] accepts it ("float32", "bfloat16",
// "float64_int32", ...).
func (t Type) String() string {
	if t >= numTypes {
		return fmt.Sprintf("Type(%d)", uint8(t))
	}
	return typeInfo[t].name
}

// IsPair reports whether t is a (value, index) pair type for [MinLoc] and [MaxLoc].
func (t Type) IsPair() bool { return t >= Float32Int32T && t < numTypes }

// ParseType returns the type named s (case-insensitive): a name that [Type.String]
// returns, or an alias: bf16, fp16, half, and the MPI pair names float_int, double_int,
// short_int, 2int and long_int.
func ParseType(s string) (Type, error) {
	l := strings.ToLower(s)
	for t := range numTypes {
		if typeInfo[t].name == l {
			return t, nil
		}
		for _, a := range typeInfo[t].alias {
			if a == l {
				return t, nil
			}
		}
	}
	return 0, fmt.Errorf("simd: unknown type %q", s)
}

// Op names a reduction operator.
type Op uint8

// The operators, as MPI defines them (MPI_SUM ... MPI_MAXLOC).
const (
	Sum Op = iota
	Prod
	Min
	Max
	Band
	Bor
	Bxor
	Land
	Lor
	MinLoc
	MaxLoc
	numOps
)

var opNames = [numOps]string{"sum", "prod", "min", "max", "band", "bor", "bxor", "land", "lor", "minloc", "maxloc"}

// Ops lists every operator, in the order of their values.
func Ops() []Op {
	os := make([]Op, numOps)
	for i := range os {
		os[i] = Op(i)
	}
	return os
}

// String is the operator's name as [ParseOp] accepts it.
func (o Op) String() string {
	if o >= numOps {
		return fmt.Sprintf("Op(%d)", uint8(o))
	}
	return opNames[o]
}

// ParseOp returns the operator named s (case-insensitive): sum, prod, min, max, band,
// bor, bxor, land, lor, minloc or maxloc.
func ParseOp(s string) (Op, error) {
	l := strings.ToLower(s)
	for o := range numOps {
		if opNames[o] == l {
			return o, nil
		}
	}
	return 0, fmt.Errorf("simd: unknown operator %q", s)
}

// Supports reports whether op is defined for t:
//   - sum, prod, min, max: integers, float32, float64, bfloat16, float16;
//   - sum, prod: also complex64 and complex128;
//   - band, bor, bxor, land, lor: integers;
//   - minloc, maxloc: the pair types.
func Supports(t Type, op Op) bool {
	if t >= numTypes || op >= numOps {
		return false
	}
	integer := t <= Uint64
	switch op {
	case Sum, Prod:
		return t <= Complex128
	case Min, Max:
		return t <= Float16T
	case Band, Bor, Bxor, Land, Lor:
		return integer
	default: // MinLoc, MaxLoc
		return t.IsPair()
	}
}

// Commutative reports whether op is commutative. Every operator here is commutative as a
// mathematical operation; the results are still computed in the documented operand order
// so that NaN payloads and bfloat16/float16 rounding are reproducible.
func (o Op) Commutative() bool { return o < numOps }

// Float32Int32 is the element of [Float32Int32T] (C struct {float; int}, MPI_FLOAT_INT).
type Float32Int32 struct {
	Value float32
	Index int32
}

// Float64Int32 is the element of [Float64Int32T] (C struct {double; int}, MPI_DOUBLE_INT):
// 16 bytes, the last 4 padding; kernels write the padding as zeros.
type Float64Int32 struct {
	Value float64
	Index int32
	_     int32
}

// Int16Int32 is the element of [Int16Int32T] (C struct {short; int}, MPI_SHORT_INT):
// 8 bytes, with 2 bytes of padding after Value; kernels write the padding as zeros.
type Int16Int32 struct {
	Value int16
	_     int16
	Index int32
}

// Int32Int32 is the element of [Int32Int32T] (MPI_2INT).
type Int32Int32 struct {
	Value int32
	Index int32
}

// Int64Int32 is the element of [Int64Int32T] (C struct {long; int} on LP64, MPI_LONG_INT):
// 16 bytes, the last 4 padding; kernels write the padding as zeros.
type Int64Int32 struct {
	Value int64
	Index int32
	_     int32
}

// Int64Int64 is the element of [Int64Int64T].
type Int64Int64 struct {
	Value int64
	Index int64
}

// Element is the set of Go types that have a [Type]: the numeric types, int, uint and
// uintptr (as the sized integer of their size on the platform), any type defined on one
// of them (type Weight float32), [BFloat16], [Float16] and the pair types.
//
// The half-precision types are defined on uint16, so the term ~uint16 already holds
// them: Go rejects a union that lists both ~uint16 and BFloat16 (overlapping terms), and
// the constraint cannot tell them apart. [TypeOf] does: it matches the exact types
// first, so BFloat16 and Float16 are [BFloat16T] and [Float16T], and only then goes by
// kind and size, so every other type whose underlying type is uint16 is [Uint16] (also
// a type defined on BFloat16 or Float16, whose underlying type is uint16 as well: use
// the simd types themselves for half-precision data). The pair types are listed
// exactly, without ~.
type Element interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~int | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uint | ~uintptr |
		~float32 | ~float64 | ~complex64 | ~complex128 |
		Float32Int32 | Float64Int32 | Int16Int32 | Int32Int32 | Int64Int32 | Int64Int64
}

// TypeOf returns the [Type] of T: the type itself for the exact element types, and for
// the others (int, uint, uintptr, defined types) the type of their kind and size, so
// that the kernels of the sized type apply to them unchanged (the collectives pass
// elements as bytes, see [AsBytes]).
func TypeOf[T Element]() Type {
	// The common types are matched here and the others out of line
	// (typeOf), so that TypeOf inlines.
	var z T
	switch any(z).(type) {
	case float64:
		return Float64
	case float32:
		return Float32
	case int64:
		return Int64
	}
	return typeOf((*T)(nil))
}

// typeOf is [TypeOf] of the element type that p points to (a nil *T, which
// converts to any without allocating).
func typeOf(p any) Type {
	switch p.(type) {
	case *int8:
		return Int8
	case *int16:
		return Int16
	case *int32:
		return Int32
	case *int64:
		return Int64
	case *uint8:
		return Uint8
	case *uint16:
		return Uint16
	case *uint32:
		return Uint32
	case *uint64:
		return Uint64
	case *float32:
		return Float32
	case *float64:
		return Float64
	case *BFloat16:
		return BFloat16T
	case *Float16:
		return Float16T
	case *complex64:
		return Complex64
	case *complex128:
		return Complex128
	case *Float32Int32:
		return Float32Int32T
	case *Float64Int32:
		return Float64Int32T
	case *Int16Int32:
		return Int16Int32T
	case *Int32Int32:
		return Int32Int32T
	case *Int64Int32:
		return Int64Int32T
	case *Int64Int64:
		return Int64Int64T
	}
	return kindType(reflect.TypeOf(p).Elem())
}

// kindType is the Type of t, a numeric kind, by kind and size.
func kindType(t reflect.Type) Type {
	var bySize [9]Type
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		bySize = [9]Type{1: Int8, 2: Int16, 4: Int32, 8: Int64}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		bySize = [9]Type{1: Uint8, 2: Uint16, 4: Uint32, 8: Uint64}
	case reflect.Float32:
		return Float32
	case reflect.Float64:
		return Float64
	case reflect.Complex64:
		return Complex64
	case reflect.Complex128:
		return Complex128
	default:
		panic("simd: TypeOf of " + t.String()) // not in Element
	}
	return bySize[t.Size()]
}

// AsBytes returns the memory of s as a byte slice, without copying.
func AsBytes[T Element](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(s[0])))
}

// FromBytes returns b viewed as a slice of T, without copying. len(b) must be a multiple
// of the size of T; any alignment is accepted (the element types hold no pointers).
func FromBytes[T Element](b []byte) []T {
	var z T
	sz := int(unsafe.Sizeof(z))
	if len(b)%sz != 0 {
		panic(fmt.Sprintf("simd: FromBytes: %d bytes is not a multiple of the %d-byte %v", len(b), sz, TypeOf[T]()))
	}
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/sz)
}
