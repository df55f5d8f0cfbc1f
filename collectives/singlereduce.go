package collectives

import "context"

// The Single reductions: allreduce, reduce-scatter and reduce-scatter
// block of private buffers without copying the inputs into the slots.
// Rank r reduces block r of the p inputs, reading each peer's piece of it
// by cross-memory attach into its own slot half (a piece at a time, so
// that it is read from the cache), and reduces the pieces with its own in
// rank order into block r of its recv; the allreduce then writes each
// reduced piece, still in the cache, into every peer's recv. Each input
// byte is read from memory once and each result byte written once per
// rank that holds it, where the slots add a copy in and a copy out.
//
// One step, as the other Single calls (single.go): every rank offers
// every peer j, in its table, block j of its input (which j reads) and,
// for the allreduce, the place of block j in its recv (which j writes);
// posts phase 1; reduces; posts phase 2; returns once every peer posted
// phase 2. In place, block j of a rank's buffer is read and then written
// by j alone, a piece at a time, and the rank's own block by itself.

func init() {
	register(CollAllreduce, Single, (*Comm).singleAllreduce, true)
	register(CollReduceScatterBlock, Single, (*Comm).singleReduceScatter, true)
	register(CollReduceScatter, Single, (*Comm).singleReduceScatter, true)
}

// singleReduceChunk is the largest piece of a block that a Single
// reduction reads from each peer before reducing it.
const singleReduceChunk = 64 << 10

// singleReduceOn reports whether the slot half holds, beside the table,
// a piece of at least a cache line per rank.
func (c *Comm) singleReduceOn() bool { return c.singleReducePiece() > 0 }

// singleReducePiece is the piece (bytes, whole cache lines) that a
// Single reduction reads from each peer at a time: p of them fit in the
// slot half after the table.
func (c *Comm) singleReducePiece() int {
	t := (singleTableBytes(c.size) + lineBytes - 1) &^ (lineBytes - 1)
	if t >= c.half {
		return 0
	}
	return min(singleReduceChunk, (c.half-t)/c.size&^(lineBytes-1))
}

func (c *Comm) singleAllreduce(ctx context.Context, a *call) error {
	pre := c.sc.pre
	evenSplit(pre, c.size, a.count)
	return c.singleReduce(ctx, a, func(j int) (int, int) { return pre[j] * a.esz, pre[j+1] * a.esz }, a.recv[pre[c.rank]*a.esz:pre[c.rank+1]*a.esz], true)
}

func (c *Comm) singleReduceScatter(ctx context.Context, a *call) error {
	return c.singleReduce(ctx, a, func(j int) (int, int) { return a.displs[j] * a.esz, (a.displs[j] + a.counts[j]) * a.esz }, a.recv, false)
}

// singleReduce reduces block r (bytes [block(r)) of every rank's input)
// into dst; with all, it also writes the result into block r of every
// peer's recv and offers the peers block q of its own recv.
func (c *Comm) singleReduce(ctx context.Context, a *call, block func(j int) (int, int), dst []byte, all bool) (err error) {
	p, r := c.size, c.rank
	in := a.input()
	e, err := c.begin(ctx)
	if err != nil {
		return err
	}
	defer c.withdraw(e, &err)
	for j := range p {
		if j == r {
			continue
		}
		lo, hi := block(j)
		var out []byte
		if all {
			out = a.recv[lo:hi]
		}
		c.offer2(e, j, in[lo:hi], out)
	}
	c.post(e, 1)
	lo, hi := block(r)
	n1 := 0
	if all {
		n1 = hi - lo
	}
	for i := 1; i < p; i++ {
		if err := c.waitOffer2(ctx, c.next(i), e, hi-lo, n1); err != nil {
			return err
		}
	}
	own := in[lo:hi]
	inPlace := unsafePtr(own) == unsafePtr(dst) && len(dst) > 0
	piece := c.singleReducePiece() / a.esz * a.esz
	scratch := c.slotHalf(r, e)[(singleTableBytes(p)+lineBytes-1)&^(lineBytes-1):]
	srcs := c.sc.chunk
	for plo := 0; plo < len(dst); plo += piece {
		phi := min(plo+piece, len(dst))
		for q := range p {
			if q == r {
				srcs[q] = own[plo:phi]
				if inPlace && r != 0 {
					// The k-way kernel writes over only its first
					// source.
					srcs[q] = scratch[q*piece : q*piece+phi-plo]
					copy(srcs[q], own[plo:phi])
				}
				continue
			}
			srcs[q] = scratch[q*piece : q*piece+phi-plo]
			if err := c.move(q, e, plo, srcs[q], false); err != nil {
				return err
			}
		}
		a.red.reduceK(dst[plo:phi], srcs)
		if !all {
			continue
		}
		for i := 1; i < p; i++ {
			if err := c.moveRange(c.next(i), e, 1, plo, dst[plo:phi], true); err != nil {
				return err
			}
		}
	}
	st := Stats{Rounds: 1, Sent: uint64(p - 1), Received: uint64(p - 1), Reduced: uint64(p - 1)}
	if all {
		st.Rounds, st.Sent, st.Received = 2, 2*st.Sent, 2*st.Received
	}
	c.last.add(st)
	return c.endAll(ctx, e, 2)
}
