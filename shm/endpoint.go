package shm

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Options configure an arena. All ranks of one arena must agree on
// SlotBytes and HeapBytes.
type Options struct {
	// SlotBytes is the size of each rank's data slot, rounded up to the page
	// size. 0 means DefaultSlotBytes for the creator, and "whatever the
	// creator chose" for a rank that attaches to an existing arena.
	SlotBytes int
	// HeapBytes is the size of each rank's heap, rounded up to the page
	// size: memory of the arena that the rank hands out for its own
	// buffers (see [Endpoint.Heap]), which the other ranks can read in
	// place. 0 means none for the creator, and "whatever the creator
	// chose" for a rank that attaches. Each rank reserves its heap's pages
	// when it joins (a full /dev/shm fails the join with ErrNoSpace).
	HeapBytes int
	// Timeout bounds how long the death of a peer goes unnoticed by a rank
	// waiting for it. 0 means $SHMCOLL_TIMEOUT, or 2s.
	Timeout time.Duration
	// JoinTimeout bounds how long Join waits for the segment to appear and
	// for all ranks to join. 0 means 10 × Timeout (at least 20s).
	JoinTimeout time.Duration
	// RequireLauncher makes [JoinEnv] fail where no launcher variable is
	// set, instead of joining a world of one.
	RequireLauncher bool
	// NodeOf returns the NUMA node for rank's slot; nil or -1 leaves the
	// placement to the kernel (first touch by the owning rank, which
	// allocates its slot when it joins). Each rank places its own slot, so
	// it is the joining ranks' option that counts, also for an arena from
	// CreateFD. In-process arenas live in Go memory and ignore it.
	NodeOf func(rank int) int
	// SpinFor and YieldFor tune waiting: how long a wait spins at most (the
	// budget adapts below it), then how long it yields the CPU, before it
	// sleeps on a futex. 0 chooses by whether ranks outnumber CPUs; a
	// negative value skips the phase.
	SpinFor, YieldFor time.Duration
	// Parent, if set, is the arena of the communicator this one is split
	// from (rank's endpoint on it). While a join waits for the segment or
	// for the other ranks, it fails as soon as Parent is aborted or closed,
	// or a rank that has not joined yet died or left Parent (Parent is then
	// aborted, naming that rank): the error wraps Parent's, and the new
	// arena is aborted and its segment removed. ParentRanks[r] is rank r's
	// rank in Parent; nil means the same rank.
	Parent      *Endpoint
	ParentRanks []int
	// JoinValue is recorded in the rank's control block when it joins,
	// for the other ranks to read with [Endpoint.JoinValue] once the join
	// is complete: a value the ranks must agree on (collectives records
	// the hash of its selection table). 0 means none.
	JoinValue uint64
	// Progress, if set, is called now and then by a wait that has spun
	// out: every 16th yield and after every futex sleep, on the waiting
	// thread. An MPI host gives its library's progress engine a turn
	// here, so that nonblocking operations the rank started before the
	// collective complete while it waits (libshmcoll).
	Progress func()
	// NoCrossMemory turns cross-memory attach ([Endpoint.ReadPeer]) off
	// for the arena: off on every rank if any rank sets it (as
	// SHMCOLL_CMA=off does).
	NoCrossMemory bool
	// NoHugePages keeps [Endpoint.PreferHugePages] from asking the kernel
	// for huge pages behind this rank's buffers (as SHMCOLL_HUGEPAGES=off
	// does); a setting of this rank alone, which changes no result.
	NoHugePages bool

	fixedSpin bool          // tests: keep the spin budget at SpinFor
	sleepFor  time.Duration // tests: bound of one futex sleep

	cmaFailProbe    bool   // tests: this rank's probe of a peer fails
	cmaBeforeResult func() // tests: called before the rank publishes its probe result
}

// Floors of the adaptive spin budget: a wait always spins this long before
// it yields. A shorter floor would send waiters into sched_yield whenever a
// peer is preempted or briefly slow, which on a busy CPU gives the core away
// for a whole time slice; when ranks outnumber CPUs the poster most likely
// needs our CPU, and a shorter spin is the better bet.
const (
	// tightSpins: loads without PAUSE that a wait begins with. The spin
	// loop's loads come fast, and enough of them last about as long as a
	// peer's copy of a few KiB and its post, so that such waits end before
	// the first PAUSE.
	tightSpins  = 1024
	quickSpins  = 16                    // PAUSEs before a wait reads the clock
	checkGrace  = 50 * time.Microsecond // a wait checks the peer's liveness from this age
	minSpin     = 5000                  // ns
	minSpinOver = 500                   // ns, ranks outnumber CPUs
	rawSleep    = time.Millisecond      // bound of one futex sleep of a process with one P
)

