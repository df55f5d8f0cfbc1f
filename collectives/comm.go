package collectives

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shmcoll/shmcoll/circulant"
	"github.com/shmcoll/shmcoll/shm"
)

// Options configure a communicator. The zero value is ready to use.
type Options struct {
	// SlotBytes is the size of each rank's data slot in the arena (0: the
	// shm default). Vectors larger than a slot allows are cut into
	// segments. Split and Dup give the new communicator the parent's size.
	SlotBytes int
	// HeapBytes is the size of each rank's heap in the arena, from which
	// [Alloc] hands out buffers that the other ranks read in place (0:
	// none; a rank that joins an existing arena accepts the creator's
	// size). Each rank reserves its heap when it joins. Split and Dup give
	// the new communicator the parent's size.
	HeapBytes int
	// Timeout is how long a wait lasts without news from a peer before the
	// peer's liveness is checked (0: SHMCOLL_TIMEOUT, or 2s). A living but
	// slow peer is waited for.
	Timeout time.Duration
	// RequireLauncher makes [JoinEnv] fail where no launcher variable is
	// set (as SHMCOLL_REQUIRE_LAUNCHER=1 does), instead of returning a
	// communicator of one rank.
	RequireLauncher bool
	// Algorithms pins an algorithm per collective, for all sizes, so that
	// results do not change when the selection table does. It overrides
	// SHMCOLL_ALGO_<COLL>, which overrides the selection table.
	Algorithms map[Collective]Algorithm
	// Skips returns the skip sequence of the circulant algorithms for p
	// ranks (nil: [circulant.HalvingSkips]). It must be the same function
	// on every rank; [circulant.CheckSkips] validates its result.
	Skips func(p int) []int
	// Table is the selection table that auto uses (nil: the file that
	// SHMCOLL_TUNE_FILE names, else [DefaultTable]). Every rank must use a
	// table with the same entries: the ranks compare [Table.Hash] when
	// they join, and a difference fails the join on every rank with
	// [ErrTableMismatch].
	Table *Table
	// JoinTimeout, SpinFor and YieldFor are passed to the arena (see
	// [shm.Options]): how long joining may take, and how long a wait spins
	// and then yields before it sleeps.
	JoinTimeout, SpinFor, YieldFor time.Duration
	// Progress is passed to the arena ([shm.Options].Progress): called now
	// and then by a wait that has spun out, on the waiting thread.
	Progress func()
	// NoStoreAdvice turns the store advice off on this rank: no timing of
	// copies, no placement probe, no non-temporal stores (see
	// [StoreAdviceEnv], which turns it off too). Results are the same
	// either way.
	NoStoreAdvice bool
	// NoCrossMemory turns cross-memory attach off for the communicator,
	// on every rank if any rank sets it (as SHMCOLL_CMA=off does): no call
	// takes [Single]. Results are the same either way.
	NoCrossMemory bool
	// NoHugePages keeps this rank from asking the kernel for huge pages
	// behind its own large buffers that peers copy with by cross-memory
	// attach (see shm.Endpoint.PreferHugePages; SHMCOLL_HUGEPAGES=off does
	// the same). Results are the same either way.
	NoHugePages bool
}

// shm returns the arena options of o, with the selection table's hash
// (tableChoice.hash) as the value every rank records when it joins.
func (o Options) shm(tableHash uint64) shm.Options {
	return shm.Options{SlotBytes: o.SlotBytes, HeapBytes: o.HeapBytes, Timeout: o.Timeout, JoinTimeout: o.JoinTimeout, SpinFor: o.SpinFor,
		YieldFor: o.YieldFor, Progress: o.Progress, NoCrossMemory: o.NoCrossMemory, NoHugePages: o.NoHugePages, RequireLauncher: o.RequireLauncher, JoinValue: tableHash}
}

