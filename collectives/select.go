package collectives

import (
	"fmt"
	"os"
	"strings"

	"github.com/shmcoll/shmcoll/shm"
)

// Selection: decide is the one place where a call's algorithm is decided,
// from inputs equal on every rank (docs/DESIGN.md, Selection), in order: a
// pin, Direct, Single (the slots while its buffers are cold: singleCold), the
// placement (nearFlat), the table's entry (its
// ordered algorithm for a non-commutative operator), the heuristic. An
// alltoallv's bytes differ per rank: decide takes them as 0, and each of
// its senders chooses one copy or the slot itself and announces it
// (alltoallv.go). Two ranks' placement is agreed (placement.go).

// selectInput is what decide decides from, besides the communicator's
// pins, table, p and oversubscription.
type selectInput struct {
	coll        Collective
	bytes       int
	commutative bool
	arena       bool // every buffer of the call comes from Alloc
	single      bool // cross-memory attach is on and the call can take Single (singleReady)
	cold        bool // Single's buffers are still in 4 KiB pages: the slots take the call unpinned (singleCold)
}

// reason says why decide chose an algorithm.
type reason uint8

const (
	byPin       reason = iota + 1 // Options.Algorithms or SHMCOLL_ALGO_<COLL>
	byDirect                      // arena buffers of at least directMin bytes
	bySingle                      // cross-memory attach for calls of at least singleMin bytes
	byCold                        // the slots (Flat, or a reduction's slots) where Single's buffers are still in 4 KiB pages (singleCold)
	byPlacement                   // the ranks share a cache (nearFlat)
	byTable                       // the table's entry (or its ordered algorithm)
	byHeuristic                   // no entry applies
)

// decision is decide's answer: the algorithm and why.
type decision struct {
	alg Algorithm
	why reason
}

// selector holds what a communicator decides from besides the call.
type selector struct {
	p     int
	over  bool
	place Placement
	pins  *[numColls]Algorithm
	table *selection
}

// decide returns the algorithm of a call (see the rules above).
func (s selector) decide(in selectInput) (decision, error) {
	coll := in.coll
	if coll == CollAlltoallv {
		in.bytes = 0 // its own bytes on each rank, unknown to the others
	}
	pin := s.pins[coll]
	d := decision{pin, byPin} // a pin of Direct or Single that takes the call stays byPin
	switch {
	case in.arena && directTakes(coll, in.bytes, pin, s.over):
		if pin != Direct {
			d = decision{Direct, byDirect}
		}
	case pin == Direct && algorithms[coll][Direct] != nil:
		return d, fmt.Errorf("%w: algorithm direct needs every buffer of the call from Alloc", ErrInvalidArgument)
	case in.single && singleTakes(coll, in.bytes, pin, s.over, s.place):
		switch {
		case pin == Single:
		case !in.cold:
			d = decision{Single, bySingle}
		case singleReduction(coll): // the table's slot algorithm at this size
			d = decision{s.fromTable(in.withoutSingle()).alg, byCold}
		default:
			d = decision{Flat, byCold}
		}
	case pin == Single && algorithms[coll][Single] != nil:
		return d, fmt.Errorf("%w: algorithm single needs cross-memory attach (see Comm.CrossMemory) and, for alltoall, a call not in place", ErrInvalidArgument)
	case pin == Auto && nearFlat(coll, in.bytes, s.over, s.place):
		d = decision{Flat, byPlacement}
	case pin != Auto:
	default:
		d = s.fromTable(in)
	}
	if algorithms[coll][d.alg] == nil {
		return d, fmt.Errorf("%w: algorithm %v does not implement %v", ErrInvalidArgument, d.alg, coll)
	}
	if !in.commutative && !orderPreserving[coll][d.alg] {
		return d, fmt.Errorf("%w: %v for %v", ErrNotCommutative, d.alg, coll)
	}
	return d, nil
}

// fromTable returns the table's entry for in (its ordered algorithm for a
// non-commutative operator), or the heuristic's choice where the table has
// none or names Single and the call cannot take it.
func (s selector) fromTable(in selectInput) decision {
	d := decision{s.table.lookup(in.coll, in.bytes, in.commutative), byTable}
	if d.alg == Auto || d.alg == Single && !in.single {
		d = decision{HeuristicAlgorithm(in.coll, in.bytes, s.p, in.commutative, s.over), byHeuristic}
	}
	return d
}

