package collectives

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/shmcoll/shmcoll/simd"
)

// Read schedules: the machinery under the Rabenseifner, ring, BDE, MST and
// Bruck families. Each of those algorithms is written as a generator that
// says, round by round, which rank reads which positions of which peer's
// slot half and what it does with them (copy, or reduce with the peer as
// the right or the left operand); a schedule is built once per (algorithm,
// p, parameters) and shared by every rank and every call.
//
// Positions. A step's segment is cut into npos positions (blocks) laid out
// in the same order in every rank's slot half (natural layout), or rotated
// so that position i of rank x is block (x+i) mod p (Bruck). A slot half
// holds two buffers of positions: W at element 0 and X at an element offset
// the driver chooses; X holds the results of whole-range exchanges and is
// the scratch of reductions whose peer is the left operand of a
// non-commutative operator.
//
// Execution (runSchedule): in round t a rank posts phase t+1 ("my rounds
// before t are done"), and for each read of round t waits for the peer's
// phase t+1, so it reads the peer's state after the peer's rounds before t.
// After its last round it posts phase T+1, T the schedule's rounds.
//
// Slot reuse. The builder records every read of a range of a rank's
// buffers. A read of round t and a write by the owner in the same round
// that overlap are a bug of the generator: the builder panics. A write in
// round t of a range that a peer x read in an earlier round t' must not
// happen before x is done with round t': the builder tracks, per rank, what
// it knows transitively from the phases it has waited for (a vector clock
// of phases), and where the rank does not already know that x posted phase
// t'+2 it adds an acknowledgement: a wait for x's phase t'+2 before the
// write. So a range is never overwritten before its readers are done, by
// structure where the algorithm's waits imply it (each algorithm's file
// says where; the tests assert it) and by an acknowledgement otherwise.
// Across steps see step.go. Copies that the user's buffers can replace
// are marked direct and fused (schedXfer).

// xop is what a read does with the peer's positions.
type xop uint8

const (
	xCopy      xop = iota // own = peer
	xReduce               // own = own op peer
	xReduceRev            // own = peer op own
)

// The buffers of a slot half.
const (
	bufW uint8 = 0
	bufX uint8 = 1
)

func otherBuf(b uint8) uint8 { return 1 - b }

type schedAck struct{ peer, phase int32 }

// schedXfer is one read: positions [plo, phi) of the peer's buffer pbuf,
// combined with the own positions from olo of buffer obuf (reductions),
// into the own positions from dlo of buffer dbuf.
type schedXfer struct {
	from             int32
	plo, phi         int32
	olo, dlo         int32
	op               xop
	pbuf, obuf, dbuf uint8
	acks             []schedAck // waits before writing the destination
	// direct: the destination is final and nobody reads it later, so the
	// driver may have it written straight to the user's buffer.
	direct bool
	// fused: the own operand is the rank's input as copied in (nobody has
	// read or written it yet), so the driver may pass the user's input
	// instead and skip its copy-in (the reduction fused with the copy-in).
	fused bool
}

// rankSchedule is one rank's part of a schedule.
type rankSchedule struct {
	rounds [][]schedXfer // the reads of each round, up to its last with one
	out    uint8         // the buffer that holds the rank's result
	fully  bool          // the rank has waited, transitively, for every rank
	// slotOut: the position ranges of the result that are not written
	// directly (the driver copies them from the slot).
	slotOut [][2]int32
	// slotIn: the positions of W that must be copied in when the fused
	// reductions read the user's input.
	slotIn [][2]int32
	stats  Stats // Rounds, Sent, Received, Reduced of one step
}

// schedule is the whole pattern for p ranks.
type schedule struct {
	p, npos int
	rotated bool
	nrounds int
	ranks   []rankSchedule
	// posBlocks, if not nil, lists the ranks whose blocks position i holds
	// (the reduce-scatter placement of the Rabenseifner family).
	posBlocks [][]int
	// eliminated[r]: rank r was folded into another before the butterfly
	// ended (Rabenseifner family).
	eliminated []bool
}

type readRec struct{ reader, round, lo, hi int32 }

