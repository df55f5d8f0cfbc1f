package collectives

import (
	"context"
	"math"
	"sync"

	"github.com/shmcoll/shmcoll/circulant"
	"github.com/shmcoll/shmcoll/simd"
)

// The n-block algorithms of Träff (004) on the circulant graph of p ranks,
// skips 1 = skip[0] < ... < skip[q] = p, q = ceil(log2 p):
//
//   - bcast (Algorithm 1, with the virtual rounds): the segment is cut into
//     n blocks that move in n-1+q rounds; in round i a rank copies block
//     recv[k]+offset from rank r - skip[k] (circulant.Table.AllgathervRecv
//     with the bcast root as the only root).
//   - reduce: the broadcast backwards, every transfer reversed: in round i
//     a rank reduces the partial result of a block from the rank it sent
//     that block to in broadcast round n-2+q-i; every non-root makes each
//     partial block available exactly once, after all its contributions
//     arrived. Local accumulator on the left; needs a commutative operator.
//   - allgather(v) (Algorithm 7): p simultaneous broadcasts, every rank a
//     root of its own piece cut into n blocks; a rank reads in each round
//     one block of every root from the same peer. Roots that contribute
//     nothing are skipped, so the degenerate case (one rank contributes
//     everything) costs what a bcast of the same size costs.
//   - reduce-scatter (regular and irregular): p simultaneous reductions,
//     rank j the root of block j of the vector; commutative operators.
//   - allreduce: the reduce-scatter of the vector cut into p nearly equal
//     parts, then the allgatherv of the parts: 2(n-1+q) rounds (n-1+q per
//     phase, n from the cost model for each). The reduce to a root
//     followed by the bcast takes as many rounds from the same schedules,
//     but each rank moves the whole vector in each phase instead of
//     (p-1)/p of it, and the reduction work is not spread.
//
// Data layout: a rank's slot half holds the segment packed by block (for
// bcast and reduce the segment itself; for allgatherv and reduce-scatter
// root j's piece at c.sc.pre[j]), and block b of a piece of L elements is
// elements [b*L/n, (b+1)*L/n) of it, at the same offset in every rank's
// half, so a block read from a peer lands at the same place. There is no
// packing: the concatenation of Algorithm 7 is the slot itself.
//
// Phases: a rank posts phase 1 when it begins the step (the root of a
// bcast posts the last phase at once: its whole segment is in its half),
// and phase i+1 before round i in which it exposes a block, after rounds
// 0..i-1 are done; in round i a rank waits for its peer's phase i+1. The schedules guarantee
// that what a peer exposes in round i it received (bcast, allgatherv) or
// completed (reduce, reduce-scatter) in an earlier round.
//
// Slot reuse within a step (structure): in bcast and allgatherv every
// block of a rank's half is written once (its single receipt, or the
// copy-in) and never again. In reduce and reduce-scatter a block of a
// rank's half is written only by its copy-in and by reductions before the
// round in which it is exposed, and is never written after it (each
// partial block is exposed exactly once, after all contributions). Across
// steps see step.go.
//
// Number of blocks: the pipelining lemma on the linear cost model of n-1+q
// rounds (costModel.blocks, nblocks).

func init() {
	register(CollBcast, Nblock, (*Comm).nblockBcast, true)
	register(CollReduce, Nblock, (*Comm).nblockReduce, false)
	register(CollAllgather, Nblock, (*Comm).nblockAllgatherv, true)
	register(CollAllgatherv, Nblock, (*Comm).nblockAllgatherv, true)
	register(CollReduceScatterBlock, Nblock, (*Comm).nblockReduceScatter, false)
	register(CollReduceScatter, Nblock, (*Comm).nblockReduceScatter, false)
	register(CollAllreduce, Nblock, (*Comm).nblockAllreduce, false)
}