// Comm is a communicator: a group of ranks sharing one arena. The
// collective calls of a Comm must be made by every rank in the same order
// (as in MPI); one Comm is used by one goroutine at a time. Several Comms
// (from Split and Dup) may be in use at once, each with its own arena.
type Comm struct {
	// What every call reads and writes comes first, in as few cache lines
	// as it takes: when ranks outnumber the CPUs, a rank finds these lines
	// evicted after each wait (see small.go). The small-call path reads
	// the fields up to adv.
	ep     *shm.Endpoint
	rank   int
	size   int
	seq    uint64 // calls made
	smalls uint64 // calls that took the small-call path
	step   uint64 // steps begun; a step is one use of a slot half
	synced uint64 // every rank has begun step synced
	late   uint64 // the step a call returned early from, whose check settle makes (0: none)
	hashed uint64 // the step whose descriptor hash is in the counter's line
	full   bool   // the current step made this rank depend on every rank's data of it (end)
	nb     bool   // prog is set: a plain load, so that await inlines
	closed bool
	// rootFirst: selection takes the root-first barrier (ReduceBcast) on
	// this communicator, from the pins and the table, which do not change.
	rootFirst bool
	desc      callDesc // the descriptor of call seq, which its steps publish
	half      int      // bytes of a slot half: at least half a page (shm rounds slots to pages)
	ownDesc   []byte   // this rank's full descriptors of the even and odd steps (begin)
	small     [numSmall]smallMemo
	last      Stats // counts of the current or last call
	total     Stats
	args      call        // storage of the call in progress, which start hands to the entry point (calls do not allocate)
	kernels   kernelCache // the built-in kernels the small-call path uses
	adv       storeAdvice
	sc        scratch                  // memory the calls reuse
	prog      atomic.Pointer[progress] // nonblocking calls (nonblocking.go), nil before the first
	pinned    [numColls]Algorithm
	chosen    [numColls]choice
	warm      [collScatterv + 1]warmSizes // calls that Single takes once warm, per size (singleCold)

	place      Placement // what the last placement probe found (placement.go)
	placeCalls uint64    // calls in a placement band
	probes     uint64    // placement probes run
	probeTime  [1]int64  // the probe's allreduce

	opt      Options
	a2avKeep func(int) bool // SetAlltoallvBand
	sel      selection      // the selection table's entries for this p
	skips    []int

	plans [3]*circulant.Plan // circulant plans by kind-1, built on first use
	table []int              // the skips ascending
	a2a   *circulant.AlltoallPlan
	where []uint8 // circAlltoall: which buffer holds each position

	heap heap // the allocator of this rank's heap (arena.go)

	closeOnce sync.Once
	closeErr  error
}

// newComm wraps a joined endpoint; tc is the selection table, whose hash
// the ranks compare.
func newComm(ep *shm.Endpoint, opt Options, tc tableChoice) (*Comm, error) {
	c := &Comm{ep: ep, rank: ep.Rank(), size: ep.Size(), opt: opt}
	c.sel = tc.tab.selection(c.size, ep.Oversubscribed())
	c.sel.source = tc.src
	if err := c.checkTable(); err != nil {
		return nil, err
	}
	var err error
	if c.pinned, err = pinsOf(opt); err != nil {
		return nil, err
	}
	if d, err := c.selector().decide(selectInput{coll: CollBarrier}); err == nil {
		c.rootFirst = d.alg == ReduceBcast
	}
	if opt.Skips != nil {
		c.skips = append([]int(nil), opt.Skips(c.size)...)
	} else {
		c.skips = circulant.HalvingSkips(c.size)
	}
	if err := circulant.CheckSkips(c.size, c.skips); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidArgument, err)
	}
	off, err := storeAdviceOff(opt)
	if err != nil {
		return nil, err
	}
	c.adv = storeAdvice{ep: ep, rank: c.rank, seq: &c.seq, off: off, over: ep.Oversubscribed()}
	c.ownDesc = ep.Descriptor(c.rank)[fullDescOff : fullDescOff+2*lineBytes]
	c.half = ep.SlotBytes() / 2 &^ (lineBytes - 1)
	c.sc.init(c.size)
	return c, nil
}

// NewLocal returns p communicators of one in-process arena, for p
// goroutines: Comm i is rank i.
func NewLocal(p int, opt Options) ([]*Comm, error) {
	tc, err := tableOf(opt)
	if err != nil {
		return nil, err
	}
	eps, err := shm.NewLocal(p, opt.shm(tc.hash))
	if err != nil {
		return nil, err
	}
	cs := make([]*Comm, p)
	for i, ep := range eps {
		if cs[i], err = newComm(ep, opt, tc); err != nil {
			for _, e := range eps {
				e.Close()
			}
			return nil, err
		}
	}
	return cs, nil
}

