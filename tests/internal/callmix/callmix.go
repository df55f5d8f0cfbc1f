// Package callmix generates random collective calls that every rank of a
// communicator derives identically from a shared seed, runs them, and checks
// every element of every result exactly. The fault, soak and misuse tests of
// package tests use it in processes (tests/internal/faultrank) and in
// goroutines.
//
// Inputs are small integers, so that sums, minima and maxima are exact in
// every type (integer products wrap identically on every rank; products are
// not drawn for floating-point types).
package callmix

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"

	"github.com/shmcoll/shmcoll/collectives"
)

// Colls are the collectives a mix draws from.
var Colls = []collectives.Collective{
	collectives.CollAllreduce, collectives.CollReduceScatterBlock, collectives.CollReduceScatter,
	collectives.CollAllgather, collectives.CollAllgatherv, collectives.CollBcast, collectives.CollReduce,
	collectives.CollBarrier, collectives.CollAlltoall, collectives.CollAlltoallv, collectives.CollScatter,
	collectives.CollGather, collectives.CollScan, collectives.CollExscan,
}

// Types are the element types a mix draws from.
var Types = []string{"int32", "int64", "uint8", "float32", "float64"}

// OpUserSum is the name of the user-defined operator of a mix: a
// commutative sum on int64 made with collectives.NewOp.
const OpUserSum = "usum"

// Ops are the operator names a mix draws from (the built-ins by their
// simd names, and OpUserSum).
var Ops = []string{"sum", "min", "max", "prod", "band", "bor", "bxor", OpUserSum}

// UserSum is the operator named OpUserSum.
var UserSum = collectives.NewOp("usum", func(dst, src []int64) {
	for i := range dst {
		dst[i] += src[i]
	}
}, true)

// Spec is one call, the same on every rank.
type Spec struct {
	Call    int // index of the call in its stream, mixed into the inputs
	Coll    collectives.Collective
	Type    string
	Op      string
	N       int   // elements per rank or per block (see collectives' docs)
	Root    int   // bcast, reduce, scatter, gather
	InPlace bool  // allreduce, scan: send nil
	Counts  []int // reduce_scatter, allgatherv: per block; alltoallv: p×p matrix, row = sender
}

func (s Spec) String() string {
	return fmt.Sprintf("call %d: %v %s %s n=%d root=%d inplace=%v", s.Call, s.Coll, s.Type, s.Op, s.N, s.Root, s.InPlace)
}

// Gen draws the next call for p ranks; maxN bounds the element counts.
func Gen(rng *rand.Rand, p, call, maxN int) Spec {
	s := Spec{Call: call, Coll: Colls[rng.IntN(len(Colls))], Type: Types[rng.IntN(len(Types))]}
	switch rng.IntN(8) {
	case 0:
		s.N = rng.IntN(3) // 0, 1, 2
	case 1, 2, 3:
		s.N = 1 + rng.IntN(64)
	case 4, 5, 6:
		s.N = 1 + rng.IntN(4096)
	default:
		s.N = 1 + rng.IntN(maxN)
	}
	s.N = min(s.N, maxN)
	s.Root = rng.IntN(p)
	s.InPlace = rng.IntN(4) == 0
	for {
		s.Op = Ops[rng.IntN(len(Ops))]
		isFloat := s.Type == "float32" || s.Type == "float64"
		switch {
		case s.Op == OpUserSum:
			s.Type = "int64"
		case isFloat && s.Op != "sum" && s.Op != "min" && s.Op != "max":
			continue
		}
		break
	}
	switch s.Coll {
	case collectives.CollReduceScatter, collectives.CollAllgatherv:
		s.Counts = make([]int, p)
		for j := range s.Counts {
			s.Counts[j] = rng.IntN(s.N + 1)
		}
	case collectives.CollAlltoallv:
		s.Counts = make([]int, p*p)
		for j := range s.Counts {
			s.Counts[j] = rng.IntN(s.N/max(1, p) + 2)
		}
	}
	return s
}

// input is element i of rank r's input of call k.
func input(r, k, i int) int { return (r*7+i*3+k*5)%13 + 1 }

