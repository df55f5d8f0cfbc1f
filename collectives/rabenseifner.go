package collectives

import (
	"context"
	"math/bits"
	"slices"

	"github.com/shmcoll/shmcoll/simd"
)

// Rabenseifner's reduction algorithms (001), on read schedules (see
// schedule.go).
//
// The butterfly. p' = 2^L ranks, L = floor(log2 p), cut the segment into
// p' positions. Level l pairs adjacent members of each group: the left
// member keeps the lower half of the group's range and reduces the right
// member's lower half into it (own op peer), the right member keeps the
// upper half (peer op own); the left members form one group of the next
// level, the right members another. So the ranges are halved (recursive
// halving, the reduce-scatter) while the distance doubles, every partial
// result is the reduction of a contiguous range of ranks in rank order,
// and the algorithm is correct for non-commutative operators. The
// allgather runs the levels in reverse and copies the partner's half
// (recursive doubling). Levels whose range is smaller than
// rabHalvingMinBytes exchange the whole range instead of halving it (the
// latency-optimized full-buffer exchange, into the other buffer X; the
// mixed protocol of the paper: "R R A | N G G"); RecDoubling exchanges
// whole vectors at every level.
//
// Non-power-of-two p. Rabenseifner (3-to-2): a group of odd size ends in a
// triple (x, y, w): y and w exchange halves, y keeping the upper and w the
// lower one (one round), then x reduces w's lower half into its own and y
// reduces x's upper half into its own (a second round, which overlaps the
// next level of the other members: every member goes on as soon as its
// pair or triple is done, and x is the end member of the triple that is
// ready last); x and y go on, w is eliminated and reads its result from a
// surviving keeper in one last round. Allreduce: 2 ceil(log2 p) rounds
// (ceil(log2 p) + 1 for RecDoubling), as in the paper; a surviving rank
// receives less than 3 and reduces at most 1.5 vectors. Rabenseifner21
// (2-to-1): before the butterfly ranks 2i+1 < 2(p-p') hand their whole
// vector to rank 2i, which reduces it (own op peer) and goes on alone; the
// eliminated ranks read the result at the end.
//
// At p = 2 the allreduce and the reduce-scatter run the pair loop
// instead (pair.go): the same operands in the same order, in one loop of
// chunks.
//
// Reduce-scatter: the butterfly without the allgather; position i holds
// the blocks of the survivor that ends with it and of the ranks it keeps,
// and every eliminated rank reads its position from its keeper. Reduce:
// the reduce-scatter and then the allgather levels only on the path of
// the root (a binomial gather), and one more read if the root was
// eliminated.
//
// Slot reuse: the halving levels write only the kept half, which no peer
// reads in that round and none read before (structure); an allgather
// level writes the half its partner read in the same level of the
// reduce-scatter, and it waits for that partner's later phase
// (structure); whole-range exchanges write the other buffer, and the
// triples write ranges read in the triple's rounds: they wait for those
// earlier readers where the waits do not imply it (acknowledgements the
// schedule builder adds).

func init() {
	for _, alg := range []Algorithm{Rabenseifner, Rabenseifner21} {
		register(CollAllreduce, alg, (*Comm).rabAllreduce, true)
		register(CollReduce, alg, (*Comm).rabAllreduce, true)
		register(CollReduceScatterBlock, alg, (*Comm).rabReduceScatter, true)
		register(CollReduceScatter, alg, (*Comm).rabReduceScatter, true)
	}
	register(CollAllreduce, RecDoubling, (*Comm).rabAllreduce, true)
	register(CollReduce, RecDoubling, (*Comm).rabAllreduce, true)
}

// rabHalvingMinBytes: a butterfly level halves its range if the range has
// at least this many bytes, and exchanges it whole otherwise.
var rabHalvingMinBytes = 8192

func floorLog2(p int) int { return bits.Len(uint(p)) - 1 }

// rabMember is a member of a butterfly group: its rank, the range of
// positions it holds and the buffer that holds them.
type rabMember struct {
	rank, lo, hi int
	buf          uint8
}

// rabUnit is a pair or a triple of one level: a keeps [lo, mid), b keeps
// [mid, hi).
type rabUnit struct{ a, b, lo, mid, hi int }

