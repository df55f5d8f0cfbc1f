package mpi

import "reflect"

// Elem is the set of Go element types with an MPI datatype: the sized
// numeric types, int, uint and uintptr, and types defined on them (as
// simd.Element takes them), each as the sized type of its kind and size.
type Elem interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~int | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uint | ~uintptr |
		~float32 | ~float64 | ~complex64 | ~complex128
}

// TypeOf is the Datatype of T, by its kind and size.
func TypeOf[T Elem]() Datatype {
	t := reflect.TypeFor[T]()
	var bySize [9]Datatype
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		bySize = [9]Datatype{1: Int8, 2: Int16, 4: Int32, 8: Int64}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		bySize = [9]Datatype{1: Uint8, 2: Uint16, 4: Uint32, 8: Uint64}
	case reflect.Float32:
		return Float32
	case reflect.Float64:
		return Float64
	case reflect.Complex64:
		return Complex64
	default: // reflect.Complex128, the last kind of Elem
		return Complex128
	}
	return bySize[t.Size()]
}