// CheckError reports a wrong result.
type CheckError struct {
	Spec  Spec
	Rank  int
	Index int
	Got   string
	Want  string
}

func (e *CheckError) Error() string {
	return fmt.Sprintf("WRONG RESULT rank %d %v: element %d = %s, want %s", e.Rank, e.Spec, e.Index, e.Got, e.Want)
}

// ErrBadSpec is returned for a spec the mix cannot run.
var ErrBadSpec = errors.New("callmix: bad spec")

// Run makes the call s on c and checks its result exactly.
func Run(ctx context.Context, c *collectives.Comm, s Spec) error {
	switch s.Type {
	case "int32":
		return run[int32](ctx, c, s)
	case "int64":
		return run[int64](ctx, c, s)
	case "uint8":
		return run[uint8](ctx, c, s)
	case "float32":
		return run[float32](ctx, c, s)
	case "float64":
		return run[float64](ctx, c, s)
	}
	return fmt.Errorf("%w: type %q", ErrBadSpec, s.Type)
}

type num interface {
	int32 | int64 | uint8 | float32 | float64
}

func opOf[T num](name string) (collectives.Op, func(a, b T) T, error) {
	bits := func(f func(a, b int64) int64) func(a, b T) T {
		return func(a, b T) T {
			var z T
			switch any(z).(type) {
			case float32, float64:
				panic("bitwise operator on a float")
			}
			return T(f(int64(a), int64(b)))
		}
	}
	switch name {
	case "sum":
		return collectives.Sum, func(a, b T) T { return a + b }, nil
	case OpUserSum:
		return UserSum, func(a, b T) T { return a + b }, nil
	case "prod":
		return collectives.Prod, func(a, b T) T { return a * b }, nil
	case "min":
		return collectives.Min, func(a, b T) T { return min(a, b) }, nil
	case "max":
		return collectives.Max, func(a, b T) T { return max(a, b) }, nil
	case "band":
		return collectives.Band, bits(func(a, b int64) int64 { return a & b }), nil
	case "bor":
		return collectives.Bor, bits(func(a, b int64) int64 { return a | b }), nil
	case "bxor":
		return collectives.Bxor, bits(func(a, b int64) int64 { return a ^ b }), nil
	}
	return collectives.Op{}, nil, fmt.Errorf("%w: operator %q", ErrBadSpec, name)
}

// fill sets v[i] = input(r, k, off+i).
func fill[T num](v []T, r, k, off int) {
	for i := range v {
		v[i] = T(input(r, k, off+i))
	}
}

// fold is the reduction of element i over ranks lo..hi-1.
func fold[T num](f func(a, b T) T, lo, hi, k, i int) T {
	acc := T(input(lo, k, i))
	for q := lo + 1; q < hi; q++ {
		acc = f(acc, T(input(q, k, i)))
	}
	return acc
}

const poison = 0x5a

