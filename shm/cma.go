package shm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// Cross-memory attach: a rank reads or writes a peer's private memory (a
// user's buffer, not the arena) in one copy, with process_vm_readv and
// process_vm_writev between processes and a plain copy between goroutine
// ranks. The kernel allows it between processes only where this process may
// ptrace the peer (same user and no Yama restriction, or CAP_SYS_PTRACE), so
// every rank tests every peer when the arena is joined, and the ranks agree:
// it is on only if every rank can read every peer.

// EnvCMA is the environment variable that turns cross-memory attach off:
// SHMCOLL_CMA=off. "on" and the empty string leave it to the join's test.
const EnvCMA = "SHMCOLL_CMA"

// ErrNoCrossMemory is wrapped by [Endpoint.CrossMemory], and by
// [Endpoint.ReadPeer] and [Endpoint.WritePeer], when cross-memory attach is
// off for the arena.
var ErrNoCrossMemory = errors.New("shm: cross-memory attach is off")

// Control block words of the agreement, in the join value's line (written
// at join, read-only afterwards).
const (
	cCMAAddr     = cJoinValue + 8  // u64: address of the rank's own control block in its address space, 0 until set
	cCMAResult   = cJoinValue + 16 // u64: the rank's probe result (cmaPublished | ...), 0 until set
	cCMADecision = cJoinValue + 24 // u64, rank 0's only: 0, cmaDecidedOK, or cmaGaveUp + the rank that gave up
	cCMATarget   = cJoinValue + 32 // u64: the id peers give the kernel for their copies (see cmaThread), set before cCMAAddr
	_            = uint(cHint - (cCMATarget + 8))
)

// A result word: cmaPublished, a status in the low byte, and for
// cmaProbeFailed the peer that failed (bits 8..23) and the errno (bits
// 32..47).
const (
	cmaPublished   = 1 << 63
	cmaOK          = 1 // the rank read every peer
	cmaDisabled    = 2 // Options.NoCrossMemory
	cmaEnvOff      = 3 // SHMCOLL_CMA=off
	cmaProbeFailed = 4 // the rank could not read a peer
	cmaBadEnv      = 5 // SHMCOLL_CMA has a value other than on and off
	cmaBadHugeEnv  = 6 // SHMCOLL_HUGEPAGES has a value other than on and off (fails the join too)

	cmaNoProbe = 1 // the address word of a rank not to be probed

	cmaDecidedOK = 1 // the decision word: every rank published its result
	cmaGaveUp    = 2 // the decision word: cmaGaveUp + r, rank r gave up the join first
)

// iovBatch is the most remote ranges one system call carries: the iovecs
// live on the caller's stack, and the kernel copies them in anyway.
const iovBatch = 64

// Remote is a range of a peer's memory, in the peer's address space: Addr
// as the peer's [AddrOf] gave it, and Len bytes from there.
type Remote struct {
	Addr uintptr
	Len  int
}

// AddrOf returns the address of b's first byte, for a rank to publish (in
// its descriptor, say) so that its peers can read or write b with
// [Endpoint.ReadPeer] and [Endpoint.WritePeer].
//
// b must stay where it is until they are done: a Go heap object does not
// move, but a goroutine's stack moves when it grows, so b must not be on a
// stack. A buffer is on the heap if it escapes, if make's size is not a
// constant, or if it is larger than 128 KiB; use cross-memory attach only
// for buffers known to be on the heap, or above that size. The owner also
// keeps b referenced (and so alive) until its peers are done, which the
// rule below ensures.
//
// A rank whose buffer peers read or write this way returns from the call
// that exposed it only after every such peer has said that it is done with
// it (a counter the peer posts after its copy): until then the buffer is
// the peers' as much as its own.
func AddrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// CrossMemory returns nil if [Endpoint.ReadPeer] and [Endpoint.WritePeer]
// are available on this arena, and otherwise why not: an error wrapping
// ErrNoCrossMemory that names the first rank (in rank order) that turned
// it off or failed to read a peer, the same on every rank.
func (e *Endpoint) CrossMemory() error {
	switch {
	case e.cmaOn:
		return nil
	case e.cmaErr != nil:
		return e.cmaErr
	}
	return errCMAUntested
}

// errCMAUntested is CrossMemory's answer on an arena that did not test it
// (processes outside Linux).
var errCMAUntested = fmt.Errorf("%w: not available on this system", ErrNoCrossMemory)

// PeerPID returns the process id of rank r (this process's for goroutine
// ranks), as r recorded it when it joined.
func (e *Endpoint) PeerPID(r int) int {
	e.checkRank(r)
	pid, _ := e.peerPID(r)
	return pid
}