func (o Options) timeout() time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	if s := os.Getenv("SHMCOLL_TIMEOUT"); s != "" {
		if d, err := time.ParseDuration(s); err == nil && d > 0 {
			return d
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil && f > 0 {
			return time.Duration(f * float64(time.Second))
		}
	}
	return defaultTmout
}

func (o Options) joinTimeout() time.Duration {
	if o.JoinTimeout > 0 {
		return o.JoinTimeout
	}
	return max(10*o.timeout(), 20*time.Second)
}

// Endpoint is one rank's handle on an arena. Its methods may be called from
// several goroutines of that rank except Close, which must not overlap any
// other call.
type Endpoint struct {
	rank, size int
	live       int // size, 0 once closed: the bound counter checks
	lay        layout
	base       unsafe.Pointer // start of the arena; nil once closed
	mem        []byte
	inProcess  bool
	joined     bool   // this endpoint holds its rank (Close marks it left)
	joinValue  uint64 // Options.JoinValue

	spinFor, yieldFor time.Duration
	oversub           bool                // process ranks outnumber the online CPUs
	yieldFirst        bool                // processes that yield without spinning first
	spinBudget        atomic.Int64        // current spin budget in ns (adaptive, at most spinFor)
	fixedSpin         bool                // do not adapt (benchmarks compare)
	minSpin           int64               // floor of spinBudget
	sleepFor          time.Duration       // bound of one futex sleep (checkEvery)
	sleepTimeouts     atomic.Int64        // futex sleeps that timed out (tests: lost wakeups)
	touched           byte                // WaitData's sum of touched bytes
	posts             [NumCounters]uint32 // posts per counter (checkPosts)
	checkEvery        time.Duration
	yield             func()
	oneP              bool     // a process with one P: runtime.Gosched every 16th yield, raw futex sleeps
	progress          func()   // Options.Progress
	peers             *peerSet // process liveness; nil in process mode before rendezvous and in-process

	aborting atomic.Bool // this endpoint has written its abort record
	closeMu  sync.Mutex
	release  func() error // unmaps (process mode)
	cleanup  runtime.Cleanup
	keep     any     // keeps Go-heap arena memory alive (in-process)
	park     *parker // in-process sleeping; nil for processes

	cmaOn  bool  // ReadPeer and WritePeer work (see agreeCrossMemory)
	cmaErr error // why not, when the ranks tested it
	// cmaTargets are the ids given to the kernel for copies from and to
	// each rank (see cmaTarget), set when cross-memory attach is probed.
	cmaTargets []int
	huge       atomic.Pointer[hugeSeen] // the buffers offered to PreferHugePages, made at the first offer (apart, so that Endpoint's hot fields keep their lines)
	noHuge     bool                     // Options.NoHugePages or SHMCOLL_HUGEPAGES=off
}

// Rank returns the endpoint's rank.
func (e *Endpoint) Rank() int { return e.rank }

// Size returns the number of ranks of the arena.
func (e *Endpoint) Size() int { return e.size }

// Oversubscribed reports whether the ranks are processes that outnumber the
// machine's online CPUs (not an affinity mask, so that every rank of the
// arena sees the same answer); such ranks yield instead of spinning, and
// algorithms may prefer fewer synchronizations.
func (e *Endpoint) Oversubscribed() bool { return e.oversub }

// SlotBytes returns the size of each rank's data slot.
func (e *Endpoint) SlotBytes() int { return e.lay.slotBytes }

// InProcess reports whether the ranks are goroutines of this process.
func (e *Endpoint) InProcess() bool { return e.inProcess }

func (e *Endpoint) ctrl(r int) unsafe.Pointer {
	return unsafe.Add(e.base, headerBytes+r*ctrlStride)
}

func (e *Endpoint) u32(r, off int) *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Add(e.ctrl(r), off))
}

func (e *Endpoint) abortWord() *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Add(e.base, hAbort)) }

func (e *Endpoint) attachedWord() *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Add(e.base, hAttached))
}

// counter returns the address of rank r's counter c, checking both.
func (e *Endpoint) counter(r, c int) *atomic.Uint64 {
	if uint(r) >= uint(e.live) || uint(c) >= NumCounters {
		panic(counterError{r, c, e.size, e.live == 0})
	}
	return (*atomic.Uint64)(unsafe.Add(e.base, headerBytes+r*ctrlStride+counterBase+c*counterLine))
}

func sleepers(w *atomic.Uint64) *atomic.Uint32 {
	return (*atomic.Uint32)(unsafe.Add(unsafe.Pointer(w), kSleepers))
}

