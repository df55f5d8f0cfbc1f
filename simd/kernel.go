package simd

import (
	"fmt"
	"os"
	"strings"
	"unsafe"
)

// maxK is the number of sources one pass of [Kernel.ReduceK] combines.
const maxK = 8

// genChunk is the block (bytes) over which the pure-Go path applies one source after
// another, so that the partial result stays in L1. A multiple of every element size.
const genChunk = 2048

// impl is one implementation of the kernels.
type impl uint8

const (
	implGeneric impl = iota
	implAVX2
	implAVX512
	numImpls
)

var implNames = [numImpls]string{"generic", "avx2", "avx512"}

func (i impl) String() string { return implNames[i] }

// Kernel reduces byte slices holding elements of one [Type] with one [Op]. Get it from
// [Lookup]; it is immutable and safe for concurrent use.
//
// All lengths are in bytes and must be equal and a multiple of the element size; the
// methods panic otherwise (a programming error, as with out-of-range indexing). Any
// alignment is accepted. The methods never allocate.
type Kernel struct {
	t    Type
	op   Op
	impl impl
	half int8 // 0, or halfBF16 / halfFP16: widened to float32
	gen  two  // pure-Go loop (not used for half types)
	genK many // pure-Go loop over k sources of a short vector, nil for none (ReduceK)
	asm  int  // vector function id (see callAsm), 0 for none
	nt   int  // its variant with non-temporal stores (dst aligned to gran), 0 for none
	gran int  // bytes the vector function handles per step (a power of two)
	mask int  // element size - 1 when it is a power of two (checkSize), else -1
}

const (
	halfBF16 = 1
	halfFP16 = 2
)

var (
	tables  [numImpls][numTypes][numOps]Kernel
	current impl
)

func init() {
	for i := range numImpls {
		if !implAvailable(i) {
			continue
		}
		for t := range numTypes {
			for op := range numOps {
				if Supports(t, op) {
					tables[i][t][op] = newKernel(i, t, op)
				}
			}
		}
	}
	for _, e := range asmKernels {
		if implAvailable(e.impl) {
			k := &tables[e.impl][e.t][e.op]
			k.asm, k.nt, k.gran = e.id, e.nt, e.gran
		}
	}
	current = chooseImpl(os.Getenv("SHMCOLL_SIMD"))
}

// chooseImpl returns the implementation for SHMCOLL_SIMD=s: the best available one for
// "" (or an unknown name), else the named one, or the best available below it.
func chooseImpl(s string) impl {
	best := implGeneric
	for i := range numImpls {
		if implAvailable(i) {
			best = i
		}
	}
	want := best
	for i := range numImpls {
		if strings.EqualFold(s, implNames[i]) {
			want = i
		}
	}
	for !implAvailable(want) {
		want--
	}
	return want
}

// Impl returns the name of the implementation in use: "avx512", "avx2" or "generic".
// It is chosen once at start-up from the CPU's features; SHMCOLL_SIMD=generic|avx2|avx512
// selects a narrower one, and the build tags noasm and purego leave only "generic".
func Impl() string { return implNames[current] }

func newKernel(i impl, t Type, op Op) Kernel {
	k := Kernel{t: t, op: op, impl: i, mask: -1}
	if sz := t.Size(); sz&(sz-1) == 0 {
		k.mask = sz - 1
	}
	switch t {
	case BFloat16T:
		k.half = halfBF16
	case Float16T:
		k.half = halfFP16
	default:
		k.gen = genericKernel(t, op)
		k.genK = genericKernelK(t, op)
	}
	return k
}

// Lookup returns the kernel for op on elements of type t, from the implementation in
// use (see [Impl]). The error wraps [ErrUnsupported] when op is not defined for t
// (see [Supports]).
func Lookup(t Type, op Op) (*Kernel, error) {
	return lookupImpl(current, t, op)
}

func lookupImpl(i impl, t Type, op Op) (*Kernel, error) {
	if !Supports(t, op) {
		return nil, fmt.Errorf("simd: %w: %v on %v", ErrUnsupported, op, t)
	}
	return &tables[i][t][op], nil
}

// Type is the element type of k.
func (k *Kernel) Type() Type { return k.t }

// Op is the operator of k.
func (k *Kernel) Op() Op { return k.op }

// Impl is the implementation k runs ("avx512", "avx2" or "generic"); pairs without a
// vector loop use the pure-Go loop inside any implementation.
func (k *Kernel) Impl() string {
	if k.asm == 0 {
		return implNames[implGeneric]
	}
	return implNames[k.impl]
}

func (k *Kernel) check(what string, n int, other int) {
	if n != other {
		panic(fmt.Sprintf("simd: %v %v %s: lengths differ (%d and %d bytes)", k.op, k.t, what, n, other))
	}
}