// ReadPeer copies len(dst) bytes of peer's memory from addr (an address
// in peer's address space, from peer's [AddrOf]) into dst: one
// process_vm_readv between processes (more for copies the kernel splits),
// a copy between goroutine ranks. It allocates nothing. The range must be
// a buffer that peer exposed for this call and keeps until this rank says
// it is done (see [AddrOf]); a range peer does not map is an error
// (EFAULT), and a peer that has exited is an error wrapping ErrPeerDead.
// Between goroutine ranks a wrong address is not detected.
func (e *Endpoint) ReadPeer(peer int, addr uintptr, dst []byte) error {
	src := [1]Remote{{addr, len(dst)}}
	return e.ReadPeerv(peer, dst, src[:])
}

// WritePeer copies src into peer's memory at addr, as [Endpoint.ReadPeer]
// reads it (process_vm_writev between processes).
func (e *Endpoint) WritePeer(peer int, addr uintptr, src []byte) error {
	dst := [1]Remote{{addr, len(src)}}
	return e.WritePeerv(peer, dst[:], src)
}

// ReadPeerv gathers peer's ranges src, in order, into dst, whose length
// must be their total: as few system calls as the kernel allows (up to
// 64 ranges each). It allocates nothing.
func (e *Endpoint) ReadPeerv(peer int, dst []byte, src []Remote) error {
	return e.peerCopy(peer, dst, src, false)
}

// WritePeerv scatters src, in order, into peer's ranges dst, whose total
// length must be len(src).
func (e *Endpoint) WritePeerv(peer int, dst []Remote, src []byte) error {
	return e.peerCopy(peer, src, dst, true)
}

func (e *Endpoint) peerCopy(peer int, local []byte, remote []Remote, write bool) error {
	if e.base == nil {
		return ErrClosed
	}
	if !e.cmaOn {
		return e.CrossMemory()
	}
	e.checkRank(peer)
	total := 0
	for _, r := range remote {
		if r.Len < 0 || r.Len > 0 && (r.Addr == 0 || r.Addr+uintptr(r.Len) < r.Addr) {
			return e.copyErr(peer, r, write, ErrBadSize)
		}
		total += r.Len
	}
	if total != len(local) {
		return e.copyErr(peer, Remote{0, len(local)}, write, fmt.Errorf("%w: the ranges hold %d bytes", ErrBadSize, total))
	}
	if e.inProcess {
		for _, r := range remote {
			if r.Len == 0 {
				continue
			}
			theirs := unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&r.Addr))), r.Len)
			if write {
				copy(theirs, local[:r.Len])
			} else {
				copy(local[:r.Len], theirs)
			}
			local = local[r.Len:]
		}
		return nil
	}
	if r, err := vmCopy(e.cmaTargets[peer], local, remote, write); err != nil {
		pid, _ := e.peerPID(peer)
		if errors.Is(err, syscall.ESRCH) {
			// The peer is gone: abort as a wait that found it dead does,
			// so that every rank's error names it.
			e.abort(abortPeerDead, peer, pid, "")
			err = e.Err()
		}
		return e.copyErr(peer, r, write, err)
	}
	return nil
}

// PeerAlive reports whether peer has neither died nor left the arena, as
// the waits' liveness check sees it: between processes, a poll of the
// peer's process; goroutine ranks and a process before all ranks joined
// count as alive unless they left.
func (e *Endpoint) PeerAlive(peer int) bool {
	e.checkRank(peer)
	if peer == e.rank {
		return true
	}
	if e.u32(peer, cState).Load() == stateLeft {
		return false
	}
	if e.peers != nil {
		if _, dead := e.peers.dead(peer); dead {
			return false
		}
	}
	return true
}

func (e *Endpoint) copyErr(peer int, r Remote, write bool, err error) error {
	op := "reading"
	if write {
		op = "writing"
	}
	pid, _ := e.peerPID(peer)
	return fmt.Errorf("shm: rank %d %s %d bytes at %#x of rank %d (pid %d): %w", e.rank, op, r.Len, r.Addr, peer, pid, err)
}

// cmaWord returns rank r's agreement word at control block offset off.
func (e *Endpoint) cmaWord(r, off int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Add(e.ctrl(r), off))
}

// ownCMAStatus is what this rank can say before probing: whether it turned
// cross-memory attach off.
func ownCMAStatus(opt Options) uint64 {
	if _, ok := hugePagesOff(opt); !ok {
		return cmaBadHugeEnv
	}
	switch v := os.Getenv(EnvCMA); v {
	case "off":
		return cmaEnvOff
	case "", "on":
	default:
		return cmaBadEnv
	}
	if opt.NoCrossMemory {
		return cmaDisabled
	}
	return cmaOK
}