// rabExchange adds the reads of round t in which the adjacent members
// x < y of a group exchange: halving, x keeps the lower half and y the
// upper half of their range; whole, both reduce the whole range into their
// other buffer.
func rabExchange(b *schedBuilder, t int, x, y *rabMember, halving bool) {
	lo, hi := x.lo, x.hi
	if halving {
		mid := (lo + hi) / 2
		b.readAt(t, x.rank, y.rank, y.buf, lo, mid, x.buf, lo, x.buf, lo, xReduce)
		b.readAt(t, y.rank, x.rank, x.buf, mid, hi, y.buf, mid, y.buf, mid, xReduceRev)
		x.hi, y.lo = mid, mid
		return
	}
	b.readAt(t, x.rank, y.rank, y.buf, lo, hi, x.buf, lo, otherBuf(x.buf), lo, xReduce)
	b.readAt(t, y.rank, x.rank, x.buf, lo, hi, y.buf, lo, otherBuf(y.buf), lo, xReduceRev)
	x.buf, y.buf = otherBuf(x.buf), otherBuf(y.buf)
}

// rabTriple adds the reads of the triple m0 < m1 < m2 of adjacent members
// (see above); x is the end member that is ready last (the middle one
// cannot be: its operand must stay between the others'). It returns x
// (the lower half's member), y (the upper's) and w's rank (eliminated).
// avail[r] is the first round in which member r's state may be read.
func rabTriple(b *schedBuilder, avail []int, m0, m1, m2 *rabMember, halving bool) (rabMember, rabMember, int) {
	x, y, w := m0, m1, m2
	xop, yop := xReduce, xReduceRev // x left of y and w
	if avail[m2.rank] >= avail[m0.rank] {
		x, y, w = m2, m0, m1
		xop, yop = xReduceRev, xReduce
	}
	lo, hi := x.lo, x.hi
	mid := (lo + hi) / 2
	t1 := max(avail[y.rank], avail[w.rank])
	t2 := max(t1+1, avail[x.rank])
	if halving {
		b.readAt(t1, y.rank, w.rank, w.buf, mid, hi, y.buf, mid, y.buf, mid, xReduce)
		b.readAt(t1, w.rank, y.rank, y.buf, lo, mid, w.buf, lo, w.buf, lo, xReduceRev)
		b.readAt(t2, x.rank, w.rank, w.buf, lo, mid, x.buf, lo, x.buf, lo, xop)
		b.readAt(t2, y.rank, x.rank, x.buf, mid, hi, y.buf, mid, y.buf, mid, yop)
		x.hi, y.lo = mid, mid
	} else {
		b.readAt(t1, y.rank, w.rank, w.buf, lo, hi, y.buf, lo, otherBuf(y.buf), lo, xReduce)
		b.readAt(t1, w.rank, y.rank, y.buf, lo, hi, w.buf, lo, otherBuf(w.buf), lo, xReduceRev)
		y.buf, w.buf = otherBuf(y.buf), otherBuf(w.buf)
		b.readAt(t2, x.rank, w.rank, w.buf, lo, hi, x.buf, lo, otherBuf(x.buf), lo, xop)
		b.readAt(t2, y.rank, x.rank, x.buf, lo, hi, y.buf, lo, otherBuf(y.buf), lo, yop)
		x.buf, y.buf = otherBuf(x.buf), otherBuf(y.buf)
	}
	avail[x.rank], avail[y.rank] = t2+1, t2+1
	return *x, *y, w.rank
}

// rabButterfly adds the reduce-scatter levels of the butterfly on groups
// of adjacent members: L levels, the first h halving; a group of odd size
// ends in a triple, whose eliminated member's keeper it records in keeper.
// Each member goes on as soon as its unit is done. It returns the groups
// before each level and after the last (levels[0..L]) and the units of
// each level by group (units[l][group]).
func rabButterfly(b *schedBuilder, groups [][]rabMember, L, h int, keeper []int) ([][][]rabMember, [][][]rabUnit) {
	avail := slices.Repeat([]int{b.t}, b.s.p)
	levels := [][][]rabMember{groups}
	units := make([][][]rabUnit, L)
	for l := range L {
		halving := l < h
		var next [][]rabMember
		for _, g := range groups {
			n := len(g)
			npair := n / 2
			if n%2 == 1 {
				npair = (n - 3) / 2
			}
			var gu []rabUnit
			var lower, upper []rabMember
			lo, hi := g[0].lo, g[0].hi
			for i := range npair {
				x, y := &g[2*i], &g[2*i+1]
				t := max(avail[x.rank], avail[y.rank])
				rabExchange(b, t, x, y, halving)
				avail[x.rank], avail[y.rank] = t+1, t+1
				gu = append(gu, rabUnit{a: x.rank, b: y.rank, lo: lo, mid: (lo + hi) / 2, hi: hi})
				lower, upper = append(lower, *x), append(upper, *y)
			}
			if n%2 == 1 {
				x, y, w := rabTriple(b, avail, &g[n-3], &g[n-2], &g[n-1], halving)
				keeper[w] = x.rank
				gu = append(gu, rabUnit{a: x.rank, b: y.rank, lo: lo, mid: (lo + hi) / 2, hi: hi})
				lower, upper = append(lower, x), append(upper, y)
			}
			units[l] = append(units[l], gu)
			next = append(next, lower, upper)
		}
		groups = next
		levels = append(levels, groups)
	}
	for end := slices.Max(avail); b.t < end; {
		b.endRound()
	}
	return levels, units
}