func (k *Kernel) checkSize(what string, n int) {
	if k.mask >= 0 && n&k.mask == 0 {
		return // no division for the power-of-two sizes
	}
	if n%k.t.Size() != 0 {
		panic(fmt.Sprintf("simd: %v %v %s: %d bytes is not a multiple of the element size %d", k.op, k.t, what, n, k.t.Size()))
	}
}

// Reduce computes dst = dst op src, element by element, with dst as the left operand.
func (k *Kernel) Reduce(dst, src []byte) { k.reduce3("Reduce", dst, dst, src, NonTemporalThreshold) }

// Reduce3 computes dst = a op b, element by element. dst may be a or b exactly (the
// same memory), but must not overlap them otherwise.
func (k *Kernel) Reduce3(dst, a, b []byte) { k.reduce3("Reduce3", dst, a, b, NonTemporalThreshold) }

// Reduce3Stream is Reduce3 with non-temporal stores to dst at any size
// (where the kernel has them and dst is neither a nor b): for a result
// that another core reads next, from a core whose modified lines that
// core reads slowly (vCPUs on different dies).
func (k *Kernel) Reduce3Stream(dst, a, b []byte) { k.reduce3("Reduce3Stream", dst, a, b, 0) }

// reduce3 is Reduce3 with non-temporal stores from nt bytes.
func (k *Kernel) reduce3(what string, dst, a, b []byte, nt int) {
	k.check(what, len(dst), len(a))
	k.check(what, len(dst), len(b))
	k.checkSize(what, len(dst))
	if len(dst) < k.gran && k.half == 0 {
		k.gen(dst, a, b) // shorter than one vector step (see ReduceK)
		return
	}
	if k.whole(len(dst), nt) {
		ptrs := [maxK]*byte{unsafe.SliceData(a), unsafe.SliceData(b)}
		callAsm(k.asm, unsafe.SliceData(dst), &ptrs, 2, len(dst))
		return
	}
	var p [maxK][]byte
	p[0], p[1] = a, b
	k.pass(dst, &p, 2, nt)
}

// whole reports whether n bytes are a short vector that the vector
// function takes whole, in regular stores (below nt): then the kernels call
// it straight away, without pass's array of sources, whose setup costs as
// much as the reduction of such a vector.
func (k *Kernel) whole(n, nt int) bool {
	return n <= smallBytes && n < nt && k.asm != 0 && n >= k.gran && n&(k.gran-1) == 0
}

// smallBytes is the longest vector that whole takes.
const smallBytes = 4 << 10

// ReduceK computes dst = ((s0 op s1) op s2) ... op s(k-1), k = len(srcs) >= 1, left to
// right. dst may be srcs[0] exactly, and must not overlap the other sources.
//
// Up to 8 sources are combined in one pass over memory. More sources take further
// passes, each combining dst with the next 7 sources: for integers and float32/float64
// the result is the same as the left-to-right definition, bit for bit. bfloat16 and
// float16 accumulate in float32 within a pass and round to their own type at the end of
// each pass (so once for k <= 8). With one source, ReduceK copies it.
func (k *Kernel) ReduceK(dst []byte, srcs [][]byte) {
	if len(srcs) == 0 {
		panic(fmt.Sprintf("simd: %v %v ReduceK: no sources", k.op, k.t))
	}
	k.checkSize("ReduceK", len(dst))
	for _, s := range srcs {
		k.check("ReduceK", len(dst), len(s))
	}
	if len(dst) < k.gran && k.half == 0 && len(srcs) > 1 {
		// Shorter than one vector step: the pure-Go loop straight away,
		// without the sources' array, which would cost more than the loop;
		// over all sources in one call where there is one (sums) and more
		// than two sources, one call per source otherwise (two sources:
		// the two-operand loop is the shorter).
		if k.genK != nil && len(srcs) > 2 {
			k.genK(dst, srcs)
			return
		}
		k.gen(dst, srcs[0], srcs[1])
		for _, s := range srcs[2:] {
			k.gen(dst, dst, s)
		}
		return
	}
	if len(srcs) >= 2 && len(srcs) <= maxK && k.whole(len(dst), NonTemporalThreshold) {
		var ptrs [maxK]*byte
		for j, s := range srcs {
			ptrs[j] = unsafe.SliceData(s)
		}
		callAsm(k.asm, unsafe.SliceData(dst), &ptrs, len(srcs), len(dst))
		return
	}
	var p [maxK][]byte
	m := copy(p[:], srcs)
	k.pass(dst, &p, m, NonTemporalThreshold)
	for rest := srcs[m:]; len(rest) > 0; {
		p[0] = dst
		c := copy(p[1:], rest)
		k.pass(dst, &p, c+1, NonTemporalThreshold)
		rest = rest[c:]
	}
}

