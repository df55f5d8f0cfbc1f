package collectives

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/shmcoll/shmcoll/shm"
	"github.com/shmcoll/shmcoll/simd"
)

// The Single algorithms: one copy for private buffers. Through the slots a
// block is copied twice (into the owner's slot, out of it); by
// cross-memory attach (shm's ReadPeer and WritePeer: process_vm_readv and
// process_vm_writev between processes, a plain copy between goroutine
// ranks) it is copied once, between the ranks' own buffers. One step per
// call:
//
//  1. every rank writes into its slot half a table of p ranges of its own
//     memory, entry j the range that rank j accesses, and posts phase 1
//     (the table starts after the room of an alltoallv header, where an
//     alltoallv rank offers its blocks beside its header, alltoallv.go):
//     allgather(v): the place of j's block in its recv, which j writes,
//     and its own block, of which j reads what is not written (an
//     allgatherv's large blocks, singlePush);
//     alltoall: its send block for j, which j reads; bcast, scatter(v)
//     and gather(v): at the root j's block of its buffer, at j its recv
//     (gather: its send), which the two copy between them;
//  2. every rank waits for phase 1 of the peers it copies with, checks
//     the length of their entries for it against its own buffer, copies,
//     and posts phase 2: allgather writes its block into its own recv and
//     every peer's piece by piece, so that each piece is read from memory
//     once, and reads the rest of the peers' large blocks; alltoall
//     reads its block from every peer; in the rooted calls the root
//     copies 1/p of every block and each other rank the rest of its
//     own, at once;
//  3. a rank whose ranges peers access returns only after every one of
//     them posted phase 2 (the rooted calls: the root waits for every
//     rank, every other rank for the root), so the caller owns its buffers
//     again when the call returns.
//
// A failed copy (the peer died: ErrPeerDead; the kernel refused) fails the
// call and aborts the communicator, so that every rank's waits end with
// the error; a dead rank is found by the waits' liveness check.
//
// A rank whose call fails (its own check, a peer's abort, a dead peer)
// returns only once no peer accesses its buffers any more, since the
// caller may reuse them at once. The waits cannot tell it (an abort ends
// them), so each entry of the table has a state word that the owner and
// the peer it offers the range to change atomically: the owner sets it
// offered; the peer turns it from offered to copying for each copy and
// back after it, and copies only if it could; the owner of a failed call
// turns every entry from offered to closed, waiting while a peer copies
// (withdraw), so a peer that comes later finds the range closed and fails
// the call (the owner has aborted the communicator) instead of copying.
// On the common path this costs two atomic operations per copy on the
// owner's table, and no phase.
//
// The buffers must stay where they are while peers access them: a Go
// heap object does not move, a goroutine stack does. Every buffer a
// collective is given escapes to the heap already (the call keeps it in
// the Comm, c.args; TestSingleBuffersOnHeap checks it), so Single adds
// no allocation.
//
// An alltoall in place does not take Single: each rank's recv blocks are
// read by the peers while the rank overwrites them. Since the ranks must
// all choose Single or all not, the call's descriptor carries in place
// (alltoallInPlace), so that an alltoall in place on some ranks and not
// on others fails with ErrMismatch on every rank, at every size the
// small-call path does not serve (MPI asks for MPI_IN_PLACE on every rank
// or none).
//
// Alltoallv has its own algorithm, Flat and Single alike, in alltoallv.go:
// each sender offers its blocks by cross-memory attach or puts them in its
// slot, and says which in the header its readers read first.

// alltoallInPlace is the descriptor's aux word of an alltoall in place
// (0 otherwise).
const alltoallInPlace = 1

func init() {
	register(CollAllgather, Single, (*Comm).singleAllgather, true)
	register(CollAllgatherv, Single, (*Comm).singleAllgather, true)
	register(CollAlltoall, Single, (*Comm).singleAlltoall, true)
	register(CollScatter, Single, (*Comm).singleRooted, true)
	register(CollGather, Single, (*Comm).singleRooted, true)
	register(CollBcast, Single, (*Comm).singleRooted, true)
}