// rabAllgather adds the butterfly's allgather: the levels of units in
// reverse, the members of each unit copying the half they gave away from
// their partner; buf[r] is the buffer that holds rank r's range.
func rabAllgather(b *schedBuilder, units [][][]rabUnit, buf []uint8) {
	for l := len(units) - 1; l >= 0; l-- {
		for _, gu := range units[l] {
			for _, u := range gu {
				b.read(u.a, u.b, buf[u.b], u.mid, u.hi, bufW, 0, buf[u.a], u.mid, xCopy)
				b.read(u.b, u.a, buf[u.a], u.lo, u.mid, bufW, 0, buf[u.b], u.lo, xCopy)
			}
		}
		b.endRound()
	}
}

// rabGather adds a reduce's binomial gather on the butterfly's groups:
// the collector of a group, that of the subgroup holding target if any,
// else of the lower one, copies the other half from the other subgroup's
// collector, in the levels below h. It returns the collector of the whole
// range.
func rabGather(b *schedBuilder, levels [][][]rabMember, units [][][]rabUnit, h int, buf []uint8, target int) int {
	var coll []int // the collectors of the groups of the level below
	for _, g := range levels[len(units)] {
		coll = append(coll, g[0].rank)
	}
	for l := len(units) - 1; l >= 0; l-- {
		var up []int
		for i, gu := range units[l] {
			x, y, u := coll[2*i], coll[2*i+1], gu[0]
			c, o, lo, hi := x, y, u.mid, u.hi
			if y == target {
				c, o, lo, hi = y, x, u.lo, u.mid
			}
			up = append(up, c)
			if l < h {
				b.read(c, o, buf[o], lo, hi, bufW, 0, buf[c], lo, xCopy)
			}
		}
		if l < h {
			b.endRound()
		}
		coll = up
	}
	return coll[0]
}

// rabSchedule builds the schedule for p ranks: 2-to-1 elimination if
// elim21, else 3-to-2; the first h levels halve, the others exchange whole
// ranges (h = L for a reduce-scatter).
func rabSchedule(p int, elim21 bool, h int, kind Collective, root int) *schedule {
	L := floorLog2(p)
	P := 1 << L
	b := newSchedBuilder(p, P, false)
	keeper := slices.Repeat([]int{-1}, p)
	z := 0 // ranks 2i+1 < 2z hand their vector to rank 2i (2-to-1)
	if elim21 {
		z = p - P
	}
	for i := range z {
		b.read(2*i, 2*i+1, bufW, 0, P, bufW, 0, bufW, 0, xReduce)
		keeper[2*i+1] = 2 * i
	}
	if z > 0 {
		b.endRound()
	}
	var members []rabMember
	for r := range p {
		if keeper[r] < 0 {
			members = append(members, rabMember{rank: r, hi: P})
		}
	}
	levels, units := rabButterfly(b, [][]rabMember{members}, L, h, keeper)
	b.s.eliminated = make([]bool, p)
	for r, k := range keeper {
		b.s.eliminated[r] = k >= 0
	}
	buf := make([]uint8, p) // the buffer of each rank's result
	pos := make([]int, p)
	for _, g := range levels[L] {
		buf[g[0].rank], pos[g[0].rank] = g[0].buf, g[0].lo
	}
	final := func(e int) int {
		k := keeper[e]
		for keeper[k] >= 0 {
			k = keeper[k]
		}
		return k
	}
	// An eliminated rank reads its result (allreduce), its position
	// (reduce-scatter) or the root's (reduce) from its final keeper.
	last := false
	switch kind {
	case CollAllreduce:
		rabAllgather(b, units[:h], buf)
		for e := range p {
			if keeper[e] >= 0 {
				k := final(e)
				b.read(e, k, buf[k], 0, P, bufW, 0, bufW, 0, xCopy)
				buf[e], last = bufW, true
			}
		}
	case CollReduce:
		target := root
		if keeper[root] >= 0 {
			target = final(root)
		}
		if c := rabGather(b, levels, units, h, buf, target); root != c {
			b.read(root, c, buf[c], 0, P, bufW, 0, bufW, 0, xCopy)
			buf[root], last = bufW, true
		}
	case CollReduceScatter:
		s := b.s
		s.posBlocks = make([][]int, P)
		for r := range p {
			k := r
			if keeper[r] >= 0 {
				k = final(r)
				b.read(r, k, bufW, pos[k], pos[k]+1, bufW, 0, bufW, pos[k], xCopy)
				last = true
			}
			s.posBlocks[pos[k]] = append(s.posBlocks[pos[k]], r)
		}
		buf = nil
	}
	if last {
		b.endRound()
	}
	return b.done(buf)
}

