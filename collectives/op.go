package collectives

import (
	"fmt"
	"hash/fnv"
	"sync"

	"github.com/shmcoll/shmcoll/simd"
)

// Op is a reduction operator: one of the built-in operators of [simd] (see
// [Builtin] and the variables Sum ... MaxLoc) or a user-defined one made by
// [NewOp].
type Op struct {
	builtin     simd.Op
	user        func(dst, src []byte) // dst = dst op src on raw elements
	userType    simd.Type             // the element type user was made for
	name        string
	hash        uint64 // identifies the operator in call descriptors
	commutative bool
}

// The built-in operators (MPI_SUM ... MPI_MAXLOC).
var (
	Sum    = Builtin(simd.Sum)
	Prod   = Builtin(simd.Prod)
	Min    = Builtin(simd.Min)
	Max    = Builtin(simd.Max)
	Band   = Builtin(simd.Band)
	Bor    = Builtin(simd.Bor)
	Bxor   = Builtin(simd.Bxor)
	Land   = Builtin(simd.Land)
	Lor    = Builtin(simd.Lor)
	MinLoc = Builtin(simd.MinLoc)
	MaxLoc = Builtin(simd.MaxLoc)
)

// Builtin returns the operator for a built-in [simd.Op]. All built-in
// operators are commutative.
func Builtin(op simd.Op) Op {
	return Op{builtin: op, name: op.String(), hash: uint64(op) + 1, commutative: true}
}

// NewOp returns a user-defined operator on elements of type T: fn(dst, src)
// must set dst[i] = dst[i] op src[i] for every i, with dst as the left
// operand, and must not keep the slices (they may be views of the shared
// arena). name identifies the operator across processes: ranks that pass
// operators of different names to one call get [ErrMismatch]. commutative
// says whether a op b == b op a; a non-commutative operator runs only on
// algorithms that combine operands in rank order (see the package
// documentation). A panic in fn aborts the communicator.
func NewOp[T simd.Element](name string, fn func(dst, src []T), commutative bool) Op {
	h := fnv.New64a()
	h.Write([]byte(name))
	return Op{
		user:        func(dst, src []byte) { fn(simd.FromBytes[T](dst), simd.FromBytes[T](src)) },
		userType:    simd.TypeOf[T](),
		name:        name,
		hash:        h.Sum64() | 1<<63, // never equal to a built-in's
		commutative: commutative,
	}
}

// Commutative reports whether the operator is commutative.
func (o Op) Commutative() bool { return o.commutative }

// Builtin reports the built-in operator o stands for, if it is one (false
// for user-defined operators), for callers that hand reductions to another
// library, such as collectives/hier to MPI.
func (o Op) Builtin() (simd.Op, bool) {
	return o.builtin, o.user == nil && o.hash != 0 && o.hash != avgHash
}

// Check reports whether o applies to elements of type t.
func (o Op) Check(t simd.Type) error {
	_, err := o.bind(t)
	return err
}

// Apply sets dst[i] = dst[i] op src[i] for the elements of type t in the
// raw bytes dst and src (of equal length), dst as the left operand: the
// building block of reductions done outside a [Comm]. A panic in a user
// operator is returned as an error.
func (o Op) Apply(t simd.Type, dst, src []byte) (err error) {
	r, err := o.bind(t)
	if err != nil {
		return err
	}
	if o.hash == avgHash {
		return fmt.Errorf("%w: Apply of avg, which is not a binary operator (see Avg)", ErrInvalidArgument)
	}
	if len(dst) != len(src) || len(dst)%t.Size() != 0 {
		return fmt.Errorf("%w: Apply on %d and %d bytes of %v", ErrInvalidArgument, len(dst), len(src), t)
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: operator %q panicked: %v", ErrInvalidArgument, o.name, p)
		}
	}()
	r.reduce(dst, src)
	return nil
}

// String returns the operator's name.
func (o Op) String() string { return o.name }

// reducer applies one operator to raw elements of one type. The built-in
// kernels come from [simd]; user operators are applied two operands at a
// time, left to right.
type reducer struct {
	k    *simd.Kernel
	user func(dst, src []byte)
	comm bool
	esz  int // a user operator's element size
}

