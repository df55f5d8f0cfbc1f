package collectives

import (
	"context"

	"github.com/shmcoll/shmcoll/simd"
)

// The pair loop: allreduce and reduce-scatter of two ranks, which the
// Rabenseifner family runs at p = 2 (its butterfly has one level and no
// elimination), written as one loop over chunks instead of a schedule.
//
// Allreduce. A segment of at most pairSegBytes is cut into two halves,
// the lower one rank 0's, the upper one rank 1's, and each half into the
// same number K of chunks of about pairChunkBytes. A rank's slot half
// holds the segment in its natural layout: at the peer's half, its copy of
// its own input (the copy-in), and at its own half, its result. In a step
// a rank
//
//  1. copies in the peer's half chunk by chunk, posting phase 1+i after
//     chunk i (non-temporally when the store advice asks for it, as
//     publish does);
//  2. reduces its own half chunk by chunk as soon as the peer has posted
//     that chunk: input op peer's copy on rank 0, peer's copy op input on
//     rank 1, so every element is rank 0's operand op rank 1's and the
//     result holds for a non-commutative operator; the result goes into
//     the user's buffer resultChunk bytes at a time and is copied from L1
//     into the slot, and phase 1+K+i is posted after chunk i;
//  3. copies the peer's result chunk by chunk into the user's buffer as
//     soon as the peer has posted it.
//
// Each element is read from the peer once in step 2 and once in step 3:
// two copies and one reduction of half the vector per rank, the fewest
// for buffers the peer cannot read. The chunk phases let a rank that is
// ahead start on the chunks that are there instead of waiting for the
// whole half.
//
// Reduce-scatter (block or irregular). A step holds a piece of each block;
// a rank copies in the peer's piece in K chunks (phases 1..K) at the start
// of its slot half and reduces its own piece straight into recv, from its
// input and the peer's copy, in rank order: one copy and one reduction.
//
// Slot reuse: within a step a rank writes disjoint ranges once each (the
// copy-in and its result), never rewritten; across steps see step.go.
// Both loops make a rank depend on the peer's data of every step.

// pairSegBytes is the largest allreduce segment and reduce-scatter piece:
// what a step writes into the slot stays in L2 while the peer reads it.
const pairSegBytes = 1 << 20

// pairChunkBytes is about the size of one chunk of the pair loop: large
// enough that a phase per chunk costs little, small enough that a rank
// finds the first chunks posted while the peer is still writing the
// rest.
const pairChunkBytes = 128 << 10

// pairChunks returns the number of chunks K of halves of up to n
// elements of esz bytes: at least 1.
func pairChunks(n, esz int) int {
	return max(1, (n*esz+pairChunkBytes-1)/pairChunkBytes)
}

// chunkLo is the first element of chunk i of K of a range of n elements.
func chunkLo(i, K, n int) int { return i * n / K }

// pairAllreduce is the allreduce of the pair loop (p = 2).
func (c *Comm) pairAllreduce(ctx context.Context, a *call) error {
	esz, N := a.esz, a.count
	me, peer := c.rank, 1-c.rank
	in, out := a.input(), a.recv
	M := max(1, min(c.half, pairSegBytes)/esz)
	probe := !c.ep.Oversubscribed()
	var half [3]int
	for base := 0; base == 0 || base < N; base += M {
		m := min(M, N-base)
		evenSplit(half[:], 2, m)
		K := pairChunks(half[1], esz) // the lower half is the larger
		e, err := c.begin(ctx)
		if err != nil {
			return err
		}
		h, ph := c.slotHalf(me, e), c.slotHalf(peer, e)
		olo, on := half[me], half[me+1]-half[me] // own half
		plo, pn := half[peer], half[peer+1]-half[peer]
		// 1. The copy-in of the peer's half.
		for i := range K {
			lo, hi := plo+chunkLo(i, K, pn), plo+chunkLo(i+1, K, pn)
			c.adv.publish(span(h, esz, lo, hi), span(in, esz, base+lo, base+hi))
			c.post(e, 1+i)
		}
		// 2. The own half, from the input and the peer's copy.
		for i := range K {
			lo, hi := olo+chunkLo(i, K, on), olo+chunkLo(i+1, K, on)
			if err := c.wait(ctx, peer, e, 1+i); err != nil {
				return err
			}
			src := span(ph, esz, lo, hi)
			if i == 0 && probe && on*esz >= pipelineBytes/8 {
				c.adv.probeRead(src)
			}
			c.pairResult(&a.red, span(out, esz, base+lo, base+hi), span(h, esz, lo, hi), span(in, esz, base+lo, base+hi), src)
			c.post(e, 1+K+i)
		}
		// 3. The peer's half of the result.
		for i := range K {
			lo, hi := plo+chunkLo(i, K, pn), plo+chunkLo(i+1, K, pn)
			if err := c.wait(ctx, peer, e, 1+K+i); err != nil {
				return err
			}
			simd.Copy(span(out, esz, base+lo, base+hi), span(ph, esz, lo, hi))
		}
		c.last.add(Stats{Rounds: 2, Sent: 2, Received: 2, Reduced: 1})
		c.full = true
		c.end(e)
	}
	return nil
}