// futexWord is the 32-bit word of a counter the futex sleeps on: its low
// half, which changes with every increase smaller than 2^32.
func futexWord(w *atomic.Uint64) *uint32 {
	return (*uint32)(unsafe.Add(unsafe.Pointer(w), lowHalf))
}

func (e *Endpoint) bytes(off, n int) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(e.base, off)), n)
}

func (e *Endpoint) checkRank(r int) {
	if uint(r) >= uint(e.size) {
		panic(rankError{r, e.size})
	}
}

// counterError is the panic of a counter out of range or of a closed
// endpoint: a value, formatted only when printed, so that counter (and
// with rankError the other accessors) inline into every collective's path.
type counterError struct {
	r, c, size int
	closed     bool
}

func (ce counterError) Error() string {
	if ce.closed {
		return "shm: use of a closed endpoint"
	}
	return fmt.Sprintf("shm: counter %d of rank %d out of range (%d ranks, %d counters)", ce.c, ce.r, ce.size, NumCounters)
}

// rankError is checkRank's panic, formatted only when printed.
type rankError struct{ r, size int }

func (re rankError) Error() string {
	return fmt.Sprintf("shm: rank %d out of range (%d ranks)", re.r, re.size)
}

// Slot returns rank r's data slot. A rank writes only its own slot, and
// reads a peer's only after a Wait that covers the range. Like every view
// the endpoint hands out, it is valid until Close (or until the endpoint
// becomes unreachable: the cleanup then unmaps the arena).
func (e *Endpoint) Slot(r int) []byte {
	e.checkRank(r)
	off := e.lay.slotsOff + r*e.lay.slotBytes
	return e.mem[off : off+e.lay.slotBytes : off+e.lay.slotBytes]
}

// Heap returns rank r's heap (empty when the arena has none). A rank writes
// only its own heap; a peer reads a range of it only after a Wait that
// covers the range, and the owner rewrites a range only when its readers
// are done, as for slots.
func (e *Endpoint) Heap(r int) []byte {
	e.checkRank(r)
	off := e.lay.heapsOff + r*e.lay.heapBytes
	return e.mem[off : off+e.lay.heapBytes : off+e.lay.heapBytes]
}

// HeapBytes returns the size of each rank's heap.
func (e *Endpoint) HeapBytes() int { return e.lay.heapBytes }

// Inline returns the InlineBytes beside rank r's counter c: a rank writes its
// own before the Post that publishes them.
func (e *Endpoint) Inline(r, c int) []byte {
	w := e.counter(r, c)
	return unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(w), kInline)), InlineBytes)
}

// Descriptor returns rank r's DescriptorBytes call-descriptor area, written
// by its owner before a Post.
func (e *Endpoint) Descriptor(r int) []byte {
	e.checkRank(r)
	off := headerBytes + r*ctrlStride + cDesc
	return e.mem[off : off+DescriptorBytes : off+DescriptorBytes]
}

// Ok reports whether the endpoint is open and its arena not aborted: Err
// would return nil. It inlines, for the checks at the start of a call.
func (e *Endpoint) Ok() bool { return e.base != nil && e.abortWord().Load() == 0 }

// Prepare asks for the line of the endpoint's own counter c in the state
// for writing, ahead of the stores of a Post that follows: between
// processes the line usually sits in a poller's cache.
func (e *Endpoint) Prepare(c int) {
	if e.park == nil {
		prefetchw(unsafe.Pointer(e.counter(e.rank, c)))
	}
}

// Load returns peer's counter c (an acquire load).
func (e *Endpoint) Load(peer, c int) uint64 { return e.counter(peer, c).Load() }

// Post publishes v in the endpoint's own counter c (a release store) and
// wakes the ranks sleeping on it, if any. One goroutine at a time posts a
// given counter.
//
// Between processes a post is a plain release store (storeRelease): the
// peers' polling takes the counter's line away, and a sequentially
// consistent store would wait for the line to come back before the poster
// goes on (a cache-line transfer per post, and with a wait right after the
// post, two transfers in a row instead of two at once).
// The load of the sleeper count may then be performed before the store is
// seen, missing a waiter that registers meanwhile; that waiter's first
// futex sleep is short (storeLag) and sees the store when it ends.
// In-process endpoints, and builds without assembly, swap instead.
//
// Counters never decrease: only this rank writes its counters, so a counter
// above v means that something else wrote the arena (a corrupt or hostile
// peer). A swap sees it, and Post then puts the counter back and aborts the
// arena, so that every rank's next wait fails; between processes one post
// in checkPosts of each counter is a swap.
func (e *Endpoint) Post(c int, v uint64) {
	w := e.counter(e.rank, c)
	if plainPosts && e.park == nil {
		if e.posts[c]++; e.posts[c]%checkPosts != 0 {
			storeRelease(w, v)
			if sleepers(w).Load() != 0 {
				e.wake(e.rank, c, w)
			}
			return
		}
	}
	if old := w.Swap(v); v < old {
		w.CompareAndSwap(v, old) // leave it as it was found
		e.abort(abortUser, -1, 0, fmt.Sprintf("shm: rank %d counter %d holds %d, above the %d it posts: the arena was written by someone else", e.rank, c, old, v))
		return
	}
	if sleepers(w).Load() != 0 {
		e.wake(e.rank, c, w)
	}
}