// withoutSingle returns in for a call that cannot take Single: what a
// cold call goes by.
func (in selectInput) withoutSingle() selectInput {
	in.single = false
	return in
}

// onBuffers reports whether decide's answer for in may depend on in.arena
// or in.single: where Direct or Single takes the call if it can, or the
// table names Single.
func (s selector) onBuffers(in selectInput) bool {
	if in.coll == CollAlltoallv {
		in.bytes = 0 // as decide takes it
	}
	pin := s.pins[in.coll]
	return directTakes(in.coll, in.bytes, pin, s.over) || singleTakes(in.coll, in.bytes, pin, s.over, s.place) ||
		s.table.lookup(in.coll, in.bytes, in.commutative) == Single
}

// directTakes reports whether a call whose buffers all come from Alloc
// takes Direct: Direct serves the collective, and it is pinned, or no
// other algorithm is and the call has at least directMin bytes.
func directTakes(coll Collective, bytes int, pin Algorithm, over bool) bool {
	return algorithms[coll][Direct] != nil &&
		(pin == Direct || pin == Auto && bytes >= directMin(coll, over))
}

// directMin is the smallest call (bytes) whose arena buffers take Direct
// without a pin. Reading a rank's buffer in place leaves its lines shared
// with the readers, so the program's next write of the buffer takes them
// back: below these sizes that costs more than the copy into the slots
// saves. The allgather, which reads p-1 blocks per rank, needs more; more
// still where ranks share CPUs.
func directMin(coll Collective, over bool) int {
	switch coll {
	case CollAllgather, CollAllgatherv:
		if over {
			return 16 << 20
		}
		return 4 << 20
	}
	return 1 << 20
}

// choose decides the algorithm of call a on bytes, remembering the last
// decision per collective. It looks at the buffers (arena, single) only
// where the decision may depend on them (choice.bufs): that costs more than
// the rest of a small call's selection.
func (c *Comm) choose(a *call, bytes int) (Algorithm, error) {
	comm := a.red.user == nil || a.red.comm
	m := &c.chosen[a.coll]
	if m.ok && !m.bufs && m.in.bytes == bytes && m.in.commutative == comm {
		return m.alg, nil // m.in.coll is a.coll, arena and single false
	}
	in := selectInput{coll: a.coll, bytes: bytes, commutative: comm}
	s := c.selector()
	bufs := s.onBuffers(in)
	if bufs {
		if directTakes(a.coll, bytes, c.pinned[a.coll], s.over) {
			in.arena = c.heapOrEmpty(a.send) && c.heapOrEmpty(a.recv)
		}
		in.single = !in.arena && c.singleReady(a)
		if in.single && c.pinned[a.coll] == Auto && singleTakes(a.coll, bytes, Auto, s.over, s.place) {
			in.cold = c.singleCold(a, bytes)
		}
		if m.ok && m.in == in {
			return m.alg, nil
		}
	}
	d, err := s.decide(in)
	if err == nil {
		*m = choice{ok: true, bufs: bufs, in: in, alg: d.alg}
	}
	return d.alg, err
}

// choice is a remembered decision of choose. Unless bufs, decide did not
// look at in.arena and in.single, which choose leaves false.
type choice struct {
	ok, bufs bool
	alg      Algorithm
	in       selectInput
}

func (c *Comm) selector() selector {
	return selector{p: c.size, over: c.ep.Oversubscribed(), place: c.place, pins: &c.pinned, table: &c.sel}
}

// smallUpTo returns the largest size up to hi bytes (lo: the smallest a
// call can have) such that decide picks alg for coll at every size from lo
// up to it, with a commutative operator and no arena buffers, and does
// not look at the buffers (onBuffers): the range of the small-call path,
// which runs one algorithm whatever the buffers; -1 if not even lo.
func (s selector) smallUpTo(coll Collective, alg Algorithm, lo, hi int) int {
	upTo := -1
	for b := lo; b <= hi; b++ {
		in := selectInput{coll: coll, bytes: b, commutative: true}
		if d, err := s.decide(in); err != nil || d.alg != alg || s.onBuffers(in) {
			break
		}
		upTo = b
	}
	return upTo
}

// LastAlgorithm returns the algorithm of the current or last call (Auto
// before the first): what auto chose, or the pinned one.
func (c *Comm) LastAlgorithm() Algorithm { return c.desc.alg() }