// pairResult computes dst = in op peer on rank 0, peer op in on rank 1
// (rank 0's operand on the left), into the user's buffer dst and a copy
// into the slot, resultChunk bytes at a time, so that the copy reads what
// the reduction just wrote from L1. dst may be in.
func (c *Comm) pairResult(r *reducer, dst, slot, in, peer []byte) {
	left, right := in, peer
	if c.rank == 1 {
		left, right = peer, in
	}
	for lo := 0; lo < len(dst); lo += resultChunk {
		hi := min(lo+resultChunk, len(dst))
		r.reduce3(dst[lo:hi], left[lo:hi], right[lo:hi])
		simd.Copy(slot[lo:hi], dst[lo:hi])
	}
}

// pairReduceScatter is the reduce-scatter of the pair loop (p = 2), for
// blocks of any counts.
func (c *Comm) pairReduceScatter(ctx context.Context, a *call) error {
	esz := a.esz
	me, peer := c.rank, 1-c.rank
	// S steps, each with a piece of at most capElems of every block: the
	// slot holds as much of a step as an allreduce segment.
	capElems := max(1, min(c.half, pairSegBytes)/esz)
	S := max(1, (max(a.counts[0], a.counts[1])+capElems-1)/capElems)
	for k := range S {
		// K chunks per piece, from the larger piece: the same on both ranks.
		K := pairChunks(max(pieceLo(k+1, S, a.counts[0])-pieceLo(k, S, a.counts[0]),
			pieceLo(k+1, S, a.counts[1])-pieceLo(k, S, a.counts[1])), esz)
		e, err := c.begin(ctx)
		if err != nil {
			return err
		}
		h, ph := c.slotHalf(me, e), c.slotHalf(peer, e)
		// The peer's piece, at the start of the slot half.
		plo := pieceLo(k, S, a.counts[peer])
		pn := pieceLo(k+1, S, a.counts[peer]) - plo
		psend := a.displs[peer] + plo
		for i := range K {
			lo, hi := chunkLo(i, K, pn), chunkLo(i+1, K, pn)
			c.adv.publish(span(h, esz, lo, hi), span(a.send, esz, psend+lo, psend+hi))
			c.post(e, 1+i)
		}
		// The own piece, reduced into recv as the peer's chunks arrive.
		olo := pieceLo(k, S, a.counts[me])
		on := pieceLo(k+1, S, a.counts[me]) - olo
		osend := a.displs[me] + olo
		for i := range K {
			lo, hi := chunkLo(i, K, on), chunkLo(i+1, K, on)
			if err := c.wait(ctx, peer, e, 1+i); err != nil {
				return err
			}
			dst := span(a.recv, esz, olo+lo, olo+hi)
			own, src := span(a.send, esz, osend+lo, osend+hi), span(ph, esz, lo, hi)
			if me == 0 {
				a.red.reduce3(dst, own, src)
			} else {
				a.red.reduce3(dst, src, own)
			}
		}
		c.last.add(Stats{Rounds: 1, Sent: 1, Received: 1, Reduced: 1})
		c.full = true
		c.end(e)
	}
	return nil
}