// bind checks op for element type t and returns its reducer.
func (o Op) bind(t simd.Type) (reducer, error) {
	if o.user != nil {
		if o.userType != t {
			return reducer{}, fmt.Errorf("%w: operator %q is for %v, not %v", ErrInvalidArgument, o.name, o.userType, t)
		}
		return reducer{user: o.user, comm: o.commutative, esz: t.Size()}, nil
	}
	if o.hash == 0 {
		return reducer{}, fmt.Errorf("%w: zero Op (use Sum, ..., or NewOp)", ErrInvalidArgument)
	}
	if o.hash == avgHash && !avgType(t) {
		return reducer{}, errAvgType(t)
	}
	k, err := simd.Lookup(t, o.builtin)
	if err != nil {
		return reducer{}, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	return reducer{k: k, comm: true}, nil
}

// reduce computes dst = dst op src.
func (r *reducer) reduce(dst, src []byte) {
	if len(dst) == 0 {
		return
	}
	if r.k != nil {
		r.k.Reduce(dst, src)
		return
	}
	r.user(dst, src)
}

// reduce3 computes dst = a op b. dst may be a or b exactly (the same
// memory), as for simd's kernels, but must not overlap them otherwise.
func (r *reducer) reduce3(dst, a, b []byte) {
	if len(dst) == 0 {
		return
	}
	if r.k != nil {
		r.k.Reduce3(dst, a, b)
		return
	}
	if &dst[0] != &b[0] {
		simd.Copy(dst, a)
		r.user(dst, b)
		return
	}
	// dst is b: a user operator computes dst = dst op src only, so a
	// commutative one takes a as src, and a non-commutative one works on a
	// copy of a, a pooled piece at a time (no allocation per call).
	if r.comm {
		r.user(dst, a)
		return
	}
	t := aliasPool.Get().(*[aliasBytes]byte)
	step := aliasBytes / r.esz * r.esz
	for lo := 0; lo < len(dst); lo += step {
		hi := min(lo+step, len(dst))
		s := t[:hi-lo]
		copy(s, a[lo:hi])
		r.user(s, b[lo:hi])
		copy(dst[lo:hi], s)
	}
	aliasPool.Put(t)
}

// aliasBytes is the piece reduce3 copies the left operand through when a
// non-commutative user operator's result overwrites its right operand.
const aliasBytes = 16 << 10

var aliasPool = sync.Pool{New: func() any { return new([aliasBytes]byte) }}

// reduce3Stream is reduce3 storing dst non-temporally (simd's
// Reduce3Stream) if stream, for a result that other ranks read next.
func (r *reducer) reduce3Stream(dst, a, b []byte, stream bool) {
	if stream && r.k != nil && len(dst) > 0 {
		r.k.Reduce3Stream(dst, a, b)
		return
	}
	r.reduce3(dst, a, b)
}

// reduceK computes dst = ((s0 op s1) op s2) ... left to right; dst must not
// overlap srcs[1:].
func (r *reducer) reduceK(dst []byte, srcs [][]byte) {
	if len(dst) == 0 {
		return
	}
	if r.k != nil {
		r.k.ReduceK(dst, srcs)
		return
	}
	simd.Copy(dst, srcs[0])
	for _, s := range srcs[1:] {
		r.user(dst, s)
	}
}

// kernelCache holds the kernels of the built-in operators by (type,
// operator), direct-mapped in one cache line, so that the small-call path
// finds the kernel of every operator a program alternates without
// binding it: a miss costs a table lookup in simd, never the general path.
type kernelCache [4]struct {
	key uint64 // type<<8 | operator hash (a built-in's is below 256); 0: empty
	k   *simd.Kernel
}

// cacheKey is the kernelCache key of op for t. Only a built-in's hash is
// below 256 (the others have bit 62 or 63 set), so no other operator's key
// equals a cached one: one compare finds the kernel.
func cacheKey(t simd.Type, hash uint64) uint64 { return hash | uint64(t)<<8 }

// get returns the cached kernel of the operator of hash for elements of
// type t, nil if none: for a miss, a user-defined operator, Avg, the zero
// Op (an empty entry holds nil) or an unsupported pair, which the general
// path reports.
func (kc *kernelCache) get(t simd.Type, hash uint64) *simd.Kernel {
	key := cacheKey(t, hash)
	if e := &kc[key%uint64(len(kc))]; e.key == key {
		return e.k
	}
	return nil
}

// fill looks the kernel get missed up and caches it.
func (kc *kernelCache) fill(t simd.Type, op *Op) *simd.Kernel {
	if op.user != nil || op.hash == 0 || op.hash >= 256 {
		return nil
	}
	k, err := simd.Lookup(t, op.builtin)
	if key := cacheKey(t, op.hash); err == nil {
		kc[key%uint64(len(kc))].key, kc[key%uint64(len(kc))].k = key, k
	}
	return k
}