const (
	// checkPosts: between processes, one post in checkPosts of a counter
	// checks that nobody else raised it.
	checkPosts = 64
	// storeLag bounds the time a plain store takes to be seen by the other
	// CPUs (a line transfer: well under a microsecond; a vCPU that the
	// hypervisor stops drains its stores as it exits).
	storeLag = 200 * time.Microsecond
)

// wake wakes the ranks sleeping on rank r's counter c (at w).
func (e *Endpoint) wake(r, c int, w *atomic.Uint64) {
	if e.park != nil {
		e.park.wake(r*NumCounters + c)
		return
	}
	futexWake(futexWord(w))
}

// Wait returns once peer's counter c is at least v (an acquire), so that
// everything peer wrote before posting it is visible. It spins, then
// yields, then sleeps; it fails only when the arena is aborted (an error
// wrapping ErrAborted, and ErrPeerDead when the reason is a dead peer), when
// peer died or left (detected within Options.Timeout; the arena is then
// aborted), or when ctx ends (ctx's error, wrapped; the arena is not
// aborted: the caller decides).
func (e *Endpoint) Wait(ctx context.Context, peer, c int, v uint64) error {
	return e.WaitData(ctx, peer, c, v, nil)
}

// WaitData is Wait for a post after which the caller reads data, a small
// range of peer's memory (at most TouchBytes are used). While it spins it
// keeps loading data's cache lines, so that when peer writes them and
// posts, they travel together with the counter's line instead of after it,
// which matters most when the ranks sit on different dies. The loads only
// move lines; the caller reads data after WaitData returns.
// Between processes only: goroutine ranks wait as Wait does.
func (e *Endpoint) WaitData(ctx context.Context, peer, c int, v uint64, data []byte) error {
	if e.base == nil {
		return ErrClosed
	}
	w := e.counter(peer, c)
	if w.Load() >= v && e.abortWord().Load() == 0 {
		return nil
	}
	if e.park != nil {
		// Goroutine ranks: the arena is Go memory, where loads before the
		// acquire would be data races.
		data = nil
	} else if e.yieldFirst {
		// Processes that outnumber the CPUs: the first yields in a small
		// loop, without waitSlow's frame and code, which a rank that gets
		// its CPU back finds evicted (np=8 on 2 CPUs: most waits end after
		// a yield or two). waitSlow then yields on, reading the clock, the
		// context and the abort word every 16th time.
		for range quickYields {
			osYield()
			if w.Load() >= v {
				return e.doneErr()
			}
		}
	}
	return e.waitSlow(ctx, peer, c, w, v, data[:min(len(data), TouchBytes)])
}

// quickYields is the number of yields of WaitData's own loop.
const quickYields = 8

// TouchBytes is the most of its data that WaitData keeps in flight: more
// lines held by the waiter slow down the poster's stores to them.
const TouchBytes = 256

// touch loads one byte of every cache line of b and keeps their sum, so
// that the loads are not optimized away.
func (e *Endpoint) touch(b []byte) {
	s := e.touched
	for i := 0; i < len(b); i += 64 {
		s += b[i]
	}
	e.touched = s
}