// schedBuilder builds a schedule round by round: read() adds reads to the
// current round, endRound() closes it.
type schedBuilder struct {
	s     *schedule
	t     int
	cur   [][]schedXfer   // reads of round t, per rank
	later [][]laterRead   // reads of later rounds, by round - t - 1
	reads [][2][]readRec  // per rank and buffer: the reads of it so far
	know  [][]int32       // know[r][x]: the highest phase of x that r knows x posted
	snaps [][][]int32     // snaps[r][phase]: know[r] when r posted phase
	rds   [][][]schedXfer // rounds per rank
	stats []Stats
}

func newSchedBuilder(p, npos int, rotated bool) *schedBuilder {
	b := &schedBuilder{s: &schedule{p: p, npos: npos, rotated: rotated}}
	b.cur = make([][]schedXfer, p)
	b.reads = make([][2][]readRec, p)
	b.know = make([][]int32, p)
	b.snaps = make([][][]int32, p)
	b.rds = make([][][]schedXfer, p)
	b.stats = make([]Stats, p)
	for r := range p {
		b.know[r] = make([]int32, p)
		b.know[r][r] = 1 // the copy-in phase
		b.snaps[r] = [][]int32{nil, append([]int32(nil), b.know[r]...)}
	}
	return b
}

// read adds a read of rank r from rank from (see schedXfer) to the
// current round.
func (b *schedBuilder) read(r, from int, pbuf uint8, plo, phi int, obuf uint8, olo int, dbuf uint8, dlo int, op xop) {
	b.readAt(b.t, r, from, pbuf, plo, phi, obuf, olo, dbuf, dlo, op)
}

type laterRead struct {
	r int
	x schedXfer
}

// readAt adds a read to round t >= the current round (generators whose
// ranks advance at different paces).
func (b *schedBuilder) readAt(t, r, from int, pbuf uint8, plo, phi int, obuf uint8, olo int, dbuf uint8, dlo int, op xop) {
	if r == from || plo >= phi || t < b.t {
		panic(fmt.Sprintf("collectives: schedule: rank %d reads [%d,%d) from %d in round %d", r, plo, phi, from, t))
	}
	x := schedXfer{from: int32(from), plo: int32(plo), phi: int32(phi),
		olo: int32(olo), dlo: int32(dlo), op: op, pbuf: pbuf, obuf: obuf, dbuf: dbuf}
	if t == b.t {
		b.cur[r] = append(b.cur[r], x)
		return
	}
	for len(b.later) < t-b.t {
		b.later = append(b.later, nil)
	}
	b.later[t-b.t-1] = append(b.later[t-b.t-1], laterRead{r, x})
}

func mergeKnow(dst, src []int32) {
	for i, v := range src {
		if v > dst[i] {
			dst[i] = v
		}
	}
}

// endRound closes round t: every rank posts phase t+1, then does its reads
// of the round in order, each after a wait for the peer's phase t+1.
func (b *schedBuilder) endRound() {
	p, t := b.s.p, b.t
	ph := int32(t + 1)
	for r := range p {
		b.know[r][r] = ph
		if t > 0 {
			b.snaps[r] = append(b.snaps[r], append([]int32(nil), b.know[r]...))
		}
	}
	// Reads and writes of one round must not overlap.
	for r := range p {
		for _, x := range b.cur[r] {
			for _, y := range b.cur[x.from] {
				if y.dbuf == x.pbuf && y.dlo < x.phi && x.plo < y.dlo+(y.phi-y.plo) {
					panic(fmt.Sprintf("collectives: schedule round %d: rank %d reads [%d,%d) of rank %d while it writes [%d,%d)",
						t, r, x.plo, x.phi, x.from, y.dlo, y.dlo+y.phi-y.plo))
				}
			}
		}
	}
	for r := range p {
		if len(b.cur[r]) == 0 {
			continue
		}
		for len(b.rds[r]) < t {
			b.rds[r] = append(b.rds[r], nil)
		}
		xs := b.cur[r]
		for i := range xs {
			x := &xs[i]
			mergeKnow(b.know[r], b.snaps[x.from][ph])
			n := x.phi - x.plo
			for _, rec := range b.reads[r][x.dbuf] {
				if rec.lo < x.dlo+n && x.dlo < rec.hi {
					need := rec.round + 2
					if b.know[r][rec.reader] < need {
						x.acks = append(x.acks, schedAck{peer: rec.reader, phase: need})
						mergeKnow(b.know[r], b.snaps[rec.reader][need])
					}
				}
			}
			st := &b.stats[r]
			st.Rounds++
			st.Received += uint64(n)
			if x.op != xCopy {
				st.Reduced += uint64(n)
			}
			b.stats[x.from].Sent += uint64(n)
		}
		b.rds[r] = append(b.rds[r], xs)
	}
	for r := range p {
		for _, x := range b.cur[r] {
			b.reads[x.from][x.pbuf] = append(b.reads[x.from][x.pbuf], readRec{reader: int32(r), round: int32(t), lo: x.plo, hi: x.phi})
		}
		b.cur[r] = nil
	}
	b.t++
	if len(b.later) > 0 {
		for _, lr := range b.later[0] {
			b.cur[lr.r] = append(b.cur[lr.r], lr.x)
		}
		b.later = b.later[1:]
	}
}