// singleMin is the smallest call (bytes, as selection counts them) that
// takes Single without a pin where cross-memory attach is on, for ranks
// that fit the CPUs or outnumber them (over), at placement place (p = 2,
// placement.go); 0 means never. Below these sizes the system calls (one
// per block, each pinning the peer's pages) cost more than the second copy
// through the slots, whose pieces stay in the caches the ranks share: on
// the project's machine the slots are ahead up to 4 MiB at both
// placements of its two vCPUs, by 1.3-4x at 16 KiB-1 MiB (but scatter,
// below), and one copy is ahead from 4-16 MiB for the collectives that
// move data (shmbench compare -np 2 against the same build with
// SHMCOLL_CMA=off, docs/PERFORMANCE.md). Two ranks that share a cache
// keep the slots ahead up to larger calls than two ranks further apart:
// allgather(v) 12 MiB against 6 MiB (allgatherv 8 MiB; the flat allgather
// by nearFlat), bcast 8 MiB against 4, gather and scatter 16 MiB against
// 4 and 1, alltoall to its singleMax against 8 MiB; an unknown placement
// (more ranks, or Select without one) takes the far sizes but allgather's
// (8 MiB). The reductions keep the slots at every size: their
// algorithms there are faster from 16 KiB to 64 MiB. Where ranks share
// CPUs a reader waits for its turn on a CPU either way, and the slots stay
// ahead up to larger sizes. Fitting ranks of p > 2 use the sizes of p = 2
// at an unknown placement.
func singleMin(coll Collective, over bool, place Placement) int {
	switch coll {
	case CollAllgather, CollAllgatherv:
		switch {
		case over:
			return 0 // the circulant allgather through the slots stays ahead at np = 8
		case place == PlacementFar && coll == CollAllgather:
			return 6 << 20
		case place == PlacementNear:
			return 12 << 20
		}
		return 8 << 20
	case CollBcast:
		switch {
		case over:
			return 0 // likewise the flat and tree bcasts
		case place == PlacementNear:
			return 8 << 20
		}
		return 4 << 20
	case CollAlltoall:
		// Where ranks share CPUs the slots are as fast at 1 MiB, and
		// some runs of Single there are much slower (compare against
		// 9ffd10c at np = 8).
		switch {
		case over:
			return 2 << 20
		case place == PlacementNear:
			return singleAlltoallMax // never
		}
		return 8 << 20
	case CollAlltoallv:
		// A sender's bytes, its own block included (alltoallv.go): its
		// slot path, with a header in every step, is behind from less.
		if over {
			return 1 << 20
		}
		return 8 << 10
	case CollGather, collGatherv:
		switch {
		case over:
			return 1 << 20
		case place == PlacementNear:
			return 16 << 20
		}
		return 4 << 20
	case CollScatter, collScatterv:
		// The root packs every block before it posts: on different dies
		// one copy is ahead from 512 KiB, on one cache the slots up to
		// 16 MiB; where ranks share CPUs, from 1 MiB too.
		if place == PlacementNear && !over {
			return 16 << 20
		}
		return 1 << 20
	}
	// The reductions. Two ranks on different dies: one read and one
	// write of each half between the dies, where the slots make two
	// exchanges through them, ahead once the buffers have huge pages (the
	// cold calls before that stay on the slots: singleCold). On one
	// cache, and where ranks share CPUs or are more, the slot algorithms
	// stay ahead.
	if singleReduction(coll) && place == PlacementFar && !over {
		return singleReduceFarMin
	}
	return 0
}

// singleReduction reports whether coll is one of the reductions Single
// serves (singlereduce.go).
func singleReduction(coll Collective) bool {
	switch coll {
	case CollAllreduce, CollReduce, CollReduceScatterBlock, CollReduceScatter:
		return true
	}
	return false
}

// singleReduceFarMin is the smallest reduction that two ranks far apart
// take Single for (shmbench run -np 2 -algo single against the table's
// algorithms at far placement, with the buffers in huge pages).
const singleReduceFarMin = 8 << 20