func (e *Endpoint) waitSlow(ctx context.Context, peer, c int, w *atomic.Uint64, v uint64, data []byte) error {
	aw := e.abortWord()
	if aw.Load() != 0 {
		return e.Err()
	}
	// Most handoffs between running ranks complete within a few hundred
	// nanoseconds: catch them before reading the clock or the context.
	if e.spinFor > 0 {
		// First without PAUSE: a PAUSE lasts about as long as a handoff
		// between cores of one L3, and a wait that sees the post only
		// after it adds half a PAUSE to the handoff on average.
		if e.spin(w, v, tightSpins, data) {
			return e.doneErr()
		}
		for range quickSpins {
			pause()
			if w.Load() >= v {
				return e.doneErr()
			}
			e.touch(data)
		}
	}
	// The context's channel, the clock and the peer's liveness are read
	// only when the wait gets that far: an oversubscribed rank's wait
	// usually ends after a yield or two, and then costs a load and the
	// yield.
	var done <-chan struct{}
	doneRead := false
	var start, nextCheck int64
	// check is the slow part of every phase: abort, ctx, and the peer's
	// liveness every checkEvery.
	check := func(now int64) error {
		if aw.Load() != 0 {
			return e.Err()
		}
		if !doneRead {
			done, doneRead = ctx.Done(), true
		}
		if done != nil {
			select {
			case <-done:
				return e.ctxErr(ctx, peer)
			default:
			}
		}
		if now >= nextCheck {
			nextCheck = now + int64(e.checkEvery)
			if err := e.checkPeer(peer, w, v); err != nil {
				return err
			}
		}
		return nil
	}
	// Spin: the cheapest handoff when the poster runs on another core. The
	// budget adapts: it halves after each wait that outlasts it (the poster
	// is not running: spinning only delays it, as when ranks share a core)
	// and doubles, up to SpinFor, after a wait that needed more than half.
	var now int64
	if budget := e.spinBudget.Load(); budget > 0 {
		start = nanotime()
		nextCheck = start + int64(e.checkEvery)
		for i := 1; ; i++ {
			pause()
			e.touch(data)
			if w.Load() >= v {
				if !e.fixedSpin {
					if t := nanotime() - start; t > budget/2 && budget < int64(e.spinFor) {
						e.spinBudget.Store(min(2*budget, int64(e.spinFor)))
					}
				}
				return e.doneErr()
			}
			if i&31 == 0 {
				now := nanotime()
				if err := check(now); err != nil {
					return err
				}
				if now-start > budget {
					if !e.fixedSpin && budget > e.minSpin {
						e.spinBudget.Store(max(budget/2, e.minSpin))
					}
					break
				}
			}
		}
		now = nanotime()
		// The first liveness check comes after the spin, but not before
		// checkGrace: most waits of oversubscribed ranks end within a few
		// yields, and the check (a poll of the peer's pidfd) cost them more
		// than the yield.
		nextCheck = min(nextCheck, max(now, start+int64(checkGrace)))
	}
	// Yield: lets a poster that shares our CPU run. Abort, context and
	// liveness are checked every 16th yield; without a spin, the clock
	// starts there.
	if e.yieldFor > 0 {
		end := now + int64(e.yieldFor)
		for i := 0; ; i++ {
			e.yield()
			if w.Load() >= v {
				return e.doneErr()
			}
			if i&15 == 15 {
				if e.oneP {
					// With Options.Progress too, although there the
					// goroutine is locked to a host thread and the Gosched
					// hands the P to another thread and back: those
					// wakeups keep ranks that share a scheduler group
					// (one session: Open MPI's, not Hydra's) on their CPUs
					// when other tasks compete for them.
					runtime.Gosched()
				}
				if e.progress != nil {
					e.progress()
				}
				now := nanotime()
				if start == 0 {
					start, end, nextCheck = now, now+int64(e.yieldFor), now+int64(checkGrace)
				}
				if err := check(now); err != nil {
					return err
				}
				if now > end {
					break
				}
			}
		}
	}
	if start == 0 {
		start = nanotime()
		nextCheck = start + int64(checkGrace)
	}
	// Sleep, bounded so that liveness and ctx are rechecked: goroutine ranks
	// in the Go scheduler, processes on the futex.
	if e.park != nil {
		if !doneRead {
			done = ctx.Done()
		}
		return e.sleepParked(peer*NumCounters+c, w, v, done, check)
	}
	sl := sleepers(w)
	fw := futexWord(w)
	for first := true; ; first = false {
		sl.Add(1)
		cur := w.Load()
		if cur < v && aw.Load() == 0 {
			// The first sleep is short: a post whose plain store was on its
			// way when this rank registered may not have seen it (see Post).
			if first && plainPosts && e.sleepFor > storeLag {
				futexWait(fw, uint32(cur), storeLag, e.oneP)
			} else if futexWait(fw, uint32(cur), e.sleepFor, e.oneP) {
				e.sleepTimeouts.Add(1)
			}
		}
		sl.Add(^uint32(0))
		if w.Load() >= v {
			return e.doneErr()
		}
		if e.oneP {
			runtime.Gosched() // the turn of the goroutines the raw sleep kept waiting
		}
		if e.progress != nil {
			e.progress()
		}
		if err := check(nanotime()); err != nil {
			return err
		}
	}
}