// costModel is the linear cost model of the papers for this machine's
// shared memory: a round (a phase hand-off between two ranks: one cache
// line changing owner, and the poll that sees it) costs alpha ns, a byte
// copied from a peer's slot beta ns, a byte reduced from it gamma ns more
// (the model's units).
type costModel struct {
	alpha, beta, gamma float64
}

// machineCost is the model of the two-core machine shmcoll is built on,
// its constants measured by BenchmarkCostModel (nblock_bench_test.go).
// alpha is the hand-off of ranks that outnumber the cores, which needs the
// scheduler: the machine's usual case (CI, np = 8), where few blocks are
// best (BenchmarkNblockBlocks). Every rank must use the same values: the
// block count is not part of the call descriptor.
var machineCost = costModel{alpha: 20000, beta: 0.03, gamma: 0.03}

// fitCost is the model for the n-block reduce of one segment when every
// rank has a CPU of its own: a hand-off is one cache line changing owner,
// and a rank's copy of an input block into its slot (expose) overlaps its
// reader's reduction of the block before, one pipeline stage more
// (nblocks). The other n-block collectives copy their segment in before
// the rounds, and the steps of a reduce of several segments overlap each
// other instead: more blocks only add rounds there (machineCost).
var fitCost = costModel{alpha: 200, beta: 0.03, gamma: 0.03}

// maxBlocks bounds the number of blocks of an n-block step (a reduce keeps
// one bit per block on the stack).
const maxBlocks = 1024

// blocks returns the number of blocks n of a pipeline that takes
// (lead + n)(alpha + perByte*bytes/n) — lead rounds of latency besides one
// round per block — with 1 <= n <= min(maxBlocks, elems): the pipelining
// lemma's n = sqrt(lead*perByte*bytes/alpha), rounded.
func (m costModel) blocks(lead float64, bytes, elems int, perByte float64) int {
	if testBlocks > 0 {
		return max(1, min(testBlocks, maxBlocks, elems))
	}
	if lead <= 0 || elems <= 1 {
		return 1
	}
	n := int(math.Round(math.Sqrt(lead * perByte * float64(bytes) / m.alpha)))
	return max(1, min(n, maxBlocks, elems))
}

// nblocks is the block count of an n-block collective of bytes (elems
// elements in the widest piece) with a schedule of q rounds of latency:
// n-1+q rounds of copies, or of reductions if reduce. exposes: each block
// is copied into the slot just before its first round and nothing else
// overlaps the copy (fitCost where the ranks are not oversubscribed).
// Every rank computes the same count.
func (c *Comm) nblocks(q, bytes, elems int, reduce, exposes bool) int {
	m, lead := machineCost, float64(q-1)
	if exposes && !c.ep.Oversubscribed() {
		m, lead = fitCost, lead+1
	}
	w := m.beta
	if reduce {
		w += m.gamma
	}
	return m.blocks(lead, bytes, elems, w)
}

// testBlocks > 0 fixes the number of blocks (tests only).
var testBlocks int

// nblockTables caches the schedules of every rank for each p: they are a
// pure function of p (2pq+p bytes), shared by every communicator of p
// ranks and computed once, in O(p log p).
var nblockTables sync.Map // int -> *circulant.Table

func nblockTable(p int) *circulant.Table {
	if t, ok := nblockTables.Load(p); ok {
		return t.(*circulant.Table)
	}
	s, err := circulant.NewSchedules(p)
	if err != nil {
		panic(err) // p is a communicator's size, far below MaxSchedulesP
	}
	t, _ := nblockTables.LoadOrStore(p, s.NewTable())
	return t.(*circulant.Table)
}

// nbRound is round i of an n-block broadcast on this rank: the round
// within the phase k, the block offset, and the peers.
type nbRound struct {
	k, off, to, from int
}

func nblockRound(s *circulant.Schedules, rank, n, i int) nbRound {
	k, off := s.Round(n, i)
	return nbRound{k: k, off: off, to: s.To(rank, k), from: s.From(rank, k)}
}