// singleTakes reports whether a call of coll on bytes takes Single: it is
// pinned, or nothing else is and the call has at least singleMin bytes
// and fewer than singleMax.
func singleTakes(coll Collective, bytes int, pin Algorithm, over bool, place Placement) bool {
	if pin == Single {
		return true
	}
	m := singleMin(coll, over, place)
	return pin == Auto && m > 0 && bytes >= m && bytes < singleMax(coll, over)
}

// singleMax bounds the calls of coll that take Single without a pin. An
// alltoall, or an alltoallv sender, whose ranks share CPUs goes through
// the slots from singleOverAlltoallMax: there they are ahead (shmbench
// compare -np 8 against the same build with SHMCOLL_CMA=off, and against
// 9ffd10c).
func singleMax(coll Collective, over bool) int {
	if (coll == CollAlltoall || coll == CollAlltoallv) && over {
		return singleOverAlltoallMax
	}
	switch coll {
	case CollAlltoall, CollAlltoallv, CollAllgatherv:
		return singleAlltoallMax
	}
	return math.MaxInt
}

// singleAlltoallMax bounds the alltoalls and allgathervs that take Single
// without a pin: from there the flat alltoall, whose reads of the peers'
// slots stream with the copies into them, is ahead (shmbench run -algo
// single,flat at np = 2), and so is the table's allgatherv, where an
// uneven block makes one rank write far more than the others (shmbench
// compare against 9ffd10c at np = 2).
const singleAlltoallMax = 32 << 20

const singleOverAlltoallMax = 4 << 20

// CrossMemory returns nil if the ranks of c can read each other's private
// memory (cross-memory attach, agreed by every rank when the communicator
// was made), and otherwise why not, the same on every rank: an error
// wrapping shm.ErrNoCrossMemory. Without it no call takes [Single].
func (c *Comm) CrossMemory() error { return c.ep.CrossMemory() }

// singleOn reports whether the communicator can run Single: cross-memory
// attach is on and a slot half holds the table.
func (c *Comm) singleOn() bool {
	return c.ep.CrossMemory() == nil && singleScratch(c.size) <= c.half
}

// singleScratch is where the slot half's room after the table begins:
// the table starts after the room of an alltoallv header (a2avHeader).
func singleScratch(p int) int { return alignUp(a2avHeader(p) + singleTableBytes(p)) }

// singleTableBytes is the size of a table of p ranks: two ranges and a
// state word per rank.
func singleTableBytes(p int) int { return 40 * p }

// singleReady reports whether this rank may take Single for call a: the
// communicator can, Single serves the collective, a is not an alltoall
// in place, and a reduction's pieces fit in the slot half.
func (c *Comm) singleReady(a *call) bool {
	if a.coll == CollAlltoall && a.send == nil || singleReduction(a.coll) && !c.singleReduceOn() {
		return false
	}
	return c.singleOn() && algorithms[a.coll][Single] != nil
}

// vectorAlgorithm returns the algorithm of a gatherv or scatterv (which
// the selection table does not cover) and its implementation: Single
// where it takes the call, else flat, f.
func (c *Comm) vectorAlgorithm(a *call, f impl) (Algorithm, impl) {
	if n := a.count * a.esz; c.singleOn() && singleTakes(a.coll, n, Auto, c.ep.Oversubscribed(), c.place) && !c.singleCold(a, n) {
		return Single, (*Comm).singleRooted
	}
	return Flat, f
}

// singleTable returns rank q's table of step e: for every rank j, the
// address (in q's address space) and the length of the range j accesses,
// then the p state words (singleState), then for every rank j the address
// and length of a second range (the reductions: the place of j's block in
// q's recv, which j writes, beside the first, j's block of q's input).
func (c *Comm) singleTable(q int, e uint64) []uint64 {
	h := c.slotHalf(q, e)[a2avHeader(c.size):]
	return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(h))), 5*c.size)
}

// singleState returns the state word of rank q's entry for rank j in its
// table of step e: rangeClosed, rangeOffered or rangeCopying.
func (c *Comm) singleState(q int, e uint64, j int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&c.singleTable(q, e)[2*c.size+j]))
}