func run[T num](ctx context.Context, c *collectives.Comm, s Spec) error {
	r, p, k, n := c.Rank(), c.Size(), s.Call, s.N
	op, f, err := opOf[T](s.Op)
	if err != nil {
		return err
	}
	mk := func(m int) []T {
		v := make([]T, m)
		for i := range v {
			v[i] = T(poison)
		}
		return v
	}
	check := func(got []T, want func(i int) T) error {
		for i, g := range got {
			if w := want(i); g != w {
				return &CheckError{Spec: s, Rank: r, Index: i, Got: fmt.Sprint(g), Want: fmt.Sprint(w)}
			}
		}
		return nil
	}
	prefix := func(counts []int) []int {
		d := make([]int, len(counts)+1)
		for j, x := range counts {
			d[j+1] = d[j] + x
		}
		return d
	}
	switch s.Coll {
	case collectives.CollAllreduce:
		send, recv := mk(n), mk(n)
		fill(send, r, k, 0)
		if s.InPlace {
			copy(recv, send)
			send = nil
		}
		if err := collectives.Allreduce(ctx, c, send, recv, op); err != nil {
			return err
		}
		return check(recv, func(i int) T { return fold(f, 0, p, k, i) })
	case collectives.CollReduceScatterBlock:
		send, recv := mk(p*n), mk(n)
		fill(send, r, k, 0)
		if err := collectives.ReduceScatterBlock(ctx, c, send, recv, op); err != nil {
			return err
		}
		return check(recv, func(i int) T { return fold(f, 0, p, k, r*n+i) })
	case collectives.CollReduceScatter:
		d := prefix(s.Counts)
		send, recv := mk(d[p]), mk(s.Counts[r])
		fill(send, r, k, 0)
		if err := collectives.ReduceScatter(ctx, c, send, recv, s.Counts, op); err != nil {
			return err
		}
		return check(recv, func(i int) T { return fold(f, 0, p, k, d[r]+i) })
	case collectives.CollAllgather:
		send, recv := mk(n), mk(p*n)
		fill(send, r, k, 0)
		if err := collectives.Allgather(ctx, c, send, recv); err != nil {
			return err
		}
		return check(recv, func(i int) T { return T(input(i/max(n, 1), k, i%max(n, 1))) })
	case collectives.CollAllgatherv:
		d := prefix(s.Counts)
		send, recv := mk(s.Counts[r]), mk(d[p])
		fill(send, r, k, 0)
		if err := collectives.Allgatherv(ctx, c, send, recv, s.Counts, nil); err != nil {
			return err
		}
		return check(recv, func(i int) T {
			q := 0
			for d[q+1] <= i {
				q++
			}
			return T(input(q, k, i-d[q]))
		})
	case collectives.CollBcast:
		buf := mk(n)
		if r == s.Root {
			fill(buf, r, k, 0)
		}
		if err := collectives.Bcast(ctx, c, buf, s.Root); err != nil {
			return err
		}
		return check(buf, func(i int) T { return T(input(s.Root, k, i)) })
	case collectives.CollReduce:
		send := mk(n)
		fill(send, r, k, 0)
		var recv []T
		if r == s.Root {
			recv = mk(n)
		}
		if err := collectives.Reduce(ctx, c, send, recv, op, s.Root); err != nil {
			return err
		}
		return check(recv, func(i int) T { return fold(f, 0, p, k, i) })
	case collectives.CollBarrier:
		return collectives.Barrier(ctx, c)
	case collectives.CollAlltoall:
		send, recv := mk(p*n), mk(p*n)
		for j := range p {
			fill(send[j*n:(j+1)*n], r*p+j, k, 0)
		}
		if err := collectives.Alltoall(ctx, c, send, recv); err != nil {
			return err
		}
		return check(recv, func(i int) T { return T(input((i/max(n, 1))*p+r, k, i%max(n, 1))) })
	case collectives.CollAlltoallv:
		cnt := func(from, to int) int { return s.Counts[from*p+to] }
		sc, rc := make([]int, p), make([]int, p)
		for j := range p {
			sc[j], rc[j] = cnt(r, j), cnt(j, r)
		}
		sd, rd := prefix(sc), prefix(rc)
		send, recv := mk(sd[p]), mk(rd[p])
		for j := range p {
			fill(send[sd[j]:sd[j+1]], r*p+j, k, 0)
		}
		if err := collectives.Alltoallv(ctx, c, send, sc, nil, recv, rc, nil); err != nil {
			return err
		}
		return check(recv, func(i int) T {
			q := 0
			for rd[q+1] <= i {
				q++
			}
			return T(input(q*p+r, k, i-rd[q]))
		})
	case collectives.CollScatter:
		var send []T
		if r == s.Root {
			send = mk(p * n)
			for j := range p {
				fill(send[j*n:(j+1)*n], j, k, 0)
			}
		}
		recv := mk(n)
		if err := collectives.Scatter(ctx, c, send, recv, s.Root); err != nil {
			return err
		}
		return check(recv, func(i int) T { return T(input(r, k, i)) })
	case collectives.CollGather:
		send := mk(n)
		fill(send, r, k, 0)
		var recv []T
		if r == s.Root {
			recv = mk(p * n)
		}
		if err := collectives.Gather(ctx, c, send, recv, s.Root); err != nil {
			return err
		}
		return check(recv, func(i int) T { return T(input(i/max(n, 1), k, i%max(n, 1))) })
	case collectives.CollScan, collectives.CollExscan:
		send, recv := mk(n), mk(n)
		fill(send, r, k, 0)
		if s.InPlace {
			copy(recv, send)
			send = nil
		}
		if s.Coll == collectives.CollScan {
			if err := collectives.Scan(ctx, c, send, recv, op); err != nil {
				return err
			}
			return check(recv, func(i int) T { return fold(f, 0, r+1, k, i) })
		}
		if err := collectives.Exscan(ctx, c, send, recv, op); err != nil {
			return err
		}
		if r == 0 {
			if s.InPlace {
				return check(recv, func(i int) T { return T(input(0, k, i)) })
			}
			return check(recv, func(int) T { return T(poison) })
		}
		return check(recv, func(i int) T { return fold(f, 0, r, k, i) })
	}
	return fmt.Errorf("%w: collective %v", ErrBadSpec, s.Coll)
}