// doneErr is the result of a wait whose condition holds: nil unless the
// arena was aborted meanwhile.
func (e *Endpoint) doneErr() error {
	if e.abortWord().Load() != 0 {
		return e.Err()
	}
	return nil
}

func (e *Endpoint) ctxErr(ctx context.Context, peer int) error {
	return fmt.Errorf("shm: rank %d waiting for rank %d: %w", e.rank, peer, context.Cause(ctx))
}

// checkPeer aborts the arena if peer left or died before its counter w
// reached v. A peer may post its last value and then leave or exit between
// the waiter's load of w and this check: its post happened before its
// leaving, so w is loaded again once the peer is seen gone, and a wait that
// is satisfied is not a failure.
func (e *Endpoint) checkPeer(peer int, w *atomic.Uint64, v uint64) error {
	if peer == e.rank {
		return nil
	}
	if e.u32(peer, cState).Load() == stateLeft {
		if w.Load() >= v {
			return nil
		}
		e.abort(abortPeerLeft, peer, 0, "")
		return e.Err()
	}
	if e.peers != nil {
		if pid, dead := e.peers.dead(peer); dead {
			if w.Load() >= v {
				return nil
			}
			e.abort(abortPeerDead, peer, pid, "")
			return e.Err()
		}
	}
	return nil
}

// Abort aborts the arena for every rank: each ongoing and later Wait on
// any rank returns an *AbortError wrapping ErrAborted that names the first
// rank that aborted and its cause (the first 352 bytes of its message).
// Only the first abort counts.
func (e *Endpoint) Abort(cause error) {
	if e.base == nil {
		return
	}
	msg := "aborted"
	if cause != nil {
		msg = cause.Error()
	}
	e.abort(abortUser, -1, 0, msg)
}

func (e *Endpoint) abort(kind uint32, peer, pid int, msg string) {
	aw := e.abortWord()
	if e.aborting.CompareAndSwap(false, true) {
		cb := e.ctrl(e.rank)
		text := e.bytes(headerBytes+e.rank*ctrlStride+cAbortText, abortText)
		n := copy(text, msg)
		*(*uint32)(unsafe.Add(cb, cAbortKind)) = kind
		*(*int32)(unsafe.Add(cb, cAbortPeer)) = int32(peer)
		*(*uint32)(unsafe.Add(cb, cAbortPID)) = uint32(pid)
		*(*uint32)(unsafe.Add(cb, cAbortLen)) = uint32(n)
		aw.CompareAndSwap(0, uint64(e.rank)+1)
	}
	e.wakeAll()
}

// wakeAll wakes every sleeper on every counter of the arena.
func (e *Endpoint) wakeAll() {
	for r := range e.size {
		for c := range NumCounters {
			w := e.counter(r, c)
			if sleepers(w).Load() != 0 {
				e.wake(r, c, w)
			}
		}
	}
}

// Err returns nil while the arena is usable, ErrClosed after Close, and the
// *AbortError once it is aborted.
func (e *Endpoint) Err() error {
	if e.base == nil {
		return ErrClosed
	}
	a := e.abortWord().Load()
	if a == 0 {
		return nil
	}
	if a-1 >= uint64(e.size) {
		return &AbortError{Rank: -1, Peer: -1, Cause: fmt.Sprintf("corrupt abort word %#x", a), kind: abortUser}
	}
	r := int(a - 1)
	cb := e.ctrl(r)
	n := min(int(*(*uint32)(unsafe.Add(cb, cAbortLen))), abortText)
	return &AbortError{
		Rank:  r,
		Peer:  int(*(*int32)(unsafe.Add(cb, cAbortPeer))),
		PID:   int(*(*uint32)(unsafe.Add(cb, cAbortPID))),
		Cause: string(e.bytes(headerBytes+r*ctrlStride+cAbortText, n)),
		kind:  *(*uint32)(unsafe.Add(cb, cAbortKind)),
	}
}

// Close marks the rank as gone (a peer waiting for it then fails instead
// of hanging) and releases the endpoint's mapping. The arena lives on for
// the other ranks. Close is idempotent.
func (e *Endpoint) Close() error {
	e.closeMu.Lock()
	defer e.closeMu.Unlock()
	if e.base == nil {
		return nil
	}
	if e.joined {
		e.u32(e.rank, cState).Store(stateLeft)
		e.wakeAll()
	}
	e.base = nil
	e.live = 0
	e.mem = nil
	e.keep = nil
	e.cleanup.Stop()
	var err error
	if e.release != nil {
		err = e.release()
	}
	return err
}