// bcastRecv is the block of root's data that rank receives in round rd
// (-1: none), bcastSend the block it exposes to rd.to (-1: none).
func bcastRecv(t *circulant.Table, rank, root, n int, rd nbRound) int {
	if rank == root {
		return -1
	}
	p := t.Schedules().P()
	return circulant.CapBlock(t.Recv((rank-root+p)%p, rd.k)+rd.off, n)
}

func bcastSend(t *circulant.Table, rank, root, n int, rd nbRound) int {
	if rd.to == root {
		return -1
	}
	p := t.Schedules().P()
	return circulant.CapBlock(t.Send((rank-root+p)%p, rd.k)+rd.off, n)
}

// blockSpan is block b of n of a piece of L elements at element offset
// base: [lo, hi).
func blockSpan(base, L, n, b int) (lo, hi int) {
	return base + pieceLo(b, n, L), base + pieceLo(b+1, n, L)
}

func (c *Comm) nblockBcast(ctx context.Context, a *call) error {
	esz, p, N := a.esz, c.size, a.count
	t := nblockTable(p)
	s := t.Schedules()
	M := c.half / esz
	for base := 0; base == 0 || base < N; base += M {
		m := min(M, N-base)
		n := c.nblocks(s.Q(), m*esz, m, false, false)
		R := s.NumRounds(n)
		e, err := c.begin(ctx)
		if err != nil {
			return err
		}
		seg := span(a.recv, esz, base, base+m)
		h := c.slotHalf(c.rank, e)
		if c.rank == a.root {
			simd.Copy(h, seg)
			c.post(e, R+1) // every block is there
		} else {
			c.post(e, 1)
		}
		for i := range R {
			rd := nblockRound(s, c.rank, n, i)
			if b := bcastSend(t, c.rank, a.root, n, rd); b >= 0 {
				c.last.Sent++
				if i > 0 && c.rank != a.root {
					c.post(e, i+1)
				}
			}
			b := bcastRecv(t, c.rank, a.root, n, rd)
			if b < 0 {
				continue
			}
			if err := c.wait(ctx, rd.from, e, i+1); err != nil {
				return err
			}
			lo, hi := blockSpan(0, m, n, b)
			src := span(c.slotHalf(rd.from, e), esz, lo, hi)
			simd.Copy(span(h, esz, lo, hi), src)
			simd.Copy(span(seg, esz, lo, hi), src)
			c.last.add(Stats{Rounds: 1, Received: 1})
		}
		c.end(e)
	}
	return nil
}

// blockSet is one bit per block of a step (n <= maxBlocks), on the stack.
type blockSet [maxBlocks / 64]uint64

func (s *blockSet) has(b int) bool { return s[b>>6]&(1<<(b&63)) != 0 }
func (s *blockSet) add(b int)      { s[b>>6] |= 1 << (b & 63) }

