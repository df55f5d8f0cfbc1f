package mpi

import (
	"errors"
	"fmt"
)

// Datatype names an MPI element type. The zero value is invalid.
type Datatype int

// The element types with an MPI datatype. Byte moves raw bytes (MPI_BYTE); use
// it for element types MPI lacks (bfloat16, float16) in data movement.
const (
	Byte       Datatype = iota + 1 // MPI_BYTE
	Int8                           // MPI_INT8_T
	Int16                          // MPI_INT16_T
	Int32                          // MPI_INT32_T
	Int64                          // MPI_INT64_T
	Uint8                          // MPI_UINT8_T
	Uint16                         // MPI_UINT16_T
	Uint32                         // MPI_UINT32_T
	Uint64                         // MPI_UINT64_T
	Float32                        // MPI_FLOAT
	Float64                        // MPI_DOUBLE
	Complex64                      // MPI_C_FLOAT_COMPLEX
	Complex128                     // MPI_C_DOUBLE_COMPLEX
	numDatatypes
)

var datatypeInfo = [numDatatypes]struct {
	name string
	size int
}{
	Byte:       {"byte", 1},
	Int8:       {"int8", 1},
	Int16:      {"int16", 2},
	Int32:      {"int32", 4},
	Int64:      {"int64", 8},
	Uint8:      {"uint8", 1},
	Uint16:     {"uint16", 2},
	Uint32:     {"uint32", 4},
	Uint64:     {"uint64", 8},
	Float32:    {"float32", 4},
	Float64:    {"float64", 8},
	Complex64:  {"complex64", 8},
	Complex128: {"complex128", 16},
}

// Valid reports whether d is one of the declared datatypes.
func (d Datatype) Valid() bool { return d > 0 && d < numDatatypes }

// Size is the size of one element in bytes (0 for an invalid datatype).
func (d Datatype) Size() int {
	if !d.Valid() {
		return 0
	}
	return datatypeInfo[d].size
}

func (d Datatype) String() string {
	if !d.Valid() {
		return fmt.Sprintf("Datatype(%d)", int(d))
	}
	return datatypeInfo[d].name
}

// IsInteger reports whether d is an integer type (the bitwise operators apply).
func (d Datatype) IsInteger() bool { return d >= Int8 && d <= Uint64 }

// IsComplex reports whether d is a complex type (Min and Max do not apply).
func (d Datatype) IsComplex() bool { return d == Complex64 || d == Complex128 }

// Op names an MPI reduction operator. The zero value is invalid.
type Op int

// The predefined reduction operators.
const (
	Sum  Op = iota + 1 // MPI_SUM
	Prod               // MPI_PROD
	Min                // MPI_MIN
	Max                // MPI_MAX
	BAnd               // MPI_BAND
	BOr                // MPI_BOR
	BXor               // MPI_BXOR
	numOps
)

var opNames = [numOps]string{Sum: "sum", Prod: "prod", Min: "min", Max: "max", BAnd: "band", BOr: "bor", BXor: "bxor"}

// Valid reports whether o is one of the declared operators.
func (o Op) Valid() bool { return o > 0 && o < numOps }

func (o Op) String() string {
	if !o.Valid() {
		return fmt.Sprintf("Op(%d)", int(o))
	}
	return opNames[o]
}

// Applies reports whether MPI defines o for elements of type d.
func (o Op) Applies(d Datatype) bool {
	if !o.Valid() || !d.Valid() {
		return false
	}
	switch o {
	case BAnd, BOr, BXor:
		return d.IsInteger() || d == Byte
	case Min, Max:
		return d != Byte && !d.IsComplex()
	}
	return d != Byte
}

// ThreadLevel is an MPI thread support level.
type ThreadLevel int

// The MPI thread support levels, in increasing order.
const (
	ThreadSingle ThreadLevel = iota
	ThreadFunneled
	ThreadSerialized
	ThreadMultiple
)

func (l ThreadLevel) String() string {
	switch l {
	case ThreadSingle:
		return "single"
	case ThreadFunneled:
		return "funneled"
	case ThreadSerialized:
		return "serialized"
	case ThreadMultiple:
		return "multiple"
	}
	return fmt.Sprintf("ThreadLevel(%d)", int(l))
}

// Sentinel errors, for errors.Is.
var (
	// ErrArgument marks a bad argument found before calling MPI.
	ErrArgument = errors.New("mpi: bad argument")
	// ErrNotInitialized is returned by calls made before Init or after Finalize.
	ErrNotInitialized = errors.New("mpi: not initialized")
	// ErrInitialized is returned by a second Init.
	ErrInitialized = errors.New("mpi: already initialized")
)

// Error is a failure reported by the MPI library.
type Error struct {
	Call    string // the MPI function, e.g. "MPI_Allreduce"
	Code    int    // the MPI error code
	Class   int    // its MPI error class
	Message string // MPI_Error_string of the code
}

func (e *Error) Error() string {
	return fmt.Sprintf("mpi: %s: %s (error class %d)", e.Call, e.Message, e.Class)
}