// asmKernel is one entry of the generated table of vector functions: implementation,
// type, operator, function id (see callAsm), id of its non-temporal variant, and the
// bytes one vector step handles.
type asmKernel struct {
	impl impl
	t    Type
	op   Op
	id   int
	nt   int
	gran int
}

// pass computes dst = p[0] op ... op p[m-1], all of len(dst) bytes, 1 <= m <= maxK,
// with non-temporal stores from nt bytes.
func (k *Kernel) pass(dst []byte, p *[maxK][]byte, m, nt int) {
	if m == 1 {
		copy(dst, p[0])
		return
	}
	n := len(dst)
	lo, hi := 0, 0 // the part the vector function does
	if k.asm != 0 && n >= k.gran {
		id := k.asm
		if k.nt != 0 && n >= nt && !aliased(dst, p, m) {
			// align dst for the streaming stores; the head goes to the pure-Go loop
			if head := int(-uintptrOf(dst)) & (k.gran - 1); head%k.t.Size() == 0 {
				lo, id = head, k.nt
			}
		}
		hi = lo + (n-lo)&^(k.gran-1)
		var ptrs [maxK]*byte
		for j := range m {
			ptrs[j] = unsafe.SliceData(p[j][lo:])
		}
		callAsm(id, unsafe.SliceData(dst[lo:]), &ptrs, m, hi-lo)
	}
	if lo > 0 {
		k.generic(dst, p, m, 0, lo)
	}
	if hi < n {
		k.generic(dst, p, m, hi, n)
	}
}

// aliased reports whether dst is one of the sources. Non-temporal stores only pay when
// dst is not also read: otherwise its lines are in cache already, and bypassing the
// cache only makes the next reader fetch them from memory.
func aliased(dst []byte, p *[maxK][]byte, m int) bool {
	for j := range m {
		if unsafe.SliceData(p[j]) == unsafe.SliceData(dst) {
			return true
		}
	}
	return false
}

// generic computes dst[from:to] = p[0] op ... op p[m-1] with the pure-Go loops.
func (k *Kernel) generic(dst []byte, p *[maxK][]byte, m, from, to int) {
	if k.half != 0 {
		var q [maxK][]byte
		for j := range m {
			q[j] = p[j][from:to]
		}
		halfPass(k.half == halfBF16, k.op, dst[from:to], &q, m)
		return
	}
	for off := from; off < to; off += genChunk {
		end := min(off+genChunk, to)
		d := dst[off:end]
		k.gen(d, p[0][off:end], p[1][off:end])
		for j := 2; j < m; j++ {
			k.gen(d, d, p[j][off:end])
		}
	}
}

// genericKernel returns the pure-Go loop for (t, op), which [Supports].
func genericKernel(t Type, op Op) two {
	switch op {
	case Band:
		return band
	case Bor:
		return bor
	case Bxor:
		return bxor
	case MinLoc, MaxLoc:
		isMax := op == MaxLoc
		switch t {
		case Float32Int32T:
			return locKernel[float32, int32](isMax, 4, 8)
		case Float64Int32T:
			return locKernel[float64, int32](isMax, 8, 16)
		case Int16Int32T:
			return locKernel[int16, int32](isMax, 4, 8)
		case Int32Int32T:
			return locKernel[int32, int32](isMax, 4, 8)
		case Int64Int32T:
			return locKernel[int64, int32](isMax, 8, 16)
		case Int64Int64T:
			return locKernel[int64, int64](isMax, 8, 16)
		}
	}
	switch t {
	case Int8:
		return intKernel[int8](op)
	case Int16:
		return intKernel[int16](op)
	case Int32:
		return intKernel[int32](op)
	case Int64:
		return intKernel[int64](op)
	case Uint8:
		return intKernel[uint8](op)
	case Uint16:
		return intKernel[uint16](op)
	case Uint32:
		return intKernel[uint32](op)
	case Uint64:
		return intKernel[uint64](op)
	case Float32, Complex64:
		return floatKernel[float32](t, op)
	case Float64, Complex128:
		return floatKernel[float64](t, op)
	}
	panic("simd: no generic kernel for " + op.String() + " on " + t.String())
}

func intKernel[T integer](op Op) two {
	switch op {
	case Sum:
		return sumInt[T]
	case Prod:
		return prodInt[T]
	case Min:
		return minInt[T]
	case Max:
		return maxInt[T]
	case Land:
		return landInt[T]
	case Lor:
		return lorInt[T]
	}
	panic("simd: no integer kernel for " + op.String())
}

func floatKernel[T float](t Type, op Op) two {
	switch op {
	case Sum:
		return sumFloat[T]
	case Prod:
		if t == Complex64 || t == Complex128 {
			return prodComplex[T]
		}
		return prodFloat[T]
	case Min:
		return minFloat[T]
	case Max:
		return maxFloat[T]
	}
	panic("simd: no float kernel for " + op.String())
}