// done returns the schedule; out[r] is the buffer that holds rank r's
// result (nil: W everywhere).
func (b *schedBuilder) done(out []uint8) *schedule {
	for r := range b.cur {
		if len(b.cur[r]) > 0 || len(b.later) > 0 {
			panic("collectives: schedule: reads left in rounds not ended")
		}
	}
	s := b.s
	s.nrounds = b.t
	s.ranks = make([]rankSchedule, s.p)
	for r := range s.p {
		rs := &s.ranks[r]
		rs.rounds = b.rds[r]
		rs.stats = b.stats[r]
		if out != nil {
			rs.out = out[r]
		}
		rs.fully = slices.Min(b.know[r]) >= 1
		b.markDirect(r, rs)
		b.markFused(r, rs)
	}
	return s
}

// markFused marks the reductions of rank r whose own operand, in W and
// reduced in place, is still the rank's input: no peer has read it in
// that round or before, and the rank has not used or written it before.
// The other positions of W are listed in slotIn.
func (b *schedBuilder) markFused(r int, rs *rankSchedule) {
	touched := make([]bool, b.s.npos) // used or written by r so far
	fused := make([]bool, b.s.npos)
	for t, rd := range rs.rounds {
		for i := range rd {
			x := &rd[i]
			n := x.phi - x.plo
			lo, hi := x.olo, x.olo+n
			if x.op != xCopy && x.obuf == bufW && x.dbuf == bufW && x.dlo == x.olo {
				readBefore := slices.ContainsFunc(b.reads[r][bufW], func(rec readRec) bool { return int(rec.round) <= t && rec.lo < hi && lo < rec.hi })
				if !readBefore && !slices.Contains(touched[lo:hi], true) {
					x.fused = true
					setRange(fused, lo, hi)
				}
			}
			if x.op != xCopy && x.obuf == bufW {
				setRange(touched, lo, hi)
			}
			if x.dbuf == bufW {
				setRange(touched, x.dlo, x.dlo+n)
			}
		}
	}
	rs.slotIn = appendUnset(rs.slotIn, fused)
}

// markDirect marks the copies into rank r's result buffer that nothing
// reads or overwrites later, and lists the other positions in slotOut.
func (b *schedBuilder) markDirect(r int, rs *rankSchedule) {
	direct := make([]bool, b.s.npos)
	for t, rd := range rs.rounds {
		for i := range rd {
			x := &rd[i]
			if x.op != xCopy || x.dbuf != rs.out {
				continue
			}
			lo, hi := x.dlo, x.dlo+x.phi-x.plo
			later := slices.ContainsFunc(b.reads[r][x.dbuf], func(rec readRec) bool { return int(rec.round) > t && rec.lo < hi && lo < rec.hi })
			for t2 := t; t2 < len(rs.rounds) && !later; t2++ {
				for j, y := range rs.rounds[t2] {
					if (t2 > t || j > i) && y.dbuf == x.dbuf && y.dlo < hi && lo < y.dlo+y.phi-y.plo {
						later = true
					}
				}
			}
			if !later {
				x.direct = true
				setRange(direct, lo, hi)
			}
		}
	}
	rs.slotOut = appendUnset(rs.slotOut, direct)
}

// setRange sets marks[lo:hi].
func setRange(marks []bool, lo, hi int32) {
	for k := lo; k < hi; k++ {
		marks[k] = true
	}
}