// newEndpoint makes rank's endpoint on mem (already holding a valid header).
func newEndpoint(mem []byte, lay layout, rank int, opt Options, inProcess bool) *Endpoint {
	e := &Endpoint{
		rank: rank, size: lay.ranks, live: lay.ranks, lay: lay,
		base: unsafe.Pointer(&mem[0]), mem: mem, inProcess: inProcess,
		joinValue: opt.JoinValue,
	}
	t := opt.timeout()
	e.checkEvery = min(t/4, 20*time.Millisecond)
	e.checkEvery = max(e.checkEvery, time.Millisecond)
	e.sleepFor = e.checkEvery
	if opt.sleepFor > 0 {
		e.sleepFor = opt.sleepFor
	}
	var cpus int
	if inProcess {
		cpus = runtime.GOMAXPROCS(0)
		e.yield = runtime.Gosched
	} else {
		cpus = onlineCPUs()
		// Other threads and processes: sched_yield alone. runtime.Gosched
		// would first wake an idle P's thread (wakep) whenever GOMAXPROCS
		// is above 1: a futex wake and a context switch per yield, which
		// when ranks outnumber CPUs costs small collectives as much as
		// they take otherwise. With one P there is no one to wake, and a
		// Gosched every 16th yield lets the rank's other goroutines run;
		// not every time, since a Gosched before each sched_yield is a
		// cost on the path of every wait.
		e.yield = osYield
		e.oneP = runtime.GOMAXPROCS(0) == 1
		if e.oneP && opt.sleepFor == 0 {
			// Its sleeps hold the P (see futexWait): short ones, so that
			// the process's other goroutines, if any, run between them.
			e.sleepFor = min(e.sleepFor, rawSleep)
		}
	}
	over := lay.ranks > cpus
	e.oversub = over && !inProcess
	switch {
	case opt.SpinFor < 0:
	case opt.SpinFor > 0:
		e.spinFor = opt.SpinFor
	case over && !inProcess:
		// Processes that outnumber the CPUs go straight to sched_yield
		// (Open MPI's mpi_yield_when_idle): the rank we wait for most
		// likely needs our CPU, and any spin only delays it.
	case over:
		e.spinFor = 2 * time.Microsecond
	default:
		e.spinFor = 50 * time.Microsecond
	}
	e.spinBudget.Store(int64(e.spinFor))
	e.minSpin = min(minSpin, int64(e.spinFor))
	if over || inProcess {
		// runtime.Gosched costs a goroutine switch, not a time slice.
		e.minSpin = min(minSpinOver, int64(e.spinFor))
	}
	e.fixedSpin = opt.fixedSpin
	e.progress = opt.Progress
	e.noHuge, _ = hugePagesOff(opt) // a bad value fails the join (ownCMAStatus)
	switch {
	case opt.YieldFor < 0:
	case opt.YieldFor > 0:
		e.yieldFor = opt.YieldFor
	case over && !inProcess:
		// A rank that does not spin waits for up to p-1 others' turns on
		// the CPU; a futex sleep would add a wake-up, many times a
		// handoff, to each of them. But not for long: a sched_yield gives
		// the rest of the yielder's slice to whatever else runs on its CPU
		// (EEVDF moves its virtual runtime to its deadline), so ranks that
		// go on yielding beside a task from outside the job hand that task
		// most of the CPU, and a call then waits for its whole slices. A
		// wait that outlasts several rounds of turns is for a rank that
		// does not get the CPU, and sleeps.
		e.yieldFor = 30 * time.Microsecond
	case over:
		e.yieldFor = 100 * time.Microsecond
	default:
		e.yieldFor = 200 * time.Microsecond
	}
	e.yieldFirst = !inProcess && e.spinFor == 0 && e.yieldFor > 0
	return e
}

// join records this rank in its control block and counts it in the header.
// It returns the number of ranks joined so far, itself included.
func (e *Endpoint) join(pid int, start uint64) (int, error) {
	cb := e.ctrl(e.rank)
	st := e.u32(e.rank, cState)
	// Claim the rank before writing its identity, so that a second claimant
	// cannot overwrite the winner's pid.
	if !st.CompareAndSwap(stateFree, stateJoining) {
		return 0, fmt.Errorf("%w: rank %d", ErrRankTaken, e.rank)
	}
	*(*uint32)(unsafe.Add(cb, cPID)) = uint32(pid)
	*(*uint64)(unsafe.Add(cb, cStart)) = start
	*(*uint64)(unsafe.Add(cb, cJoinValue)) = e.joinValue
	st.Store(stateJoined)
	e.joined = true
	return int(e.attachedWord().Add(1) &^ joinFailed), nil
}