// agreeCrossMemory decides, on every rank alike, whether cross-memory
// attach is on: each rank publishes the address of its own control block,
// reads every peer's control block through that address (processes only)
// and compares it with what the arena shows, publishes its result, and
// waits for every rank's. It is on only if every rank read every peer.
// Called once all ranks have joined. The join then succeeds on every rank
// or fails on every rank (as the rendezvous does): rank 0's decision word
// holds whichever came first, every result published or a rank giving up
// (the arena aborted, a peer died, ctx, the deadline); and a bad
// SHMCOLL_CMA or SHMCOLL_HUGEPAGES on any rank fails every rank's join.
func (e *Endpoint) agreeCrossMemory(ctx context.Context, deadline time.Time, opt Options) error {
	status := ownCMAStatus(opt)
	probe := !e.inProcess && status == cmaOK
	addr := uint64(cmaNoProbe)
	if probe {
		allowPtrace()
		addr = uint64(uintptr(e.ctrl(e.rank)))
		e.cmaWord(e.rank, cCMATarget).Store(uint64(cmaThread()))
	}
	e.cmaWord(e.rank, cCMAAddr).Store(addr)
	result := status
	if probe {
		if err := e.awaitCMA(ctx, deadline, cCMAAddr); err != nil {
			return e.giveUpCMA(err) // not decided yet: this rank's result is missing
		}
		e.cmaTargets = make([]int, e.size)
		for q := range e.size {
			e.cmaTargets[q] = e.cmaTarget(q)
		}
		for q := range e.size {
			if q == e.rank || e.cmaWord(q, cCMAAddr).Load() == cmaNoProbe {
				// A peer that turned cross-memory attach off says so
				// in its result.
				continue
			}
			if errno := e.probePeer(q, opt.cmaFailProbe); errno != 0 {
				result = cmaProbeFailed | uint64(q)<<8 | uint64(errno&0xffff)<<32
				break
			}
		}
	}
	if opt.cmaBeforeResult != nil {
		opt.cmaBeforeResult()
	}
	e.cmaWord(e.rank, cCMAResult).Store(cmaPublished | result)
	if err := e.awaitCMA(ctx, deadline, cCMAResult); err != nil {
		if err := e.giveUpCMA(err); err != nil {
			return err
		}
	}
	if d := e.decideCMA(cmaDecidedOK); d != cmaDecidedOK {
		if err := e.Err(); err != nil {
			return err
		}
		return fmt.Errorf("%w: rank %d gave up the join", ErrAborted, d-cmaGaveUp)
	}
	first := -1 // the first rank whose result is not cmaOK
	for r := range e.size {
		w := e.cmaWord(r, cCMAResult).Load()
		if st := w & 0xff; st == cmaBadEnv || st == cmaBadHugeEnv {
			return e.cmaReason(r, w)
		}
		if w&0xff != cmaOK && first < 0 {
			first = r
		}
	}
	if first >= 0 {
		e.cmaErr = e.cmaReason(first, e.cmaWord(first, cCMAResult).Load())
		return nil
	}
	e.cmaOn = true
	return nil
}

// decideCMA stores v in rank 0's decision word unless a decision is there,
// and returns the decision.
func (e *Endpoint) decideCMA(v uint64) uint64 {
	w := e.cmaWord(0, cCMADecision)
	w.CompareAndSwap(0, v)
	return w.Load()
}

// giveUpCMA ends this rank's agreement with err: it decides that the join
// failed, and aborts the arena with err (unless err is the abort), so
// that every rank's join fails. If every rank had published its result
// first, the join has succeeded; giveUpCMA then returns nil.
func (e *Endpoint) giveUpCMA(err error) error {
	if e.decideCMA(cmaGaveUp+uint64(e.rank)) == cmaDecidedOK {
		return nil
	}
	if ae := new(AbortError); !errors.As(err, &ae) {
		e.abort(abortUser, -1, 0, err.Error())
	}
	return err
}

// setLocalCrossMemory decides for the goroutine ranks of [NewLocal], which
// share opt: they read each other's memory directly unless turned off. A
// bad SHMCOLL_CMA is NewLocal's error.
func setLocalCrossMemory(eps []*Endpoint, opt Options) error {
	w := cmaPublished | ownCMAStatus(opt)
	for _, e := range eps {
		e.cmaWord(e.rank, cCMAAddr).Store(cmaNoProbe)
		e.cmaWord(e.rank, cCMAResult).Store(w)
		if e.cmaOn = w&0xff == cmaOK; !e.cmaOn {
			e.cmaErr = e.cmaReason(0, w)
		}
	}
	if st := w & 0xff; st == cmaBadEnv || st == cmaBadHugeEnv {
		return eps[0].cmaErr
	}
	return nil
}