func (c *Comm) rabAllreduce(ctx context.Context, a *call) error {
	if c.size == 2 && a.coll == CollAllreduce && a.alg != RecDoubling {
		return c.pairAllreduce(ctx, a)
	}
	M := c.half / a.esz / 2
	root := 0 // the schedule of an allreduce has no root
	if a.coll == CollReduce {
		root = a.root
	}
	L := floorLog2(c.size)
	return c.schedVector(ctx, a, M, func(m int) *schedule {
		h := 0 // the leading levels, whose ranges are large enough to halve
		if a.alg == Rabenseifner || a.alg == Rabenseifner21 {
			bytes := m * a.esz
			for h < L && bytes>>h >= rabHalvingMinBytes {
				h++
			}
		}
		return c.sched(schedKey{alg: a.alg, coll: a.coll, root: root, h: h})
	})
}

// schedVector runs an allreduce or reduce on segments of at most M
// elements: the rank's segment is copied into W, the schedule mk(m) runs
// on npos nearly equal positions, and the result is copied from the
// rank's result buffer to recv (if any: reduce has it only at the root).
// Buffer X starts at element M.
func (c *Comm) schedVector(ctx context.Context, a *call, M int, mk func(m int) *schedule) error {
	esz := a.esz
	in := a.input()
	return c.vectorSteps(ctx, a.count, M, func(e uint64, base, m int) error {
		s := mk(m)
		h := c.slotHalf(c.rank, e)
		off := c.sc.pre[:s.npos+1]
		evenSplit(off, s.npos, m)
		// Copy in what is read before the rank reduces into it; the
		// fused reductions read the rest from the input. An allreduce's
		// copy-in stores non-temporally when advised (probeRead), so
		// that peers on another die read it from memory.
		probe := a.coll == CollAllreduce && !c.ep.Oversubscribed()
		nt := probe && m*esz >= pipelineBytes/8 && c.adv.advised()
		for _, rg := range s.ranks[c.rank].slotIn {
			lo, hi := off[rg[0]], off[rg[1]]
			if nt {
				simd.CopyNT(span(h, esz, lo, hi), span(in, esz, base+lo, base+hi))
			} else {
				simd.Copy(span(h, esz, lo, hi), span(in, esz, base+lo, base+hi))
			}
		}
		c.post(e, 1)
		out := schedOut{buf: a.recv, base: base, in: in, probe: probe}
		if err := c.runSchedule(ctx, a, s, e, off, M, out); err != nil {
			return err
		}
		if a.recv != nil {
			c.copyResult(a.esz, s, h, off, M, out, -1)
		}
		return nil
	})
}

func (c *Comm) rabReduceScatter(ctx context.Context, a *call) error {
	if c.size == 2 {
		return c.pairReduceScatter(ctx, a)
	}
	// Every level halves (h; RabenseifnerOdd's schedule does not read it).
	return c.rabScatter(ctx, a, c.sched(schedKey{alg: a.alg, coll: CollReduceScatter, h: floorLog2(c.size)}))
}