// appendUnset appends to runs the maximal ranges [i, j) of positions not
// set in marks.
func appendUnset(runs [][2]int32, marks []bool) [][2]int32 {
	for i := 0; i < len(marks); {
		if marks[i] {
			i++
			continue
		}
		j := i
		for j < len(marks) && !marks[j] {
			j++
		}
		runs = append(runs, [2]int32{int32(i), int32(j)})
		i = j
	}
	return runs
}

// schedOut tells runSchedule where direct copies go: nil buf, into the
// slot as any other; else position i goes to element base+off[i] of buf
// (vector), or block i to element uoff[i] (blocks, natural layout).
type schedOut struct {
	buf    []byte
	base   int
	blocks bool
	// in, if not nil, is the user's input, position i at element
	// base+off[i] (vector) or block i at element c.sc.uoff[i] (blocks):
	// the fused reductions read it.
	in []byte
	// probe: the fused reductions probe the placement and store
	// non-temporally when advised (probeRead), as the circulant allreduce's.
	probe bool
}

// schedKey names a schedule, a pure function of its key built once per
// process: the algorithm, the collective it computes, p, the root (rooted
// collectives) and the halving levels (Rabenseifner).
type schedKey struct {
	alg        Algorithm
	coll       Collective
	p, root, h int
}

// build builds the schedule k names.
func (k schedKey) build() *schedule {
	switch k.alg {
	case Ring:
		return ringSchedule(k.p, k.root, k.coll)
	case MST:
		return mstSchedule(k.p, k.root, k.coll)
	case BDE:
		return bdeSchedule(k.p, k.coll)
	case Bruck:
		return bruckSchedule(k.p, k.coll == CollAllreduce)
	case RabenseifnerOdd:
		return rabOddSchedule(k.p, k.coll)
	}
	return rabSchedule(k.p, k.alg == Rabenseifner21, k.h, k.coll, k.root)
}

// The cache is an immutable map replaced on insertion, so that the
// lookup of every call takes no lock.
var (
	schedMu    sync.Mutex
	schedCache atomic.Pointer[map[schedKey]*schedule]
)

func init() { schedCache.Store(&map[schedKey]*schedule{}) }

// sched returns the schedule k names for this communicator's p.
func (c *Comm) sched(k schedKey) *schedule {
	k.p = c.size
	if s, ok := (*schedCache.Load())[k]; ok {
		return s
	}
	return buildSched(k)
}

// buildSched builds the schedule k names and caches it (the lookup's slow
// path, kept apart so that the lookup has no deferred call).
func buildSched(k schedKey) *schedule {
	schedMu.Lock()
	defer schedMu.Unlock()
	if s, ok := (*schedCache.Load())[k]; ok {
		return s
	}
	m := maps.Clone(*schedCache.Load())
	m[k] = k.build()
	schedCache.Store(&m)
	return m[k]
}

// schedSpan returns positions [lo, hi) of buffer buf of rank x's half h,
// elements of esz bytes: position i at off[i] in the natural layout, at
// the rotated offset of block (x+i) mod p otherwise (blocks in c.sc.pre).
func (c *Comm) schedSpan(esz int, s *schedule, h []byte, off []int, xoff, x int, buf uint8, lo, hi int) []byte {
	base := 0
	if buf == bufX {
		base = xoff
	}
	if s.rotated {
		return span(h, esz, base+c.roff(x, lo), base+c.roff(x, hi))
	}
	return span(h, esz, base+off[lo], base+off[hi])
}

