//go:build mpi

package main

/*
#include <stdint.h>
#include "shmcoll.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/shmcoll/shmcoll/collectives"
	"github.com/shmcoll/shmcoll/collectives/hier"
	"github.com/shmcoll/shmcoll/mpi"
	"github.com/shmcoll/shmcoll/shm"
	"github.com/shmcoll/shmcoll/simd"
)

// The entry points run on the host's thread that made the MPI call: a C
// thread calling into Go keeps its goroutine on that thread for the call,
// so shmcoll's waits and the progress calls they make run there too.

var bg = context.Background()

// commState is one served communicator: the rank's shmcoll communicator
// over the node's ranks, and scratch for the calls' count vectors.
type commState struct {
	c                *collectives.Comm // the node's ranks; Local() of h for a multi-node communicator
	h                *hier.Comm        // nil on one node
	rank, size       int
	counts, displs   []int
	rcounts, rdispls []int
}

var (
	commMu sync.Mutex
	// comms is indexed by the id C holds; replaced, never changed in
	// place, so that lookups need no lock.
	comms atomic.Pointer[[]*commState]
)

func lookup(id C.int) *commState {
	cs := comms.Load()
	if cs == nil || id < 0 || int(id) >= len(*cs) {
		return nil
	}
	return (*cs)[id]
}

func setComm(id int, s *commState) {
	old := comms.Load()
	var n []*commState
	if old != nil {
		n = append(n, (*old)...)
	}
	for len(n) <= id {
		n = append(n, nil)
	}
	n[id] = s
	comms.Store(&n)
}

// slotBytes is the size of each rank's slot in a communicator's arena:
// small, so that programs with many communicators fit a small /dev/shm;
// larger vectors are cut into segments.
var slotBytes = 1 << 20

var debug = os.Getenv("SHMCOLL_MPI_DEBUG") == "1"

func debugf(format string, args ...any) {
	if debug {
		fmt.Fprintf(os.Stderr, "shmcoll: pid %d: "+format+"\n", append([]any{os.Getpid()}, args...)...)
	}
}

// progress gives the MPI's progress engine a turn while a rank waits.
func progress() { C.sc_progress() }

//export shmcollStart
func shmcollStart() C.int {
	if err := loadBands(os.Getenv("SHMCOLL_MPI_BANDS")); err != nil {
		fmt.Fprintf(os.Stderr, "shmcoll: SHMCOLL_MPI_BANDS: %v; passing every call to the MPI\n", err)
		return 1
	}
	if v := os.Getenv("SHMCOLL_MPI_SLOT"); v != "" {
		n, err := parseBytes(v)
		if err != nil || n < 4096 || n > 1<<30 {
			fmt.Fprintf(os.Stderr, "shmcoll: SHMCOLL_MPI_SLOT=%q: want a size from 4K to 1G; passing every call to the MPI\n", v)
			return 1
		}
		slotBytes = int(n)
	}
	if C.sc_nice_bad != 0 { // threads.c read it at load
		fmt.Fprintf(os.Stderr, "shmcoll: SHMCOLL_MPI_NICE=%q: want a nice value from 0 to 19; passing every call to the MPI\n", os.Getenv("SHMCOLL_MPI_NICE"))
		return 1
	}
	if C.sc_lowered_nice > 0 {
		debugf("Go runtime threads at nice %d (%d lowered at load)", int(C.sc_lowered_nice), int(C.sc_lowered))
	} else {
		debugf("Go runtime threads at the host's priority")
	}
	minProcs()
	initOps()
	if err := mpi.Attach(); err != nil {
		debugf("attaching to the MPI: %v (communicators that span nodes pass)", err)
	}
	return 0
}

// minProcs gives the Go runtime at least two Ps. A rank bound to one core
// (Open MPI's default at np <= 2, MPICH's with -bind-to core) starts with
// GOMAXPROCS 1, and then the host thread's P, left in a system call state
// whenever the thread is back in C, is the only one: sysmon takes it at
// its next tick (with no idle P it assumes other work waits), hands it to
// another thread that finds nothing and sleeps, and having taken a P it
// goes on ticking every 20µs. Those wakeups run on the rank's own CPU
// while the MPI works, in passed calls too, and slow them. With a second
// P idle, sysmon leaves a P in a system call alone for longer (see
// docs/LIBSHMCOLL.md for when it still takes it) and backs off to ticks of
// up to 10ms. GOMAXPROCS set in the environment is kept.
func minProcs() {
	if n := runtime.GOMAXPROCS(0); n < 2 && os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(2)
		debugf("GOMAXPROCS %d raised to 2", n)
	}
}

// shmcollLockThread wires the calling host thread to the runtime's M that
// serves it, for good (runtime.LockOSThread); entry.c calls it once per
// thread, before the thread's other calls into Go. A thread the runtime
// starts while a locked thread runs Go is then made by the runtime's
// template thread, which runs at the lowered priority of the runtime's
// threads (threads.c), and not by the host thread at the host's
// (runtime.newm). It changes nothing else: a thread that enters Go from C
// is already tied to its M for the length of each call.
//
//export shmcollLockThread
func shmcollLockThread() { runtime.LockOSThread() }

//export shmcollNewName
func shmcollNewName(buf *C.char, n C.int) {
	name := "mpi_" + shm.NewName()
	b := unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(n))
	copy(b, name)
}

//export shmcollJoin
func shmcollJoin(name *C.char, rank, size C.int) C.int {
	opt := collectives.Options{SlotBytes: slotBytes, Progress: progress}
	if barrierAlg != collectives.Auto && os.Getenv("SHMCOLL_ALGO_BARRIER") == "" {
		opt.Algorithms = map[collectives.Collective]collectives.Algorithm{collectives.CollBarrier: barrierAlg}
	}
	c, err := collectives.Join(bg, C.GoString(name), int(rank), int(size), opt)
	if err != nil {
		debugf("joining %d ranks: %v", int(size), err)
		return -1
	}
	// alltoallv's band measures the most bytes one rank sends, which
	// every rank learns in the call's first step (entry.c passes the call
	// when the band at this p is empty).
	p := int(size)
	c.SetAlltoallvBand(func(b int) bool { return inBand(collectives.CollAlltoallv, p, int64(b)) })
	return register(newState(c, nil, int(rank), p))
}

// shmcollNear probes the placement of a served communicator of two ranks
// (collectives.Comm.ProbePlacement: timed barriers, agreed by the ranks),
// on every rank of it, and reports whether the pair is near (1: the ranks
// share a core or its cache, where the MPI's own small calls are about as
// fast as shmcoll's and the fixed cost of a call into Go decides;
// docs/LIBSHMCOLL.md, "Near pairs") or not (0). SHMCOLL_MPI_PAIR=near or
// far overrides the answer after the probe, so that ranks whose
// environments differ still make the same calls; entry.c agrees the
// ranks' answers through the MPI (near only if both say so).
//
//export shmcollNear
func shmcollNear(id C.int) C.int {
	s := lookup(id)
	if s == nil || s.size != 2 {
		return 0
	}
	p, err := s.c.ProbePlacement(bg)
	if err != nil {
		debugf("timing the pair: %v", err)
		return 0 // on both ranks: a failed call fails everywhere
	}
	near := p == collectives.PlacementNear
	switch os.Getenv("SHMCOLL_MPI_PAIR") {
	case "near":
		near = true
	case "far":
		near = false
	}
	debugf("pair placement %v: near %v", p, near)
	if near {
		return 1
	}
	return 0
}

func newState(c *collectives.Comm, h *hier.Comm, rank, p int) *commState {
	return &commState{c: c, h: h, rank: rank, size: p,
		counts: make([]int, p), displs: make([]int, p), rcounts: make([]int, p), rdispls: make([]int, p)}
}

//export shmcollHier
func shmcollHier(comm C.uintptr_t) C.int {
	if !mpi.Attached() {
		return -1
	}
	parent, err := mpi.FromHandle(uintptr(comm))
	if err != nil {
		debugf("communicator spanning nodes: %v", err)
		return -1
	}
	h, err := hier.New(bg, parent, hier.Options{Collectives: collectives.Options{SlotBytes: slotBytes, Progress: progress}})
	if err != nil {
		debugf("communicator spanning nodes: %v", err)
		return -1
	}
	return register(newState(h.Local(), h, h.Rank(), h.Size()))
}

func register(s *commState) C.int {
	commMu.Lock()
	defer commMu.Unlock()
	id := 0
	if cs := comms.Load(); cs != nil {
		for id < len(*cs) && (*cs)[id] != nil {
			id++
		}
	}
	setComm(id, s)
	return C.int(id)
}

//export shmcollRelease
func shmcollRelease(id C.int) {
	commMu.Lock()
	s := lookup(id)
	if s != nil {
		setComm(int(id), nil)
	}
	commMu.Unlock()
	if s != nil {
		if s.h != nil {
			s.h.Close()
		} else {
			s.c.Close()
		}
	}
}

// failed releases a communicator whose call failed (on every rank: a
// mismatch or an abort fails the call everywhere), which passes through
// from now on.
func failed(id C.int, coll collectives.Collective, err error) C.int {
	debugf("%v failed, passing it and the communicator's later calls to the MPI: %v", coll, err)
	shmcollRelease(id)
	return 1
}

// served counts the calls served per collective and algorithm.
var served [C.SC_NCOLL][32]atomic.Uint64

// hierAlg is the column of calls served by collectives/hier.
const hierAlg = 31

func count(coll collectives.Collective, s *commState) {
	if s.h != nil {
		served[coll][hierAlg].Add(1)
		return
	}
	a := int(s.c.LastAlgorithm())
	if a >= len(served[coll]) {
		a = 0
	}
	served[coll][a].Add(1)
}

// ptrSlice views n elements of type T at p; nil when p is nil (in place).
func ptrSlice[T any](p unsafe.Pointer, n int) []T {
	if p == nil {
		return nil
	}
	return unsafe.Slice((*T)(p), n)
}

// buf views n bytes at p, never nil (an empty slice for no bytes).
func buf(p unsafe.Pointer, n int) []byte {
	if p == nil || n == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(p), n)
}

//export shmcollReduce
func shmcollReduce(id, coll C.int, send, recv unsafe.Pointer, count_ C.int, counts *C.int,
	t, code, commute C.int, dtype C.uintptr_t, root C.int) C.int {
	s := lookup(id)
	if s == nil {
		return 1
	}
	co := collectives.Collective(coll)
	op := opFor(int(code), simd.Type(t), commute != 0, uintptr(dtype))
	var rc []int
	if counts != nil {
		cs := unsafe.Slice(counts, s.size)
		for i := range s.counts {
			s.counts[i] = int(cs[i])
		}
		rc = s.counts
	}
	n, r := int(count_), int(root)
	var err error
	switch simd.Type(t) {
	case simd.Int8:
		err = reduce[int8](s, co, send, recv, n, rc, op, r)
	case simd.Int16:
		err = reduce[int16](s, co, send, recv, n, rc, op, r)
	case simd.Int32:
		err = reduce[int32](s, co, send, recv, n, rc, op, r)
	case simd.Int64:
		err = reduce[int64](s, co, send, recv, n, rc, op, r)
	case simd.Uint8:
		err = reduce[uint8](s, co, send, recv, n, rc, op, r)
	case simd.Uint16:
		err = reduce[uint16](s, co, send, recv, n, rc, op, r)
	case simd.Uint32:
		err = reduce[uint32](s, co, send, recv, n, rc, op, r)
	case simd.Uint64:
		err = reduce[uint64](s, co, send, recv, n, rc, op, r)
	case simd.Float32:
		err = reduce[float32](s, co, send, recv, n, rc, op, r)
	case simd.Float64:
		err = reduce[float64](s, co, send, recv, n, rc, op, r)
	case simd.Complex64:
		err = reduce[complex64](s, co, send, recv, n, rc, op, r)
	case simd.Complex128:
		err = reduce[complex128](s, co, send, recv, n, rc, op, r)
	default:
		err = fmt.Errorf("type %v has no entry point", simd.Type(t))
	}
	if err != nil {
		return failed(id, co, err)
	}
	count(co, s)
	return 0
}

// reduce runs one reduction with MPI's buffer conventions: a nil send is
// MPI_IN_PLACE; reduce_scatter(_block) in place leaves the rank's block at
// the start of recv, where MPI wants it. A communicator spanning nodes
// (s.h) runs collectives/hier's form of the same call; entry.c passes the
// reductions hier lacks (scan, exscan) before they get here.
func reduce[T simd.Element](s *commState, coll collectives.Collective, send, recv unsafe.Pointer, n int, counts []int, op collectives.Op, root int) error {
	c, h, p := s.c, s.h, s.size
	switch coll {
	case collectives.CollAllreduce:
		sb, rb := ptrSlice[T](send, n), ptrSlice[T](recv, n)
		if h != nil {
			return hier.Allreduce(bg, h, sb, rb, op)
		}
		return collectives.Allreduce(bg, c, sb, rb, op)
	case collectives.CollReduce:
		var rb []T
		if s.rank == root {
			rb = ptrSlice[T](recv, n)
		}
		if h != nil {
			return hier.Reduce(bg, h, ptrSlice[T](send, n), rb, op, root)
		}
		return collectives.Reduce(bg, c, ptrSlice[T](send, n), rb, op, root)
	case collectives.CollScan, collectives.CollExscan:
		if h != nil {
			return fmt.Errorf("%v is not served across nodes", coll)
		}
		if coll == collectives.CollScan {
			return collectives.Scan(bg, c, ptrSlice[T](send, n), ptrSlice[T](recv, n), op)
		}
		return collectives.Exscan(bg, c, ptrSlice[T](send, n), ptrSlice[T](recv, n), op)
	case collectives.CollReduceScatterBlock:
		if send == nil {
			all := ptrSlice[T](recv, n*p)
			if err := reduceScatter(s, nil, all, nil, op); err != nil {
				return err
			}
			copy(all[:n], all[s.rank*n:(s.rank+1)*n])
			return nil
		}
		return reduceScatter(s, ptrSlice[T](send, n*p), ptrSlice[T](recv, n), nil, op)
	case collectives.CollReduceScatter:
		total, off := 0, 0
		for i, k := range counts {
			if i == s.rank {
				off = total
			}
			total += k
		}
		mine := counts[s.rank]
		if send == nil {
			all := ptrSlice[T](recv, total)
			if err := reduceScatter(s, nil, all, counts, op); err != nil {
				return err
			}
			copy(all[:mine], all[off:off+mine])
			return nil
		}
		return reduceScatter(s, ptrSlice[T](send, total), ptrSlice[T](recv, mine), counts, op)
	}
	return fmt.Errorf("%v is not a reduction", coll)
}

// reduceScatter is reduce_scatter_block (counts nil) or reduce_scatter on
// the communicator's arena, or across nodes through collectives/hier.
func reduceScatter[T simd.Element](s *commState, send, recv []T, counts []int, op collectives.Op) error {
	switch {
	case s.h != nil && counts == nil:
		return hier.ReduceScatterBlock(bg, s.h, send, recv, op)
	case s.h != nil:
		return hier.ReduceScatter(bg, s.h, send, recv, counts, op)
	case counts == nil:
		return collectives.ReduceScatterBlock(bg, s.c, send, recv, op)
	}
	return collectives.ReduceScatter(bg, s.c, send, recv, counts, op)
}

// hierMove is shmcollMove on a communicator spanning nodes.
func hierMove(s *commState, co collectives.Collective, send, recv unsafe.Pointer, b, r int, rc, rd *C.int, rsize int) error {
	h, p := s.h, s.size
	switch co {
	case collectives.CollBcast:
		return hier.Bcast(bg, h, buf(recv, b), r)
	case collectives.CollAllgather:
		return hier.Allgather(bg, h, ptrSlice[byte](send, b), buf(recv, b*p))
	case collectives.CollAllgatherv:
		end := scale(s.rcounts, s.rdispls, rc, rd, rsize, p)
		var in []byte
		if send != nil {
			in = buf(send, b)
		}
		return hier.Allgatherv(bg, h, in, buf(recv, end), s.rcounts, s.rdispls)
	}
	return fmt.Errorf("%v is not served across nodes", co)
}

//export shmcollMove
func shmcollMove(id, coll C.int, send, recv unsafe.Pointer, n C.longlong, root C.int,
	sc, sd, rc, rd *C.int, ssize, rsize C.longlong) C.int {
	s := lookup(id)
	if s == nil {
		return 1
	}
	co := collectives.Collective(coll)
	c, p, b, r := s.c, s.size, int(n), int(root)
	var err error
	if s.h != nil {
		if err = hierMove(s, co, send, recv, b, r, rc, rd, int(rsize)); err != nil {
			return failed(id, co, err)
		}
		count(co, s)
		return 0
	}
	switch co {
	case collectives.CollBarrier:
		err = collectives.Barrier(bg, c)
	case collectives.CollBcast:
		err = collectives.Bcast(bg, c, buf(recv, b), r)
	case collectives.CollAllgather:
		err = collectives.Allgather(bg, c, ptrSlice[byte](send, b), buf(recv, b*p))
	case collectives.CollAlltoall:
		err = collectives.Alltoall(bg, c, ptrSlice[byte](send, b*p), buf(recv, b*p))
	case collectives.CollGather:
		if s.rank == r {
			err = collectives.Gather(bg, c, ptrSlice[byte](send, b), buf(recv, b*p), r)
		} else {
			err = collectives.Gather(bg, c, buf(send, b), nil, r)
		}
	case collectives.CollScatter:
		if s.rank == r {
			err = collectives.Scatter(bg, c, buf(send, b*p), ptrSlice[byte](recv, b), r)
		} else {
			err = collectives.Scatter(bg, c, nil, buf(recv, b), r)
		}
	case collectives.CollAllgatherv:
		end := scale(s.rcounts, s.rdispls, rc, rd, int(rsize), p)
		var in []byte
		if send != nil {
			in = buf(send, b)
		}
		err = collectives.Allgatherv(bg, c, in, buf(recv, end), s.rcounts, s.rdispls)
	case collectives.CollAlltoallv:
		rend := scale(s.rcounts, s.rdispls, rc, rd, int(rsize), p)
		var in []byte
		if send == nil {
			// In place: the data to send is recv's, by the receive counts.
			in = append([]byte(nil), buf(recv, rend)...)
			copy(s.counts, s.rcounts)
			copy(s.displs, s.rdispls)
		} else {
			in = buf(send, scale(s.counts, s.displs, sc, sd, int(ssize), p))
		}
		err = collectives.Alltoallv(bg, c, in, s.counts, s.displs, buf(recv, rend), s.rcounts, s.rdispls)
		if errors.Is(err, collectives.ErrDeclined) {
			return 2 // every rank passes it, nothing written
		}
	default:
		err = fmt.Errorf("%v is not a data-movement collective", co)
	}
	if err != nil {
		return failed(id, co, err)
	}
	count(co, s)
	return 0
}

// scale fills counts and displs in bytes from MPI's element counts and
// displacements and returns the bytes the buffer spans.
func scale(counts, displs []int, c, d *C.int, size, p int) int {
	cs, ds := unsafe.Slice(c, p), unsafe.Slice(d, p)
	end := 0
	for i := range p {
		counts[i], displs[i] = int(cs[i])*size, int(ds[i])*size
		end = max(end, displs[i]+counts[i])
	}
	return end
}

// ---- operators ----

var builtins [9]collectives.Op

// lxor is MPI_LXOR for the integer types (simd has no kernel for it).
var lxor [simd.Uint64 + 1]collectives.Op

type userKey struct {
	idx   int
	t     simd.Type
	dtype uintptr
}

var (
	userMu  sync.Mutex
	userOps = map[userKey]collectives.Op{}
)

func initOps() {
	for i := range builtins {
		builtins[i] = collectives.Builtin(simd.Op(i))
	}
	lxor[simd.Int8] = lxorOp[int8]()
	lxor[simd.Int16] = lxorOp[int16]()
	lxor[simd.Int32] = lxorOp[int32]()
	lxor[simd.Int64] = lxorOp[int64]()
	lxor[simd.Uint8] = lxorOp[uint8]()
	lxor[simd.Uint16] = lxorOp[uint16]()
	lxor[simd.Uint32] = lxorOp[uint32]()
	lxor[simd.Uint64] = lxorOp[uint64]()
}

func lxorOp[T int8 | int16 | int32 | int64 | uint8 | uint16 | uint32 | uint64]() collectives.Op {
	return collectives.NewOp("mpi_lxor", func(dst, src []T) {
		for i := range dst {
			if (dst[i] != 0) != (src[i] != 0) {
				dst[i] = 1
			} else {
				dst[i] = 0
			}
		}
	}, true)
}

// opFor is the operator of code (see shmcoll.h) for elements of type t.
func opFor(code int, t simd.Type, commute bool, dtype uintptr) collectives.Op {
	switch {
	case code < len(builtins):
		return builtins[code]
	case code == C.SC_OP_LXOR:
		return lxor[t]
	}
	k := userKey{code - C.SC_OP_USER, t, dtype}
	userMu.Lock()
	defer userMu.Unlock()
	if op, ok := userOps[k]; ok {
		return op
	}
	var op collectives.Op
	switch t {
	case simd.Int8:
		op = userOp[int8](k, commute)
	case simd.Int16:
		op = userOp[int16](k, commute)
	case simd.Int32:
		op = userOp[int32](k, commute)
	case simd.Int64:
		op = userOp[int64](k, commute)
	case simd.Uint8:
		op = userOp[uint8](k, commute)
	case simd.Uint16:
		op = userOp[uint16](k, commute)
	case simd.Uint32:
		op = userOp[uint32](k, commute)
	case simd.Uint64:
		op = userOp[uint64](k, commute)
	case simd.Float32:
		op = userOp[float32](k, commute)
	case simd.Float64:
		op = userOp[float64](k, commute)
	case simd.Complex64:
		op = userOp[complex64](k, commute)
	default:
		op = userOp[complex128](k, commute)
	}
	userOps[k] = op
	return op
}

// tmpPool holds the copies a non-commutative user operator needs.
var tmpPool sync.Pool

// userOp calls the MPI user function of creation index k.idx, as MPI
// defines it: f(invec, inoutvec) sets inoutvec = invec op inoutvec. shmcoll
// asks for dst = dst op src: a commutative function gets (src, dst); a
// non-commutative one gets (dst, copy of src) and the copy is the result.
// The name carries the creation index, so ranks that created their
// operators in different orders fail the call (and pass it) rather than
// combine different functions.
func userOp[T simd.Element](k userKey, commute bool) collectives.Op {
	idx, dtype := C.int(k.idx), C.uintptr_t(k.dtype)
	return collectives.NewOp("mpi_user_"+strconv.Itoa(k.idx), func(dst, src []T) {
		n := len(dst)
		if n == 0 {
			return
		}
		if commute {
			C.sc_call_user(idx, unsafe.Pointer(&src[0]), unsafe.Pointer(&dst[0]), C.int(n), dtype)
			return
		}
		var z T
		bytes := n * int(unsafe.Sizeof(z))
		bp, _ := tmpPool.Get().(*[]byte)
		if bp == nil || cap(*bp) < bytes {
			b := make([]byte, bytes)
			bp = &b
		}
		tmp := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(*bp))), n)
		copy(tmp, src)
		C.sc_call_user(idx, unsafe.Pointer(&dst[0]), unsafe.Pointer(&tmp[0]), C.int(n), dtype)
		copy(dst, tmp)
		tmpPool.Put(bp)
	}, commute)
}