// The states of a table entry (see the Single algorithms).
const (
	rangeClosed  = iota // nothing offered, or withdrawn: not to be accessed
	rangeOffered        // the peer may copy
	rangeCopying        // the peer copies
)

// offer writes b (empty: nothing) as this rank's entry for rank j in its
// table of step e.
func (c *Comm) offer(e uint64, j int, b []byte) { c.offer2(e, j, b, nil) }

// offer2 writes b0 and b1 (empty: nothing) as this rank's two ranges for
// rank j in its table of step e.
func (c *Comm) offer2(e uint64, j int, b0, b1 []byte) {
	t := c.singleTable(c.rank, e)
	st := uint64(rangeClosed)
	for k, b := range [2][]byte{b0, b1} {
		w := t[2*j+3*c.size*k:]
		w[0], w[1] = 0, uint64(len(b))
		if len(b) > 0 {
			w[0] = uint64(shm.AddrOf(b))
			if singleBadAddr {
				w[0] = badAddr
			}
			st = rangeOffered
		}
	}
	c.singleState(c.rank, e, j).Store(st)
}

// withdraw closes this rank's table of step e after its call failed:
// every entry a peer may still copy with is closed, after the copy in
// progress, if any, has ended. *err is the call's error; nil: nothing to
// do (every peer posted that it is done, or the call offered nothing).
// A copy is one system call or memory copy of a live peer, so the wait
// is short; a peer that died in a copy leaves its state copying, so the
// wait ends when the peer is found dead, or stuck for singleStuck.
func (c *Comm) withdraw(e uint64, err *error) {
	if *err == nil {
		return
	}
	var start time.Time
	for j := range c.size {
		if j == c.rank {
			continue
		}
		st := c.singleState(c.rank, e, j)
		for i := 0; !st.CompareAndSwap(rangeOffered, rangeClosed) && st.Load() == rangeCopying; i++ {
			if i < 64 {
				runtime.Gosched()
				continue
			}
			if start.IsZero() {
				start = time.Now()
			} else if time.Since(start) > singleStuck || !c.ep.PeerAlive(j) {
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
}

// offerBlocks offers every peer j block j of buf (a's counts and
// displacements) in this rank's table of step e and posts phase 1.
func (c *Comm) offerBlocks(e uint64, a *call, buf []byte) {
	for j := range c.size {
		if j != c.rank {
			c.offer(e, j, span(buf, a.esz, a.displs[j], a.displs[j]+a.counts[j]))
		}
	}
	c.post(e, 1)
}

// singleStuck bounds withdraw's wait for a peer's copy.
const singleStuck = 10 * time.Second

// singleBadAddr makes this process offer badAddr, an address it does not
// map, instead of its buffers: a test of the peers' failed copies.
var singleBadAddr bool

const badAddr = 1 << 12

// waitOffer waits for q's phase 1 of step e and checks that q offers
// this rank n bytes.
func (c *Comm) waitOffer(ctx context.Context, q int, e uint64, n int) error {
	return c.waitOffer2(ctx, q, e, n, 0)
}

// waitOffer2 waits for q's phase 1 of step e and checks that q offers
// this rank n0 bytes in its first range and n1 in its second.
func (c *Comm) waitOffer2(ctx context.Context, q int, e uint64, n0, n1 int) error {
	if err := c.wait(ctx, q, e, 1); err != nil {
		return err
	}
	t := c.singleTable(q, e)
	for k, n := range [2]int{n0, n1} {
		if m := t[2*c.rank+3*c.size*k+1]; m != uint64(n) {
			return c.mismatch(fmt.Sprintf("rank %d offers %d bytes to rank %d, which expects %d", q, m, c.rank, n))
		}
	}
	return nil
}

// move copies between local and bytes [off, off+len(local)) of the range
// q offers this rank in step e (after waitOffer): q's bytes into local, or
// local into q's range when write.
func (c *Comm) move(q int, e uint64, off int, local []byte, write bool) error {
	return c.moveRange(q, e, 0, off, local, write)
}

// moveRange is move on q's range k (0 or 1) for this rank.
func (c *Comm) moveRange(q int, e uint64, k, off int, local []byte, write bool) error {
	if len(local) == 0 {
		return nil
	}
	addr := uintptr(c.singleTable(q, e)[2*c.rank+3*c.size*k]) + uintptr(off)
	st := c.singleState(q, e, c.rank)
	if !st.CompareAndSwap(rangeOffered, rangeCopying) {
		// q's call failed and withdrew the range; q aborted first.
		return c.fail(c.ep.Err())
	}
	var err error
	if write {
		err = c.ep.WritePeer(q, addr, local)
	} else {
		err = c.ep.ReadPeer(q, addr, local)
	}
	st.Store(rangeOffered)
	if err != nil {
		return c.fail(err)
	}
	return nil
}

// singleChunk is the piece of its block that an allgather rank copies
// into its own recv and then writes into every peer's while the piece is
// in its cache: its block is read from memory once, not once by the rank
// and again by every peer. Each piece costs a system call per peer, whose
// fixed part (the access check, the peer's memory map locked and its
// pages array set up) is why the pieces are not smaller.
const singleChunk = 512 << 10

// singleAllgather: every rank offers each peer j the place of j's block
// in its recv and its own block; each rank copies its block into its own
// recv piece by piece and writes each piece into every peer's recv, up to
// the part pushLen gives, and reads from every peer the rest of that
// peer's block (an allgatherv's uneven blocks, singlePush). A write puts
// the data into lines the writer holds; a read takes them from the peer's
// cache, so the ranks write what they can. The first piece's own copy
// runs before the wait for the peers' offers, the last piece's and the
// rest after the copies between the ranks and the post of phase 2 (where
// at most one piece is written: up to half of the block before, the rest
// after), so that the handoffs of both phases overlap a copy.
func (c *Comm) singleAllgather(ctx context.Context, a *call) (err error) {
	esz, p, r := a.esz, c.size, c.rank
	block := func(j int) []byte { return span(a.recv, esz, a.displs[j], a.displs[j]+a.counts[j]) }
	mine := block(r)
	src := mine
	if a.send != nil {
		src = a.send
	}
	e, err := c.begin(ctx)
	if err != nil {
		return err
	}
	defer c.withdraw(e, &err)
	c.offerHuge(a)
	for j := range p {
		if j != r {
			c.offer2(e, j, block(j), src)
		}
	}
	c.post(e, 1)
	nt := len(a.recv) >= singleNTMin
	own := func(lo, hi int) {
		switch {
		case a.send == nil:
		case nt:
			simd.CopyNT(mine[lo:hi], a.send[lo:hi])
		default:
			simd.Copy(mine[lo:hi], a.send[lo:hi])
		}
	}
	most := singlePush(a.counts, esz, len(a.recv))
	x := pushLen(len(src), most)
	last := max(x-1, 0) / singleChunk * singleChunk
	ahead := min(singleChunk, x)
	if last == 0 {
		ahead = min(len(src)/2&^(lineBytes-1), singleChunk)
	}
	own(0, ahead)
	for i := 1; i < p; i++ {
		q := c.next(i)
		if err := c.waitOffer2(ctx, q, e, len(mine), a.counts[q]*esz); err != nil {
			return err
		}
	}
	for lo := 0; lo < x; lo += singleChunk {
		hi := min(lo+singleChunk, x)
		if lo > 0 && lo < last {
			own(lo, hi)
		}
		for i := 1; i < p; i++ {
			if err := c.move(c.next(i), e, lo, src[lo:hi], true); err != nil {
				return err
			}
		}
	}
	for i := 1; i < p; i++ {
		q := c.next(i)
		b := block(q)
		y := pushLen(len(b), most)
		if err := c.moveRange(q, e, 1, y, b[y:], false); err != nil {
			return err
		}
	}
	c.post(e, 2)
	own(max(ahead, last), len(src))
	c.last.add(Stats{Rounds: 1, Sent: uint64(p - 1), Received: uint64(p - 1)})
	if err := c.waitAll(ctx, e, 2); err != nil {
		return err
	}
	c.full = true
	c.end(e)
	return nil
}

// singleHugeMin is the smallest buffer that a rank offers its peers in a
// Single call (the recv of an allgather(v), the send of an alltoall, a
// rooted call's buffer or block) behind which it asks for huge pages
// (shm's PreferHugePages: once it has been offered in many calls),
// since the peers' copies into or out of it cost the kernel a pin per
// 4 KiB page: from there the pins are a large part of the call
// (docs/floors/allgather_cma_pieces.c, huge 3 against 0; shmbench run of
// alltoall, bcast, gather and scatter against the build without).
const singleHugeMin = 4 << 20

// preferHuge tells the endpoint that this rank offers b to its peers, from
// singleHugeMin bytes.
func (c *Comm) preferHuge(b []byte) {
	if len(b) >= singleHugeMin {
		c.ep.PreferHugePages(b)
	}
}

// singleCold reports whether a call of a.coll on bytes that Single would
// take unpinned takes the slots instead (Flat; a reduction the table's
// algorithm at that size), since its buffers are still in
// 4 KiB pages: a peer's copy by cross-memory attach pins every page it
// touches, and from singleHugeMin the pins cost more than the flat
// algorithm's second copy through the slots (shmbench run -algo
// single,flat with SHMCOLL_HUGEPAGES=off and on, two ranks far apart;
// flat is also ahead of the table's slot algorithms at these sizes:
// docs/PERFORMANCE.md, "Huge pages"; a reduction's Single in 4 KiB pages
// is behind its slot algorithms, with huge pages ahead). A buffer Single
// offers gets huge pages at its shm.HugeAfter-th offer, so the communicator counts such
// calls per collective and size (coldCovers says which): the first
// shm.HugeAfter-1 are cold, and each offers the buffers Single would
// (offerHuge), so that the call that then takes Single makes the offer
// that collapses them. The count is the same on every rank (the calls
// and their bytes are, and so is what decides that Single would take
// them), so the ranks agree, whatever their buffers. A program whose
// buffers change from call to call gets no huge pages either way and
// takes Single from the shm.HugeAfter-th call. Goroutine ranks pin
// nothing (their copies are plain copies).
func (c *Comm) singleCold(a *call, bytes int) bool {
	if c.ep.InProcess() || !coldCovers(a.coll, bytes, c.size, c.place) {
		return false
	}
	n := c.warm[a.coll].count(bytes)
	if *n >= shm.HugeAfter {
		return false
	}
	if *n++; *n == shm.HugeAfter {
		return false // Single takes this call; its offer collapses the buffers
	}
	c.offerHuge(a)
	return true
}

// warmSizes counts the calls of one collective that singleCold covers,
// for each of the last few sizes (a size stands for the buffers a
// program keeps for it): the sizes, the calls of each, and the entry
// replaced next.
type warmSizes struct {
	bytes [4]int
	calls [4]uint8
	next  uint8
}

// count returns the count of the calls of bytes, a new one (0) if the
// size is not among the last few.
func (w *warmSizes) count(bytes int) *uint8 {
	for i, b := range w.bytes {
		if b == bytes {
			return &w.calls[i]
		}
	}
	i := w.next
	w.next = (w.next + 1) % uint8(len(w.bytes))
	w.bytes[i], w.calls[i] = bytes, 0
	return &w.calls[i]
}

// coldCovers reports whether singleCold applies to a call of coll on
// bytes with p ranks at placement place that Single would take: two
// ranks far apart (near ones, which take Single from larger calls, have
// the flat algorithm's first calls no faster than Single's in 4 KiB
// pages), the buffer Single offers (the whole, or a block of gather and
// scatter) gets huge pages (singleHugeMin), and the call is below
// singleColdMax.
func coldCovers(coll Collective, bytes, p int, place Placement) bool {
	offered := bytes
	switch coll {
	case CollGather, CollScatter, collGatherv, collScatterv:
		offered = bytes / p
	}
	return place == PlacementFar && offered >= singleHugeMin && bytes < singleColdMax(coll)
}

// singleColdMax bounds the calls that singleCold keeps on the slots:
// from there one copy by cross-memory attach is ahead in 4 KiB pages too
// (allgather: the slots' two copies of every block no longer stay in the
// caches).
func singleColdMax(coll Collective) int {
	if coll == CollAllgather {
		return 32 << 20
	}
	return math.MaxInt
}

// offerHuge tells the endpoint of the buffers a Single call offers its
// peers (preferHuge): an allgather(v)'s recv, an alltoall's send, a rooted
// call's blocks at the root and its buffer elsewhere, a reduction's input
// and the recv the peers write. Single calls it, and
// so does a call that takes the slots while they are cold (singleCold), so that
// the offers count the same either way.
func (c *Comm) offerHuge(a *call) {
	switch a.coll {
	case CollAllgather, CollAllgatherv:
		c.preferHuge(a.recv)
	case CollAlltoall:
		c.preferHuge(a.send)
	case CollAllreduce, CollReduce, CollReduceScatterBlock, CollReduceScatter: // singleReduction
		// The input, which the peers read, and the recv where they
		// write into it (singleReduce's offers), once where in place.
		c.preferHuge(a.input())
		if a.send != nil && (a.coll == CollAllreduce || a.coll == CollReduce && c.rank == a.root) {
			c.preferHuge(a.recv)
		}
	default: // bcast, scatter(v), gather(v): as singleRooted offers
		switch {
		case c.rank == a.root:
			for j := range c.size {
				if j != c.rank {
					c.preferHuge(c.rootBlock(a, j))
				}
			}
		case a.coll == CollGather || a.coll == collGatherv:
			c.preferHuge(a.send)
		default:
			c.preferHuge(a.recv)
		}
	}
}

// singleNTMin is the smallest recv of an allgather(v) whose rank copies
// its own block with non-temporal stores: from there the recvs do not
// stay in the caches, and a store that does not first read the line it
// fills leaves the memory's bandwidth to the copies between the ranks
// (docs/floors/allgather_cma_pieces.c, nt against mem with huge pages).
const singleNTMin = 32 << 20

// singlePush returns how many bytes of its block each rank of an
// allgather(v) of blocks of counts elements of esz bytes into recv bytes
// writes into the peers' recvs (pushLen applies it to a block). A rank
// that writes its whole block works p-1 times that block beside its own
// copy, a rank with a small block little, so where a block is more than
// 1/8 above the mean the larger blocks are written up to halfway between
// the smallest and the mean block and the peers read the rest: each rank
// then copies about as much, counting its own copy, a plain copy, at half
// the cost of a copy between processes (at p = 2 that is the balance).
// Below singleSplitMin such blocks are read whole, which takes every rank
// one system call per peer. Blocks of about the same size are written
// whole, and from singlePullMax every block (each block is then read
// from memory once, where a peer that reads part of it reads it again).
func singlePush(counts []int, esz, recv int) int {
	total, least, most := 0, math.MaxInt, 0
	for _, n := range counts {
		total += n
		least, most = min(least, n), max(most, n)
	}
	switch p := len(counts); {
	case recv >= singlePullMax || 8*most*p <= 9*total:
		return math.MaxInt
	case recv < singleSplitMin:
		return 0
	default:
		return alignUp((total + least*p) * esz / (2 * p))
	}
}

// singleSplitMin is the smallest allgatherv of uneven blocks whose ranks
// write part of their blocks: below it the system call a rank makes for
// its writes beside its reads costs more than the balance saves (shmbench
// compare -coll allgatherv at np = 2 against the build that read every
// such block).
const singleSplitMin = 128 << 10

// pushLen is how much of an n-byte block its rank writes into the peers'
// recvs, cap from singlePush: a block up to 1/8 above cap whole, since a
// peer's read of the rest would cost a system call for little.
func pushLen(n, cap int) int {
	if n-n/9 <= cap {
		return n
	}
	return cap
}

// singlePullMax bounds the allgathers whose ranks read the part of a
// large block above singlePush from its rank: from there the copies run
// at the memory's pace, and the reads, which read every block from memory
// once per rank, move more bytes than the writes, which read each rank's
// block once (shmbench run -coll allgatherv -algo single at np = 2, the
// build that always reads against the one that always writes).
const singlePullMax = 32 << 20

func (c *Comm) singleAlltoall(ctx context.Context, a *call) (err error) {
	esz, p, r := a.esz, c.size, c.rank
	e, err := c.begin(ctx)
	if err != nil {
		return err
	}
	defer c.withdraw(e, &err)
	c.offerHuge(a) // the peers read their blocks from a.send
	c.offerBlocks(e, a, a.send)
	simd.Copy(span(a.recv, esz, a.rdispls[r], a.rdispls[r]+a.rcounts[r]), span(a.send, esz, a.displs[r], a.displs[r]+a.counts[r]))
	for i := 1; i < p; i++ {
		q := (r + i) % p
		b := span(a.recv, esz, a.rdispls[q], a.rdispls[q]+a.rcounts[q])
		if err := c.waitOffer(ctx, q, e, len(b)); err != nil {
			return err
		}
		if err := c.move(q, e, 0, b, false); err != nil {
			return err
		}
	}
	c.last.add(Stats{Rounds: 1, Sent: uint64(p - 1), Received: uint64(p - 1)})
	return c.endAll(ctx, e, 2)
}

// singleRooted runs bcast, scatter(v) and gather(v). The root and each
// other rank q offer each other their ranges for the pair (the root: q's
// block of its buffer; q: its recv, or its send in gather) and share the
// copy: the root copies the first rootShare bytes of each block (reads
// them from q's send in gather, writes them into q's recv otherwise), q
// the rest, at once. Each posts phase 2 when its copies are done and
// returns once the other did: the root after every q, q after the root.
func (c *Comm) singleRooted(ctx context.Context, a *call) (err error) {
	gather := a.coll == CollGather || a.coll == collGatherv
	e, err := c.begin(ctx)
	if err != nil {
		return err
	}
	defer c.withdraw(e, &err)
	c.offerHuge(a)
	if c.rank == a.root {
		for j := range c.size {
			if j != c.rank {
				c.offer(e, j, c.rootBlock(a, j))
			}
		}
		c.post(e, 1)
		for i := 1; i < c.size; i++ {
			q := (c.rank + i) % c.size
			b := c.rootBlock(a, q)
			if err := c.waitOffer(ctx, q, e, len(b)); err != nil {
				return err
			}
			if err := c.move(q, e, 0, b[:c.rootShare(len(b))], !gather); err != nil {
				return err
			}
		}
		if err := c.endAll(ctx, e, 2); err != nil {
			return err
		}
		c.last.Sent += uint64(c.size - 1)
	} else {
		local := a.recv
		if gather {
			local = a.send
		}
		c.offer(e, a.root, local)
		c.post(e, 1)
		if err := c.waitOffer(ctx, a.root, e, len(local)); err != nil {
			return err
		}
		x := c.rootShare(len(local))
		if err := c.move(a.root, e, x, local[x:], gather); err != nil {
			return err
		}
		c.post(e, 2)
		if err := c.wait(ctx, a.root, e, 2); err != nil {
			return err
		}
		c.end(e)
		c.last.Received++
	}
	c.last.Rounds++
	return nil
}

// rootShare is the part of an n-byte block that the root of a rooted call
// copies: 1/p, so that the root, which copies its part of p-1 blocks, and
// every other rank, which copies the rest of one, take about as long (in
// whole cache lines).
func (c *Comm) rootShare(n int) int { return n / c.size &^ (lineBytes - 1) }

// rootBlock returns the root's range for rank j of a rooted call.
func (c *Comm) rootBlock(a *call, j int) []byte {
	switch a.coll {
	case CollBcast:
		return a.recv
	case CollScatter:
		return span(a.send, a.esz, j*a.count, (j+1)*a.count)
	case CollGather:
		return span(a.recv, a.esz, j*a.count, (j+1)*a.count)
	case collScatterv:
		return span(a.send, a.esz, a.displs[j], a.displs[j]+a.counts[j])
	}
	return span(a.recv, a.esz, a.displs[j], a.displs[j]+a.counts[j]) // gatherv
}