func (c *Comm) nblockReduce(ctx context.Context, a *call) error {
	esz, p, N := a.esz, c.size, a.count
	t := nblockTable(p)
	s := t.Schedules()
	in := a.input()
	M := c.half / esz
	isRoot := c.rank == a.root
	for base := 0; base == 0 || base < N; base += M {
		m := min(M, N-base)
		n := c.nblocks(s.Q(), m*esz, m, true, N <= M)
		R := s.NumRounds(n)
		e, err := c.begin(ctx)
		if err != nil {
			return err
		}
		x := span(in, esz, base, base+m)
		// acc holds this rank's partial results: the root's are the
		// result, nobody reads them.
		acc := c.slotHalf(c.rank, e)[:m*esz]
		if isRoot {
			acc = span(a.recv, esz, base, base+m)
		}
		var ready blockSet // blocks of acc that hold a partial result
		block := func(buf []byte, b int) []byte {
			lo, hi := blockSpan(0, m, n, b)
			return span(buf, esz, lo, hi)
		}
		// expose makes block b of acc final before the phase that lets
		// its reader in: a block nothing was reduced into is the input.
		expose := func(b int) {
			if !ready.has(b) {
				simd.Copy(block(acc, b), block(x, b))
				ready.add(b)
			}
			c.last.Sent++
		}
		// Reduce round i is broadcast round R-1-i reversed: send what the
		// broadcast received, receive what it sent.
		if R > 0 {
			if b := bcastRecv(t, c.rank, a.root, n, nblockRound(s, c.rank, n, R-1)); b >= 0 {
				expose(b)
			}
		}
		c.post(e, 1)
		for i := range R {
			rd := nblockRound(s, c.rank, n, R-1-i)
			if b := bcastSend(t, c.rank, a.root, n, rd); b >= 0 {
				if err := c.wait(ctx, rd.to, e, i+1); err != nil {
					return err
				}
				peer := block(c.slotHalf(rd.to, e), b)
				if ready.has(b) {
					a.red.reduce(block(acc, b), peer)
				} else {
					a.red.reduce3(block(acc, b), block(x, b), peer)
					ready.add(b)
				}
				c.last.add(Stats{Rounds: 1, Received: 1, Reduced: 1})
			}
			if i+1 < R {
				if b := bcastRecv(t, c.rank, a.root, n, nblockRound(s, c.rank, n, R-2-i)); b >= 0 {
					expose(b)
					c.post(e, i+2)
				}
			}
		}
		if isRoot {
			for b := range n {
				if !ready.has(b) {
					simd.Copy(block(acc, b), block(x, b))
				}
			}
			c.full = true
		}
		c.end(e)
	}
	return nil
}

// nblockAllgatherv is Algorithm 7: p simultaneous broadcasts in
// n-1+q rounds, every rank the root of its own piece.
func (c *Comm) nblockAllgatherv(ctx context.Context, a *call) error {
	esz, p := a.esz, c.size
	t := nblockTable(p)
	s := t.Schedules()
	S, err := numPieces(a.counts, c.half/esz)
	if err != nil {
		return c.fail(err)
	}
	for seg := range S {
		c.pieces(seg, S, a.counts, a.displs)
		pre, uoff := c.sc.pre, c.sc.uoff
		widest, others := 0, 0
		for j := range p {
			L := pre[j+1] - pre[j]
			widest = max(widest, L)
			if j != c.rank && L > 0 {
				others++
			}
		}
		n := c.nblocks(s.Q(), pre[p]*esz, widest, false, false)
		R := s.NumRounds(n)
		e, err := c.begin(ctx)
		if err != nil {
			return err
		}
		h := c.slotHalf(c.rank, e)
		simd.Copy(span(h, esz, pre[c.rank], pre[c.rank+1]), span(a.recv, esz, uoff[c.rank], uoff[c.rank]+pre[c.rank+1]-pre[c.rank]))
		c.post(e, 1)
		for i := range R {
			rd := nblockRound(s, c.rank, n, i)
			sends := 0
			for j := range p {
				if pre[j+1] > pre[j] && bcastSend(t, c.rank, j, n, rd) >= 0 {
					sends++
				}
			}
			if sends > 0 && i > 0 {
				c.post(e, i+1)
			}
			c.last.Sent += uint64(sends)
			waited := false
			for j := range p {
				L := pre[j+1] - pre[j]
				if L == 0 {
					continue
				}
				b := bcastRecv(t, c.rank, j, n, rd)
				if b < 0 {
					continue
				}
				if !waited {
					if err := c.wait(ctx, rd.from, e, i+1); err != nil {
						return err
					}
					waited = true
					c.last.Rounds++
				}
				lo, hi := blockSpan(pre[j], L, n, b)
				src := span(c.slotHalf(rd.from, e), esz, lo, hi)
				simd.Copy(span(h, esz, lo, hi), src)
				u := uoff[j] + lo - pre[j]
				simd.Copy(span(a.recv, esz, u, u+hi-lo), src)
				c.last.Received++
			}
		}
		// Every root with data in the segment reached this rank, so every
		// rank began the step unless one had nothing to send.
		c.full = others == p-1
		c.end(e)
	}
	return nil
}