// probePeer reads q's state, pid and start time and its published
// address from q's own mapping of its control block, at the address q
// published and through the thread q named for copies (so a thread id that
// is not q's reads other bytes), and compares them with the arena's: 0 if
// they match, else
// the errno (EIO for different bytes). The kernel checks the same
// permission for process_vm_writev, so a read stands for both. fail is a
// test's forced failure.
func (e *Endpoint) probePeer(q int, fail bool) syscall.Errno {
	if fail {
		return syscall.EPERM
	}
	base := uintptr(e.cmaWord(q, cCMAAddr).Load())
	var got [20]byte
	remote := [2]Remote{{base + cPID, 12}, {base + cCMAAddr, 8}}
	if _, err := vmCopy(e.cmaTargets[q], got[:20], remote[:], false); err != nil {
		var errno syscall.Errno
		if !errors.As(err, &errno) {
			errno = syscall.ENOSYS
		}
		return errno
	}
	want := unsafe.Slice((*byte)(unsafe.Add(e.ctrl(q), cPID)), 12)
	if string(got[:12]) != string(want) || *(*uint64)(unsafe.Pointer(&got[12])) != uint64(base) {
		return syscall.EIO
	}
	return 0
}

// cmaTarget is the id this rank gives the kernel to copy from or to rank
// q: the thread q published (cmaThread), else q's pid.
func (e *Endpoint) cmaTarget(q int) int {
	if t := e.cmaWord(q, cCMATarget).Load(); t != 0 {
		return int(t)
	}
	pid, _ := e.peerPID(q)
	return pid
}

// cmaReason describes rank r's result word w.
func (e *Endpoint) cmaReason(r int, w uint64) error {
	switch w & 0xff {
	case cmaDisabled:
		return fmt.Errorf("%w: turned off by rank %d's options", ErrNoCrossMemory, r)
	case cmaEnvOff:
		return fmt.Errorf("%w: turned off by %s=off on rank %d", ErrNoCrossMemory, EnvCMA, r)
	case cmaProbeFailed:
		q := int(w >> 8 & 0xffff)
		pid, _ := e.peerPID(min(q, e.size-1))
		return fmt.Errorf("%w: rank %d cannot read rank %d (pid %d): %w", ErrNoCrossMemory, r, q, pid, syscall.Errno(w>>32&0xffff))
	case cmaBadEnv:
		return fmt.Errorf("shm: %s on rank %d is neither on nor off", EnvCMA, r)
	case cmaBadHugeEnv:
		return fmt.Errorf("shm: %s on rank %d is neither on nor off", EnvHugePages, r)
	}
	return fmt.Errorf("%w: rank %d published %#x", ErrBadHeader, r, w)
}

// awaitCMA waits until every rank's word at off is set. It fails when the
// arena is aborted, when a rank that has not set it died or left, when
// ctx ends or when the deadline passes.
func (e *Endpoint) awaitCMA(ctx context.Context, deadline time.Time, off int) error {
	sleep := 20 * time.Microsecond
	missing := 0 // words before it are set; they are set only once
	for n := 0; ; n++ {
		for missing < e.size && e.cmaWord(missing, off).Load() != 0 {
			missing++
		}
		if missing == e.size {
			return nil
		}
		// The peers are in the same few steps as this rank: yield the
		// CPU to them (ranks may outnumber the CPUs), checking on them
		// every 16th time, before sleeping.
		if n < cmaYields && n%16 != 15 {
			e.yield()
			continue
		}
		if err := e.Err(); err != nil {
			return err
		}
		if e.u32(missing, cState).Load() == stateLeft {
			e.abort(abortPeerLeft, missing, 0, "")
			return e.Err()
		}
		if e.peers != nil {
			if pid, dead := e.peers.dead(missing); dead && e.cmaWord(missing, off).Load() == 0 {
				e.abort(abortPeerDead, missing, pid, "")
				return e.Err()
			}
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("shm: rank %d joining (cross-memory test): %w", e.rank, context.Cause(ctx))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: rank %d: rank %d did not finish the cross-memory test", ErrJoinTimeout, e.rank, missing)
		}
		if n < cmaYields {
			e.yield()
			continue
		}
		time.Sleep(sleep)
		sleep = min(2*sleep, time.Millisecond)
	}
}

// cmaYields is the number of yields an agreement wait makes before it
// sleeps.
const cmaYields = 256