// runSchedule runs the calling rank's rounds of s in step e. The driver has
// written the rank's initial positions and posted phase 1; off gives the
// positions' element offsets in the natural layout, xoff the element
// offset of buffer X.
func (c *Comm) runSchedule(ctx context.Context, a *call, s *schedule, e uint64, off []int, xoff int, out schedOut) error {
	rs := &s.ranks[c.rank]
	esz, commutes := a.esz, a.red.user == nil || a.red.comm
	h := c.slotHalf(c.rank, e)
	for t := range rs.rounds {
		if t > 0 {
			c.post(e, t+1)
		}
		xs := rs.rounds[t]
		for i := range xs {
			x := &xs[i]
			from := int(x.from)
			if err := c.wait(ctx, from, e, t+1); err != nil {
				return err
			}
			for _, k := range x.acks {
				if err := c.wait(ctx, int(k.peer), e, int(k.phase)); err != nil {
					return err
				}
			}
			n := int(x.phi - x.plo)
			src := c.schedSpan(esz, s, c.slotHalf(from, e), off, xoff, from, x.pbuf, int(x.plo), int(x.phi))
			if x.direct && out.buf != nil {
				c.copyDirect(esz, out, off, src, int(x.dlo), int(x.dlo)+n)
				continue
			}
			dst := c.schedSpan(esz, s, h, off, xoff, c.rank, x.dbuf, int(x.dlo), int(x.dlo)+n)
			if x.op == xCopy {
				simd.Copy(dst, src)
				continue
			}
			if x.fused && out.in != nil && out.blocks {
				// The input's blocks are apart: reduce block by block.
				uoff, base := c.sc.uoff, off[x.dlo]
				for j := int(x.dlo); j < int(x.dlo)+n; j++ {
					lo, hi := off[j]-base, off[j+1]-base
					in := span(out.in, a.esz, uoff[j], uoff[j]+hi-lo)
					if x.op == xReduce || commutes {
						a.red.reduce3(span(dst, a.esz, lo, hi), in, span(src, a.esz, lo, hi))
					} else {
						a.red.reduce3(span(dst, a.esz, lo, hi), span(src, a.esz, lo, hi), in)
					}
				}
				continue
			}
			inPlace := x.obuf == x.dbuf && x.olo == x.dlo
			own := dst
			if x.fused && out.in != nil {
				own = span(out.in, a.esz, out.base+off[x.olo], out.base+off[int(x.olo)+n])
				inPlace = false
			} else if !inPlace {
				own = c.schedSpan(esz, s, h, off, xoff, c.rank, x.obuf, int(x.olo), int(x.olo)+n)
			}
			switch {
			case x.op == xReduce || commutes:
				// A commutative operator gives the same bits in either
				// order (IEEE addition and multiplication commute).
				switch {
				case inPlace:
					a.red.reduce(dst, src)
				case out.probe && x.fused && len(dst) >= pipelineBytes/8:
					a.red.reduce3Stream(dst, own, src, c.adv.probeRead(src))
				default:
					a.red.reduce3(dst, own, src)
				}
			default:
				// In place own is dst, which reduce3 allows as its right
				// operand.
				a.red.reduce3(dst, src, own)
			}
		}
	}
	c.post(e, s.nrounds+1)
	c.last.add(rs.stats)
	if rs.fully {
		c.full = true
	}
	return nil
}

// copyDirect copies positions [lo, hi) of a natural layout, src, to the
// user's buffer (elements of esz bytes).
func (c *Comm) copyDirect(esz int, out schedOut, off []int, src []byte, lo, hi int) {
	if !out.blocks {
		simd.Copy(span(out.buf, esz, out.base+off[lo], out.base+off[hi]), src)
		return
	}
	uoff := c.sc.uoff
	for j := lo; j < hi; j++ {
		n := off[j+1] - off[j]
		simd.Copy(span(out.buf, esz, uoff[j], uoff[j]+n), span(src, esz, off[j]-off[lo], off[j]-off[lo]+n))
	}
}

// copyResult copies the positions of the rank's result that were not
// written directly from its slot half h to the user's buffer; skip, if
// not negative, is a block not to copy (the rank's own).
func (c *Comm) copyResult(esz int, s *schedule, h []byte, off []int, xoff int, out schedOut, skip int) {
	rs := &s.ranks[c.rank]
	for _, rg := range rs.slotOut {
		lo, hi := int(rg[0]), int(rg[1])
		if lo <= skip && skip < hi {
			c.copyDirect(esz, out, off, c.schedSpan(esz, s, h, off, xoff, c.rank, rs.out, lo, skip), lo, skip)
			lo = skip + 1
		}
		c.copyDirect(esz, out, off, c.schedSpan(esz, s, h, off, xoff, c.rank, rs.out, lo, hi), lo, hi)
	}
}