// Oversubscribed reports whether the ranks are processes that outnumber
// the machine's online CPUs (the same on every rank); selection table
// entries measured in the same condition apply.
func (c *Comm) Oversubscribed() bool { return c.ep.Oversubscribed() }

// HeuristicAlgorithm returns what auto selection picks for a call of coll
// on bytes with p ranks where neither a pin, Direct nor the selection
// table decides (Auto for an unknown collective or p < 1); oversubscribed
// is [Comm.Oversubscribed]'s value. shmbench tune keeps it unless another
// algorithm is clearly faster.
//
// It is the last rule of selection. On shared memory a round costs
// a cache-line hand-off per waiting rank and, when ranks outnumber the
// CPUs, a context switch, so it prefers the fewest synchronizations that
// keep the bytes moved per rank near the minimum:
//   - allreduce: replicated (one synchronization, p times the reduction
//     work) for small vectors; above, circulant for two ranks (half the
//     vector copied in, the first reduction fused with the copy-in) and
//     flat for more (two synchronizations, 1/p of the reduction per rank);
//   - reduce: replicated (only the root reduces) for two ranks and small
//     vectors, flat above;
//   - reduce-scatter: circulant for two ranks (one round, the copy-in
//     fused with the reduction) unless the vector fits in the counter's
//     line (tinyBytes), flat above two ranks (one synchronization);
//   - barrier: circulant (ceil(log2 p) rounds of one peer each), but
//     where ranks share CPUs, since each round then costs turns on a CPU,
//     the root-first barrier (ReduceBcast: every rank posts, rank 0
//     releases), whose rank 0 leaves while the others wait for their
//     turn, so that a call rooted at rank 0 after it finds its root's
//     data posted, as after an MPI's eager send;
//   - everything else: flat (one synchronization per segment).
//
// Replicated and flat combine in rank order, so a non-commutative
// operator takes the same path except where circulant is named: flat.
func HeuristicAlgorithm(coll Collective, bytes, p int, commutative, oversubscribed bool) Algorithm {
	if coll >= numColls || p < 1 {
		return Auto
	}
	switch coll {
	case CollAllreduce:
		if bytes <= 16<<10 || p == 2 && bytes <= 64<<10 {
			return Replicated
		}
		if p == 2 && commutative {
			return Circulant
		}
		return Flat
	case CollReduce:
		if p == 2 || bytes <= 16<<10 {
			return Replicated
		}
		return Flat
	case CollReduceScatterBlock, CollReduceScatter:
		if p == 2 && commutative && bytes > tinyBytes {
			return Circulant
		}
		return Flat
	case CollBarrier:
		if oversubscribed {
			return ReduceBcast
		}
		return Circulant
	}
	return Flat
}

// pinsOf returns the pins of a communicator made with opt:
// Options.Algorithms over SHMCOLL_ALGO_<COLL>.
func pinsOf(opt Options) (pins [numColls]Algorithm, err error) {
	for coll := range numColls {
		if v := os.Getenv("SHMCOLL_ALGO_" + strings.ToUpper(coll.String())); v != "" {
			if pins[coll], err = ParseAlgorithm(v); err != nil {
				return pins, fmt.Errorf("SHMCOLL_ALGO_%s: %w", strings.ToUpper(coll.String()), err)
			}
		}
	}
	for coll, a := range opt.Algorithms {
		if coll >= numColls || a >= numAlgorithms {
			return pins, fmt.Errorf("%w: bad pin %v=%v", ErrInvalidArgument, coll, a)
		}
		pins[coll] = a
	}
	return pins, nil
}

// A Call describes a collective call for [Select].
type Call struct {
	// Coll is the collective called.
	Coll Collective
	// Bytes is the call's size as shmbench counts it (docs/TUNING.md);
	// not used for an alltoallv, whose sizes differ per rank.
	Bytes int
	// P is the number of ranks.
	P int
	// NonCommutative: the operator does not commute.
	NonCommutative bool
	// Arena: every buffer of the call comes from [Alloc].
	Arena bool
	// Oversubscribed: the ranks are processes that outnumber the CPUs.
	Oversubscribed bool
	// CrossMemory: cross-memory attach is on ([Comm.CrossMemory]) and
	// the buffers are private (not Arena; for alltoall, not in place).
	CrossMemory bool
	// Placement: what the communicator's last placement probe found
	// ([Comm.Placement]; two ranks only).
	Placement Placement
}