// Implements reports whether algorithm a implements coll: a call on two
// in-process ranks with a pinned fails with "does not implement" before any
// rank communicates otherwise.
func Implements(coll collectives.Collective, a collectives.Algorithm) bool {
	opt := collectives.Options{SlotBytes: 4096, Algorithms: map[collectives.Collective]collectives.Algorithm{coll: a}}
	s := Spec{Coll: coll, Type: "int32", Op: "sum", N: 2}
	switch coll {
	case collectives.CollReduceScatter, collectives.CollAllgatherv:
		s.Counts = []int{1, 2}
	case collectives.CollAlltoallv:
		s.Counts = []int{1, 2, 2, 1}
	}
	err := collectives.Run(2, opt, func(c *collectives.Comm) error { return Run(context.Background(), c, s) })
	return err == nil || !errors.Is(err, collectives.ErrInvalidArgument) || !containsNotImpl(err)
}

func containsNotImpl(err error) bool { return strings.Contains(err.Error(), "does not implement") }

// Algorithms lists every named algorithm (not Auto) but Direct and
// Single, which serve only some of the calls callmix makes, so that a pin
// of them fails the others with ErrInvalidArgument: Direct only buffers
// from collectives.Alloc (callmix passes Go buffers), Single only where
// cross-memory attach is on (not, for example, where ptrace is refused)
// and, for alltoall, calls not in place. Their own tests
// (collectives/direct_test.go, collectives/single_test.go) cover them.
func Algorithms() []collectives.Algorithm {
	var out []collectives.Algorithm
	for a := collectives.Auto + 1; a < 64; a++ {
		if _, err := collectives.ParseAlgorithm(a.String()); err != nil {
			break
		}
		if a != collectives.Direct && a != collectives.Single {
			out = append(out, a)
		}
	}
	return out
}

var implTable = sync.OnceValue(func() map[collectives.Collective][]collectives.Algorithm {
	m := map[collectives.Collective][]collectives.Algorithm{}
	for _, coll := range Colls {
		for _, a := range Algorithms() {
			if Implements(coll, a) {
				m[coll] = append(m[coll], a)
			}
		}
	}
	return m
})

// Implementers returns the algorithms that implement coll.
func Implementers(coll collectives.Collective) []collectives.Algorithm { return implTable()[coll] }

// RandomPins pins, for each collective, Auto or one of its algorithms.
func RandomPins(rng *rand.Rand) map[collectives.Collective]collectives.Algorithm {
	m := map[collectives.Collective]collectives.Algorithm{}
	for _, coll := range Colls {
		algs := append([]collectives.Algorithm{collectives.Auto}, Implementers(coll)...)
		m[coll] = algs[rng.IntN(len(algs))]
	}
	return m
}

// Format renders pins as coll=alg,... in the order of Colls.
func Format(pins map[collectives.Collective]collectives.Algorithm) string {
	out := ""
	for _, coll := range Colls {
		if a, ok := pins[coll]; ok && a != collectives.Auto {
			if out != "" {
				out += ","
			}
			out += coll.String() + "=" + a.String()
		}
	}
	return out
}