// nblockReduceScatter runs round i as the allgatherv's round R-1-i with
// every transfer reversed: a rank copies the blocks of the others into its
// half, reduces into them what it receives, and exposes each partial block
// once, when complete; its own block is reduced into recv.
func (c *Comm) nblockReduceScatter(ctx context.Context, a *call) error {
	esz, p := a.esz, c.size
	t := nblockTable(p)
	s := t.Schedules()
	S, err := numPieces(a.counts, c.half/esz)
	if err != nil {
		return c.fail(err)
	}
	me := c.rank
	for seg := range S {
		c.pieces(seg, S, a.counts, a.displs)
		pre, uoff := c.sc.pre, c.sc.uoff
		widest := 0
		for j := range p {
			widest = max(widest, pre[j+1]-pre[j])
		}
		n := c.nblocks(s.Q(), pre[p]*esz, widest, true, false)
		R := s.NumRounds(n)
		e, err := c.begin(ctx)
		if err != nil {
			return err
		}
		h := c.slotHalf(me, e)
		// The copy-in: every block but this rank's own, which is reduced
		// into recv (in place, recv is that block of the input).
		c.copyPieces(h, a.send, esz, me)
		L := pre[me+1] - pre[me]
		lo := pieceLo(seg, S, a.counts[me])
		out := span(a.recv, esz, lo, lo+L)
		simd.Copy(out, span(a.send, esz, uoff[me], uoff[me]+L))
		c.post(e, 1)
		for i := range R {
			rd := nblockRound(s, me, n, R-1-i) // reversed: read from rd.to
			sends := 0
			for j := range p {
				if pre[j+1] > pre[j] && bcastRecv(t, me, j, n, rd) >= 0 {
					sends++
				}
			}
			if sends > 0 && i > 0 {
				c.post(e, i+1)
			}
			c.last.Sent += uint64(sends)
			waited := false
			for j := range p {
				Lj := pre[j+1] - pre[j]
				if Lj == 0 {
					continue
				}
				b := bcastSend(t, me, j, n, rd)
				if b < 0 {
					continue
				}
				if !waited {
					if err := c.wait(ctx, rd.to, e, i+1); err != nil {
						return err
					}
					waited = true
					c.last.Rounds++
				}
				blo, bhi := blockSpan(pre[j], Lj, n, b)
				src := span(c.slotHalf(rd.to, e), esz, blo, bhi)
				if j == me {
					a.red.reduce(span(out, esz, blo-pre[j], bhi-pre[j]), src)
				} else {
					a.red.reduce(span(h, esz, blo, bhi), src)
				}
				c.last.add(Stats{Received: 1, Reduced: 1})
			}
		}
		// This rank's block gathered every rank's contribution.
		c.full = L > 0
		c.end(e)
	}
	return nil
}

// nblockAllreduce is the reduce-scatter of rank j's part, elements
// [j*N/p, (j+1)*N/p), into recv, then the allgatherv of the parts in recv,
// each over all segments (2S steps). In place the reduce-scatter reduces
// the rank's part where it is, which nobody else reads from recv.
func (c *Comm) nblockAllreduce(ctx context.Context, a *call) error {
	esz, p, N := a.esz, c.size, a.count
	a.counts, a.displs = c.sc.counts, c.sc.displs
	for j := range p {
		a.displs[j] = pieceLo(j, p, N)
		a.counts[j] = pieceLo(j+1, p, N) - a.displs[j]
	}
	recv, me := a.recv, a.displs[c.rank]
	a.send, a.recv = a.input(), span(recv, esz, me, me+a.counts[c.rank])
	if err := c.nblockReduceScatter(ctx, a); err != nil {
		return err
	}
	a.send, a.recv = nil, recv
	return c.nblockAllgatherv(ctx, a)
}