// Select returns the algorithm that a communicator made with opt (its
// Algorithms, Table and the environment's SHMCOLL_ALGO_<COLL> and
// SHMCOLL_TUNE_FILE) chooses for call, and the reason in words.
func Select(call Call, opt Options) (Algorithm, string, error) {
	if call.Coll >= numColls || call.P < 1 || call.Bytes < 0 {
		return Auto, "", fmt.Errorf("%w: Select: collective %v, p %d, bytes %d", ErrInvalidArgument, call.Coll, call.P, call.Bytes)
	}
	tc, err := tableOf(opt)
	if err != nil {
		return Auto, "", err
	}
	pins, err := pinsOf(opt)
	if err != nil {
		return Auto, "", err
	}
	sel := tc.tab.selection(call.P, call.Oversubscribed)
	place := call.Placement
	if call.P != 2 || call.Oversubscribed {
		place = PlacementUnknown // never probed
	}
	s := selector{p: call.P, over: call.Oversubscribed, place: place, pins: &pins, table: &sel}
	in := selectInput{coll: call.Coll, bytes: call.Bytes, commutative: !call.NonCommutative, arena: call.Arena,
		single: call.CrossMemory && !call.Arena && Implements(call.Coll, Single)}
	d, err := s.decide(in)
	if err != nil {
		return d.alg, "", err
	}
	why := map[reason]string{
		byPin:       "pinned by SHMCOLL_ALGO_" + strings.ToUpper(call.Coll.String()),
		byDirect:    "every buffer comes from Alloc and the call has at least " + formatTableSize(int64(directMin(call.Coll, call.Oversubscribed))),
		bySingle:    "cross-memory attach is on and the call has at least " + formatTableSize(int64(singleMin(call.Coll, call.Oversubscribed, place))) + placeWhy(call.Coll, place) + ": one copy between the ranks' own buffers by cross-memory attach",
		byPlacement: "the two ranks share a cache (placement near): two copies through the slots, where ranks further apart take one by cross-memory attach",
		byHeuristic: "no table entry for this p, oversubscription and size: the heuristic",
	}[d.why]
	if d.why == bySingle && coldCovers(call.Coll, call.Bytes, call.P, place) {
		before := "flat"
		if singleReduction(call.Coll) {
			before = s.fromTable(in.withoutSingle()).alg.String()
		}
		why += fmt.Sprintf("; between processes from call %d of this collective and size on the communicator, %s before it, while the buffers are in 4 KiB pages", shm.HugeAfter, before)
	}
	if d.why == byPin && opt.Algorithms[call.Coll] != Auto {
		why = "pinned by Options.Algorithms"
	}
	if r := sel.entry(call.Coll, call.Bytes); d.why == byTable {
		why = fmt.Sprintf("selection table (%s) entry %v p=%d over=%v [%s, %s)", tc.src, call.Coll, call.P, call.Oversubscribed, formatTableSize(r.From), formatTableSize(r.To))
		if d.alg != r.Alg {
			why += fmt.Sprintf(": its order-preserving algorithm, since %v does not keep rank order", r.Alg)
		}
		if r.Reason != "" {
			why += "; override: " + r.Reason
		}
	}
	if call.Coll == CollAlltoallv && d.alg == Flat && d.why != byPin && in.single {
		why += fmt.Sprintf("; each rank whose blocks add up to at least %s and less than %s sends them by cross-memory attach, the others through their slots",
			formatTableSize(int64(singleMin(CollAlltoallv, call.Oversubscribed, PlacementUnknown))), formatTableSize(int64(singleMax(CollAlltoallv, call.Oversubscribed))))
	}
	for _, sp := range smallPaths {
		if sp.coll != call.Coll || call.Arena || call.NonCommutative || call.P < 2 || call.Bytes < sp.lo {
			continue
		}
		if up := s.smallUpTo(sp.coll, sp.alg, sp.lo, sp.hi); call.Bytes <= up {
			why += fmt.Sprintf("; the small-call path, which serves %v up to %d bytes here", call.Coll, up)
		}
	}
	return d.alg, why, nil
}

// placeWhy names the placement in Select's reason where coll's threshold
// depends on it.
func placeWhy(coll Collective, place Placement) string {
	if lo, hi := placementBand(coll); lo == hi {
		return ""
	}
	return " at " + place.String() + " placement"
}