// onSchedule returns the impl that runs coll's driver on alg's schedule:
// schedAllgather, schedReduceScatter, schedBcast (the schedule of the
// call's root), or schedVector for allreduce.
func onSchedule(alg Algorithm, coll Collective) impl {
	return func(c *Comm, ctx context.Context, a *call) error {
		switch coll {
		case CollAllgather:
			return c.schedAllgather(ctx, a, c.sched(schedKey{alg: alg, coll: coll}))
		case CollReduceScatter:
			return c.schedReduceScatter(ctx, a, c.sched(schedKey{alg: alg, coll: coll}))
		case CollBcast:
			return c.schedBcast(ctx, a, c.sched(schedKey{alg: alg, coll: coll, root: a.root}))
		}
		s := c.sched(schedKey{alg: alg, coll: coll})
		return c.schedVector(ctx, a, c.half/a.esz, func(int) *schedule { return s })
	}
}

// The drivers of the block collectives on a schedule whose positions are
// the p blocks of a segment in rank order (ring, BDE, MST; Bruck rotated):
// segment k holds piece k of every block (see segment.go).

// schedReduceScatter: every rank copies into W the pieces that are read
// before it reduces into them (the fused reductions read the others from
// send); the schedule leaves the reduced block r in W at rank r.
func (c *Comm) schedReduceScatter(ctx context.Context, a *call, s *schedule) error {
	esz := a.esz
	return c.blockSteps(ctx, a, c.half/esz, func(e uint64, k, S int) error {
		pre, uoff := c.sc.pre, c.sc.uoff
		h := c.slotHalf(c.rank, e)
		for _, rg := range s.ranks[c.rank].slotIn {
			for j := int(rg[0]); j < int(rg[1]); j++ {
				simd.Copy(span(h, esz, pre[j], pre[j+1]), span(a.send, esz, uoff[j], uoff[j]+pre[j+1]-pre[j]))
			}
		}
		c.post(e, 1)
		if err := c.runSchedule(ctx, a, s, e, pre, 0, schedOut{in: a.send, blocks: true}); err != nil {
			return err
		}
		r := c.rank
		lo := pieceLo(k, S, a.counts[r])
		simd.Copy(span(a.recv, esz, lo, lo+pre[r+1]-pre[r]), span(h, esz, pre[r], pre[r+1]))
		return nil
	})
}

// schedAllgather: every rank copies its own piece into W (position 0 if
// the schedule is rotated), the schedule fills in the others.
func (c *Comm) schedAllgather(ctx context.Context, a *call, s *schedule) error {
	esz, p, r := a.esz, c.size, c.rank
	return c.blockSteps(ctx, a, c.half/esz, func(e uint64, _, _ int) error {
		pre, uoff := c.sc.pre, c.sc.uoff
		h := c.slotHalf(r, e)
		out := schedOut{buf: a.recv, blocks: true}
		if s.rotated { // R[0] is the rank's own block; the others go out at the end
			c.copyIn(esz, h, a.recv, 0, 1)
			out = schedOut{}
		} else {
			simd.Copy(span(h, esz, pre[r], pre[r+1]), span(a.recv, esz, uoff[r], uoff[r]+pre[r+1]-pre[r]))
		}
		c.post(e, 1)
		if err := c.runSchedule(ctx, a, s, e, pre, 0, out); err != nil {
			return err
		}
		if s.rotated {
			c.copyOut(esz, a.recv, h, 1, p)
		} else {
			c.copyResult(esz, s, h, pre, 0, out, r)
		}
		return nil
	})
}

// schedBcast: the root copies its segment into W, the schedule (on npos
// nearly equal positions) copies it to every rank's W.
func (c *Comm) schedBcast(ctx context.Context, a *call, s *schedule) error {
	esz := a.esz
	return c.vectorSteps(ctx, a.count, c.half/esz, func(e uint64, base, m int) error {
		h := c.slotHalf(c.rank, e)
		seg := span(a.recv, esz, base, base+m)
		if c.rank == a.root {
			simd.Copy(h, seg)
		}
		c.post(e, 1)
		off := c.sc.pre[:s.npos+1]
		evenSplit(off, s.npos, m)
		var out schedOut
		if c.rank != a.root {
			out = schedOut{buf: a.recv, base: base}
		}
		if err := c.runSchedule(ctx, a, s, e, off, 0, out); err != nil {
			return err
		}
		if out.buf != nil {
			c.copyResult(a.esz, s, h, off, 0, out, -1)
		}
		return nil
	})
}
