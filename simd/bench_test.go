package simd

import (
	"fmt"
	"testing"
)

// Benchmarks count streamed bytes, as the issue defines them: every source read plus the
// destination written (Reduce: 3 bytes per byte of dst, ReduceK with 8 sources: 9,
// memmove: 2). Compare the kernels with impl=memmove of the same size in the same run:
//
//	go test -run - -bench 'Reduce/.*/bytes=262144$' -benchtime 2000x ./simd

var benchSizes = []int{4 << 10, 256 << 10, 64 << 20, 256 << 20}

// benchPairs are the (op, type) pairs benchmarked for every form.
var benchPairs = []struct {
	op Op
	t  Type
}{
	{Sum, Float32}, {Sum, Float64}, {Sum, Int32}, {Sum, Int64}, {Sum, Int8},
	{Sum, BFloat16T}, {Sum, Float16T}, {Prod, Float64}, {Min, Float32}, {Max, Int64},
	{Band, Uint64}, {Sum, Complex128}, {MinLoc, Float64Int32T},
}

var benchForms = []struct {
	name string
	srcs int // sources read, besides dst for "reduce"
	read int // bytes read per byte of dst
}{
	{"reduce", 1, 2},
	{"reduce3", 2, 2},
	{"reducek8", 8, 8},
}

// benchBuffers returns count buffers of n bytes of type t, keeping the last ones made
// for reuse (the largest sizes take hundreds of megabytes).
var benchBufs [][]byte

func benchBuffers(t Type, count, n int) [][]byte {
	for len(benchBufs) < count {
		benchBufs = append(benchBufs, nil)
	}
	for i := range count {
		if cap(benchBufs[i]) < n {
			benchBufs[i] = make([]byte, n)
		}
		benchBufs[i] = benchBufs[i][:n]
	}
	for i := range count {
		// ones of every type: keeps floats finite through repeated reductions
		b := benchBufs[i]
		one := make([]byte, t.Size())
		switch t {
		case Float32:
			le.PutUint32(one, 0x3f800000)
		case Float64, Complex128:
			le.PutUint64(one, 0x3ff0000000000000)
		case BFloat16T:
			le.PutUint16(one, 0x3f80)
		case Float16T:
			le.PutUint16(one, 0x3c00)
		default:
			one[0] = 1
		}
		for j := 0; j < len(b); j += len(one) {
			copy(b[j:], one)
		}
	}
	return benchBufs[:count]
}

func BenchmarkReduce(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("impl=memmove/op=copy/type=uint8/form=copy/bytes=%d", n), func(b *testing.B) {
			bufs := benchBuffers(Uint8, 2, n)
			b.SetBytes(int64(2 * n))
			b.ReportAllocs()
			for b.Loop() {
				copy(bufs[0], bufs[1])
			}
		})
		for _, i := range availableImpls() {
			for _, p := range benchPairs {
				for _, f := range benchForms {
					if f.srcs == 8 && n > 64<<20 {
						continue // 9 buffers of 256 MiB: too much for a shared machine
					}
					k, _ := lookupImpl(i, p.t, p.op)
					if i != implGeneric && k.asm == 0 {
						continue // same loop as impl=generic
					}
					name := fmt.Sprintf("impl=%v/op=%v/type=%v/form=%s/bytes=%d", i, p.op, p.t, f.name, n)
					b.Run(name, func(b *testing.B) {
						bufs := benchBuffers(p.t, f.srcs+1, n)
						dst, srcs := bufs[0], bufs[1:]
						b.SetBytes(int64((f.read + 1) * n))
						b.ReportAllocs()
						switch f.name {
						case "reduce":
							for b.Loop() {
								k.Reduce(dst, srcs[0])
							}
						case "reduce3":
							for b.Loop() {
								k.Reduce3(dst, srcs[0], srcs[1])
							}
						default:
							for b.Loop() {
								k.ReduceK(dst, srcs)
							}
						}
					})
				}
			}
		}
	}
}

func BenchmarkCopy(b *testing.B) {
	for _, n := range []int{4 << 10, 16 << 10, 32 << 10, 64 << 10, 256 << 10, 4 << 20, 16 << 20, 64 << 20, 256 << 20} {
		bufs := benchBuffers(Uint8, 2, n)
		b.Run(fmt.Sprintf("impl=memmove/bytes=%d", n), func(b *testing.B) {
			b.SetBytes(int64(2 * n))
			for b.Loop() {
				copy(bufs[0], bufs[1])
			}
		})
		b.Run(fmt.Sprintf("impl=string/bytes=%d", n), func(b *testing.B) {
			if !copyString(bufs[0][:1], bufs[1][:1]) {
				b.Skip("no enhanced REP MOVSB")
			}
			b.SetBytes(int64(2 * n))
			for b.Loop() {
				copyString(bufs[0], bufs[1])
			}
		})
		for _, i := range availableImpls() {
			if i == implGeneric {
				continue
			}
			b.Run(fmt.Sprintf("impl=%v/nt=1/bytes=%d", i, n), func(b *testing.B) {
				defer func(c impl) { current = c }(current)
				current = i
				b.SetBytes(int64(2 * n))
				for b.Loop() {
					copyNonTemporal(bufs[0], bufs[1])
				}
			})
		}
	}
}

// BenchmarkNonTemporal compares regular and non-temporal stores of the float32 sum
// kernels and of Copy by size, to place NonTemporalThreshold.
func BenchmarkNonTemporal(b *testing.B) {
	for _, n := range []int{1 << 20, 4 << 20, 16 << 20, 32 << 20, 64 << 20} {
		for _, nt := range []bool{false, true} {
			for _, i := range availableImpls() {
				if i == implGeneric {
					continue
				}
				k, _ := lookupImpl(i, Float32, Sum)
				for _, f := range benchForms {
					b.Run(fmt.Sprintf("impl=%v/form=%s/nt=%v/bytes=%d", i, f.name, nt, n), func(b *testing.B) {
						old := NonTemporalThreshold
						defer func() { NonTemporalThreshold = old }()
						NonTemporalThreshold = 1 << 62
						if nt {
							NonTemporalThreshold = 0
						}
						bufs := benchBuffers(Float32, f.srcs+1, n)
						dst, srcs := bufs[0], bufs[1:]
						b.SetBytes(int64((f.read + 1) * n))
						for b.Loop() {
							switch f.name {
							case "reduce":
								k.Reduce(dst, srcs[0])
							case "reduce3":
								k.Reduce3(dst, srcs[0], srcs[1])
							default:
								k.ReduceK(dst, srcs)
							}
						}
					})
				}
			}
		}
	}
}