// Run runs f on p goroutine ranks of a new in-process communicator, each
// closing its Comm when its f returns, waits for all of them and returns
// the errors of the ranks joined (nil if all returned nil): f's, else
// Close's (the mismatch of a last call that returned early). A rank whose
// f fails or panics aborts the communicator, so that the others do not
// wait for it.
func Run(p int, opt Options, f func(c *Comm) error) error {
	cs, err := NewLocal(p, opt)
	if err != nil {
		return err
	}
	errs := make([]error, p)
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			defer func() {
				if r := recover(); r != nil {
					errs[i] = fmt.Errorf("rank %d panicked: %v", i, r)
					c.Abort(errs[i])
				}
				if err := c.Close(); err != nil && errs[i] == nil {
					errs[i] = fmt.Errorf("rank %d: %w", i, err)
				}
			}()
			if err := f(c); err != nil {
				errs[i] = fmt.Errorf("rank %d: %w", i, err)
				c.Abort(errs[i])
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Join joins the arena called name as rank of size ranks (every rank passes
// the same name, size and options; the first to arrive creates it).
func Join(ctx context.Context, name string, rank, size int, opt Options) (*Comm, error) {
	tc, err := tableOf(opt)
	if err != nil {
		return nil, err
	}
	ep, err := shm.Join(ctx, name, rank, size, opt.shm(tc.hash))
	return wrap(ep, err, opt, tc)
}

// JoinEnv joins the arena of this node's ranks that the launcher's
// environment describes (see [shm.ReadEnv]): the variables shmrun sets
// (SHMCOLL_RANK, SHMCOLL_SIZE, SHMCOLL_ARENA), else those of Open MPI's or
// MPICH's mpirun, else those of a Slurm job step started by srun. The
// communicator holds the ranks of this node.
//
// Where no launcher variable is set at all, JoinEnv returns a communicator
// of one rank, as an MPI program started without mpirun runs as a world of
// one; Options.RequireLauncher (or SHMCOLL_REQUIRE_LAUNCHER=1) makes it
// return an error wrapping [shm.ErrNoLauncher] instead. Launcher variables
// that are incomplete, malformed or of a launcher it does not read fail it
// with an error wrapping [shm.ErrNoEnv] that names them, never as a world
// of one.
func JoinEnv(ctx context.Context, opt Options) (*Comm, error) {
	tc, err := tableOf(opt)
	if err != nil {
		return nil, err
	}
	ep, err := shm.JoinEnv(ctx, opt.shm(tc.hash))
	return wrap(ep, err, opt, tc)
}

// wrap makes the communicator of the endpoint a join returned (ep, err),
// and closes the endpoint if that fails.
func wrap(ep *shm.Endpoint, err error, opt Options, tc tableChoice) (*Comm, error) {
	if err != nil {
		return nil, err
	}
	c, err := newComm(ep, opt, tc)
	if err != nil {
		ep.Close()
		return nil, err
	}
	return c, nil
}

// Rank returns the calling rank, in [0, Size()).
func (c *Comm) Rank() int { return c.rank }

// HeapBytes returns the size of each rank's heap in the arena (see
// Options.HeapBytes and Alloc).
func (c *Comm) HeapBytes() int { return c.ep.HeapBytes() }

// Size returns the number of ranks.
func (c *Comm) Size() int { return c.size }

// InProcess reports whether the ranks are goroutines of this process.
func (c *Comm) InProcess() bool { return c.ep.InProcess() }

// Abort aborts the communicator with cause: every rank's pending and later
// calls return an error wrapping ErrAborted that names the cause.
func (c *Comm) Abort(cause error) { c.ep.Abort(cause) }

// Close releases the communicator's share of the arena (the last rank to
// close frees it; a named segment is already unlinked once all ranks
// joined). If the rank's last call returned early (see [Bcast]), Close
// first waits until every rank has made that call and returns its
// mismatch or a peer's failure, as the call would have; otherwise it does
// not wait for the other ranks. It does not close the communicators made
// from this one by Split and Dup. Calls after Close return ErrClosed.
func (c *Comm) Close() error {
	c.closeOnce.Do(func() {
		c.stopProgress()
		err := c.settle(context.Background())
		c.closed = true
		c.closeErr = errors.Join(err, c.ep.Close())
	})
	return c.closeErr
}