// joinFailed is the bit of the header's attached word that marks the join
// failed; the bits below it count the ranks joined.
const joinFailed = 1 << 31

// failJoin decides the join as failed unless every rank joined first, and
// reports whether it failed. The attached word holds both outcomes, so
// that every rank reads the same one: the count reaching the size first
// means success on every rank, the failed bit first means failure on every
// rank, whatever each rank sees afterwards (an abort of the complete arena
// by a rank whose join has returned does not fail a slower rank's join).
func (e *Endpoint) failJoin() bool {
	aw := e.attachedWord()
	for {
		w := aw.Load()
		switch {
		case w&joinFailed != 0:
			return true
		case int(w) >= e.size:
			return false
		case aw.CompareAndSwap(w, w|joinFailed):
			return true
		}
	}
}

// rendezvous waits until all ranks have joined. alive, if not nil, reports
// whether a joined rank's process still lives; opt.Parent is watched.
//
// Every way out other than success goes through failJoin, and a rank that
// fails the join aborts the arena with its cause, which the other ranks
// then return (or their own view of the parent's failure, which names the
// cause better). A rank that finds the join failed before the abort is
// written waits for it, still watching its peers and its deadline.
func (e *Endpoint) rendezvous(ctx context.Context, deadline time.Time, alive func(r int) (int, bool), opt Options) error {
	aw := e.attachedWord()
	sleep := 20 * time.Microsecond
	// fail ends the join with err, aborting the arena with kind, peer and
	// pid (and err's text for abortUser), unless every rank joined first.
	fail := func(kind uint32, peer, pid int, err error) error {
		if !e.failJoin() {
			return nil
		}
		msg := ""
		if kind == abortUser {
			msg = err.Error()
		}
		e.abort(kind, peer, pid, msg)
		if err == nil {
			return e.Err()
		}
		return err
	}
	for n := 0; ; n++ {
		w := aw.Load()
		if w&joinFailed == 0 && int(w) >= e.size {
			return nil
		}
		// The parent first: its error names the cause of an abort that a
		// rank watching it made here.
		if err := opt.parentErr(e, e.rank, e.size); err != nil {
			return fail(abortUser, -1, 0, err)
		}
		if err := e.Err(); err != nil {
			// The abort of a rank that failed the join, or one made after
			// the join completed (by a rank whose join has returned).
			if !e.failJoin() {
				return nil
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return fail(abortUser, -1, 0, fmt.Errorf("shm: rank %d joining: %w", e.rank, context.Cause(ctx)))
		}
		if time.Now().After(deadline) {
			var missing []int
			for r := range e.size {
				if e.u32(r, cState).Load() == stateFree {
					missing = append(missing, r)
				}
			}
			return fail(abortUser, -1, 0, fmt.Errorf("%w: rank %d: %d of %d ranks joined; missing %v", ErrJoinTimeout, e.rank, w&^joinFailed, e.size, missing))
		}
		if alive != nil && n%16 == 15 {
			for r := range e.size {
				if r == e.rank || e.u32(r, cState).Load() != stateJoined {
					continue
				}
				// A rank may complete the join and exit or leave
				// between the check at the top and this one: fail
				// decides.
				if pid, ok := alive(r); !ok {
					return fail(abortPeerDead, r, pid, nil)
				}
			}
		}
		for r := range e.size {
			if e.u32(r, cState).Load() == stateLeft {
				return fail(abortPeerLeft, r, 0, nil)
			}
		}
		time.Sleep(sleep)
		sleep = min(2*sleep, 2*time.Millisecond)
	}
}

// Hint returns rank r's hint word: a word that r writes now and then and
// every rank reads often, alone in its cache line (a word beside data that
// its owner writes at every call would move that line between the cores
// at every read). The arena starts it at 0; what it means is the caller's.
func (e *Endpoint) Hint(r int) *atomic.Uint64 {
	e.checkRank(r)
	return (*atomic.Uint64)(unsafe.Add(e.ctrl(r), cHint))
}

// JoinValue returns the Options.JoinValue rank r joined with (0: none).
// It is valid once the join is complete, when Join or JoinLocal has
// returned: every rank recorded it before it counted itself joined.
func (e *Endpoint) JoinValue(r int) uint64 {
	e.checkRank(r)
	return *(*uint64)(unsafe.Add(e.ctrl(r), cJoinValue))
}

// peerPID returns the pid and start time rank r recorded when it joined.
func (e *Endpoint) peerPID(r int) (int, uint64) {
	cb := e.ctrl(r)
	return int(*(*uint32)(unsafe.Add(cb, cPID))), *(*uint64)(unsafe.Add(cb, cStart))
}
