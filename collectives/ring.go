package collectives

// The ring algorithms of the lecture notes (003), on read schedules (see
// schedule.go). The segment is cut into p blocks (positions,
// in rank order); rank r reads only from its left neighbour r-1.
//
//   - reduce-scatter: in round k (0 <= k < p-1) rank r reduces block
//     (r-k-2) mod p of rank r-1 into its own, which rank r-1 completed in
//     round k-1; after p-1 rounds rank r holds block r reduced over all
//     ranks (in ring order, not rank order: commutative operators only).
//   - allgather: in round k rank r copies block (r-1-k) mod p from rank
//     r-1, p-1 rounds.
//   - allreduce: reduce-scatter, then allgather: 2(p-1) rounds, 2(p-1)
//     blocks received, p-1 reduced.
//   - bcast: an MST scatter of the root's p blocks (mst.go), then the
//     ring allgather: ceil(log2 p) + p-1 rounds.
//
// Slot reuse: a reduce-scatter round writes a block that rank r+1 reads
// only in the next round (structure). An allgather round writes block
// (r-1-k), which rank r+1 read in reduce-scatter round k; that rank has
// finished the round by then, which rank r knows from the chain of
// phases it waited for around the ring (the schedule builder verifies it
// and adds no acknowledgement).

func init() {
	register(CollAllreduce, Ring, onSchedule(Ring, CollAllreduce), false)
	register(CollReduceScatterBlock, Ring, onSchedule(Ring, CollReduceScatter), false)
	register(CollReduceScatter, Ring, onSchedule(Ring, CollReduceScatter), false)
	register(CollAllgather, Ring, onSchedule(Ring, CollAllgather), true)
	register(CollAllgatherv, Ring, onSchedule(Ring, CollAllgather), true)
	register(CollBcast, Ring, onSchedule(Ring, CollBcast), true)
}

func mod(a, p int) int { return ((a % p) + p) % p }

func ringRS(b *schedBuilder, p int) {
	for k := range p - 1 {
		for r := range p {
			blk := mod(r-k-2, p)
			b.read(r, mod(r-1, p), bufW, blk, blk+1, bufW, blk, bufW, blk, xReduce)
		}
		b.endRound()
	}
}

func ringAG(b *schedBuilder, p int) {
	for k := range p - 1 {
		for r := range p {
			blk := mod(r-1-k, p)
			b.read(r, mod(r-1, p), bufW, blk, blk+1, bufW, 0, bufW, blk, xCopy)
		}
		b.endRound()
	}
}

func ringSchedule(p, root int, kind Collective) *schedule {
	b := newSchedBuilder(p, p, false)
	switch kind {
	case CollAllreduce:
		ringRS(b, p)
		ringAG(b, p)
	case CollReduceScatter:
		ringRS(b, p)
	case CollAllgather:
		ringAG(b, p)
	case CollBcast:
		mstAdd(b, mstLevels(p, root), CollScatter)
		ringAG(b, p)
	}
	return b.done(nil)
}