// rabScatter runs a reduce-scatter whose positions hold the blocks
// s.posBlocks lists.
func (c *Comm) rabScatter(ctx context.Context, a *call, s *schedule) error {
	esz, p := a.esz, c.size
	capElems := c.half / esz
	if a.red.user != nil && !a.red.comm {
		capElems /= 2 // buffer X is the scratch of peer-op-own reductions
	}
	S, err := numPieces(a.counts, capElems)
	if err != nil {
		return c.fail(err)
	}
	off, boff := c.sc.pre[:s.npos+1], c.sc.uoff
	return c.steps(ctx, S, func(e uint64, k int) error {
		// Position i holds the pieces of the blocks s.posBlocks[i].
		o := 0
		for i, bl := range s.posBlocks {
			off[i] = o
			for _, j := range bl {
				boff[j] = o
				o += pieceLo(k+1, S, a.counts[j]) - pieceLo(k, S, a.counts[j])
			}
		}
		off[s.npos] = o
		h := c.slotHalf(c.rank, e)
		for j := range p {
			lo, hi := pieceLo(k, S, a.counts[j]), pieceLo(k+1, S, a.counts[j])
			simd.Copy(span(h, esz, boff[j], boff[j]+hi-lo), span(a.send, esz, a.displs[j]+lo, a.displs[j]+hi))
		}
		c.post(e, 1)
		if err := c.runSchedule(ctx, a, s, e, off, capElems, schedOut{}); err != nil {
			return err
		}
		lo, hi := pieceLo(k, S, a.counts[c.rank]), pieceLo(k+1, S, a.counts[c.rank])
		simd.Copy(span(a.recv, esz, lo, hi), span(h, esz, boff[c.rank], boff[c.rank]+hi-lo))
		return nil
	})
}

// RabenseifnerOdd: the factorization of 001, p = 2^n q with q odd, on read
// schedules. The ranks form 2^n groups of q adjacent ranks (group g: ranks
// gq .. gq+q-1); the segment is cut into p positions, part k of the
// vector being positions [k 2^n, (k+1) 2^n).
//
//  1. Odd factor, the "ring" of the paper (alltoall and local reduction):
//     in one round, member k of each group reduces part k of the other
//     q-1 members into its own, folding the left neighbours in as left
//     operands and the right ones as right operands, so the part is the
//     group's reduction in rank order.
//  2. Factor 2^n: the butterfly (above) among the members k of the 2^n
//     groups on part k, adjacent groups paired: n rounds.
//  3. Allreduce: the butterfly's allgather (n rounds), then in one round
//     every rank copies the other q-1 parts from its group.
//
// Allreduce 2n+2 rounds, (q-1)/q + 2(2^n-1)/p + (q-1)/q of the vector
// received; reduce-scatter n+1 rounds. Every partial result reduces a
// contiguous range of ranks in rank order: correct for non-commutative
// operators.
//
// Slot reuse: step 1 writes only the rank's own part, which its readers
// of that round do not read (they read their own parts); steps 2 and 3
// write what the butterfly writes, and the last round writes parts whose
// readers of step 1 the rank has heard from since (structure; the
// schedule builder verifies both).

func init() {
	register(CollAllreduce, RabenseifnerOdd, (*Comm).rabAllreduce, true)
	register(CollReduceScatterBlock, RabenseifnerOdd, (*Comm).rabReduceScatter, true)
	register(CollReduceScatter, RabenseifnerOdd, (*Comm).rabReduceScatter, true)
}

func rabOddSchedule(p int, kind Collective) *schedule {
	n := bits.TrailingZeros(uint(p))
	G := 1 << n // groups
	q := p / G  // members per group
	b := newSchedBuilder(p, p, false)
	part := func(k int) (int, int) { return k * G, (k + 1) * G }
	if q > 1 {
		for r := range p {
			g, k := r/q, r%q
			lo, hi := part(k)
			for m := k - 1; m >= 0; m-- {
				b.read(r, g*q+m, bufW, lo, hi, bufW, lo, bufW, lo, xReduceRev)
			}
			for m := k + 1; m < q; m++ {
				b.read(r, g*q+m, bufW, lo, hi, bufW, lo, bufW, lo, xReduce)
			}
		}
		b.endRound()
	}
	// The butterfly on part k among the members k of the groups.
	groups := make([][]rabMember, q)
	for k := range q {
		lo, hi := part(k)
		for g := range G {
			groups[k] = append(groups[k], rabMember{rank: g*q + k, lo: lo, hi: hi})
		}
	}
	levels, units := rabButterfly(b, groups, n, n, nil)
	if kind == CollReduceScatter {
		s := b.s
		s.posBlocks = make([][]int, p)
		for _, g := range levels[n] {
			s.posBlocks[g[0].lo] = []int{g[0].rank}
		}
		return b.done(nil)
	}
	rabAllgather(b, units, make([]uint8, p))
	if q > 1 {
		for r := range p {
			g, k := r/q, r%q
			for m := range q {
				if m != k {
					lo, hi := part(m)
					b.read(r, g*q+m, bufW, lo, hi, bufW, 0, bufW, lo, xCopy)
				}
			}
		}
		b.endRound()
	}
	return b.done(nil)
}
