package collectives

import (
	"context"

	"github.com/shmcoll/shmcoll/internal/cpu"
)

// The Single reductions: allreduce, reduce, reduce-scatter and
// reduce-scatter block of private buffers without copying the inputs into
// the slots. Rank r reduces block r of the p inputs, reading each peer's
// piece of it by cross-memory attach into its own slot half, or the first
// one straight into its recv where that is apart from its input (a piece
// at a time, so that it is read from the cache), and reduces the pieces
// with its own in rank order into block r of its recv; the allreduce then
// writes each reduced piece, still in the cache, into every peer's recv,
// and a reduce's non-root writes it into the root's recv only. Each input
// byte is read from memory once and each result byte written once per
// rank that holds it, where the slots add a copy in and a copy out.
//
// One step, as the other Single calls (single.go): every rank offers
// every peer j, in its table, block j of its input (which j reads) and,
// for the allreduce and at a reduce's root, the place of block j in its
// recv (which j writes); posts phase 1; reduces; posts phase 2; returns
// once every peer posted phase 2 (a reduce's non-root too: the peers read
// its input until then). In place, block j of a rank's buffer is read and
// then written by j alone, a piece at a time, and the rank's own block by
// itself.

func init() {
	register(CollAllreduce, Single, (*Comm).singleAllreduce, true)
	register(CollReduce, Single, (*Comm).singleReduceRoot, true)
	register(CollReduceScatterBlock, Single, (*Comm).singleReduceScatter, true)
	register(CollReduceScatter, Single, (*Comm).singleReduceScatter, true)
}

// singleReduceChunk is the largest piece of a block that a Single
// reduction reads from each peer before reducing it.
const singleReduceChunk = 64 << 10

// singleDirectPiece is the piece of its block that a rank of two reads
// from its peer straight into its recv and reduces there: a quarter of
// L2 (256 KiB where its size is unknown), so that the piece and the own
// input's piece stay in L2 between the read and the reduction, with room
// to spare. Larger pieces cost fewer system calls.
var singleDirectPiece = func() int {
	if cpu.CacheL2 <= 0 {
		return 256 << 10
	}
	return min(max(cpu.CacheL2/4, 128<<10), 512<<10) &^ (lineBytes - 1)
}()

// singleReduceOn reports whether the slot half holds, beside the table,
// a piece of at least a cache line per rank.
func (c *Comm) singleReduceOn() bool { return c.singleReducePiece() > 0 }

// singleReducePiece is the piece (bytes, whole cache lines) that a
// Single reduction reads from each peer at a time: p of them fit in the
// slot half after the table.
func (c *Comm) singleReducePiece() int {
	t := singleScratch(c.size)
	if t >= c.half {
		return 0
	}
	return min(singleReduceChunk, (c.half-t)/c.size&^(lineBytes-1))
}

func (c *Comm) singleAllreduce(ctx context.Context, a *call) error {
	return c.singleEven(ctx, a, singleToAll)
}

func (c *Comm) singleReduceRoot(ctx context.Context, a *call) error {
	return c.singleEven(ctx, a, a.root)
}

// singleEven runs singleReduce on p blocks of about equal size, but for
// a reduce of two ranks of at most two direct pieces, whose non-root also
// writes its block into the root's recv from the cache: there the root
// reduces singleRootShare of the vector. Larger vectors are split evenly,
// since the memory's pace, which the ranks share, bounds them.
func (c *Comm) singleEven(ctx context.Context, a *call, to int) error {
	pre := c.sc.pre
	evenSplit(pre, c.size, a.count)
	if to >= 0 && c.size == 2 && a.count*a.esz <= 2*singleDirectPiece {
		k := int(uint64(a.count) * singleRootShare >> 8)
		if to == 1 {
			k = a.count - k
		}
		pre[1] = k
	}
	var dst []byte
	if to == singleToAll || to == c.rank {
		dst = a.recv[pre[c.rank]*a.esz : pre[c.rank+1]*a.esz]
	}
	return c.singleReduce(ctx, a, func(j int) (int, int) { return pre[j] * a.esz, pre[j+1] * a.esz }, dst, to)
}

// singleRootShare is, in 256ths, the part of a reduce of two ranks that
// the root reduces: the non-root reads the root's input, reduces and
// writes the result into the root's recv, the root only reads and
// reduces, so the root's part is about as much larger as the non-root's
// write costs.
const singleRootShare = 171

func (c *Comm) singleReduceScatter(ctx context.Context, a *call) error {
	return c.singleReduce(ctx, a, func(j int) (int, int) { return a.displs[j] * a.esz, (a.displs[j] + a.counts[j]) * a.esz }, a.recv, singleToNone)
}

// Where a Single reduction writes each reduced block besides this rank's
// recv (singleReduce's to): nowhere, every peer's recv, or (a rank) the
// root's.
const (
	singleToNone = -1
	singleToAll  = -2
)

// singleReduce reduces block r (bytes [block(r)) of every rank's input)
// into dst, and writes the result into block r of the recv of every peer
// (to == singleToAll) or of rank to, which offer their recv's blocks to
// the peers. A rank with no dst (a reduce's non-root) reduces each piece
// in its slot half.
func (c *Comm) singleReduce(ctx context.Context, a *call, block func(j int) (int, int), dst []byte, to int) (err error) {
	p, r := c.size, c.rank
	in := a.input()
	e, err := c.begin(ctx)
	if err != nil {
		return err
	}
	defer c.withdraw(e, &err)
	offers := to == singleToAll || to == r
	c.offerHuge(a)
	for j := range p {
		if j == r {
			continue
		}
		lo, hi := block(j)
		var out []byte
		if offers {
			out = a.recv[lo:hi]
		}
		c.offer2(e, j, in[lo:hi], out)
	}
	c.post(e, 1)
	lo, hi := block(r)
	for i := 1; i < p; i++ {
		q := c.next(i)
		n1 := 0
		if to == singleToAll || to == q {
			n1 = hi - lo
		}
		if err := c.waitOffer2(ctx, q, e, hi-lo, n1); err != nil {
			return err
		}
	}
	own := in[lo:hi]
	piece := c.singleReducePiece() / a.esz * a.esz
	scratch := c.slotHalf(r, e)[singleScratch(p):]
	// Where dst is apart from the own input, the piece of the first
	// source (rank 1's for rank 0 of two) is read straight into dst and
	// reduced there: no scratch, and for two ranks pieces as large as L2
	// holds beside the own input's, so fewer system calls.
	into := -1 // the rank whose piece is read into dst
	if len(dst) > 0 && !overlaps(own, dst) {
		switch {
		case r != 0:
			into = 0
		case p == 2:
			into = 1
		}
	}
	if p == 2 {
		// At most one piece in the scratch, the peer's.
		piece = singleDirectPiece
		if into < 0 {
			piece = min(piece, len(scratch)&^(lineBytes-1))
		}
		piece = piece / a.esz * a.esz
	}
	// The k-way kernel writes over only its first source, so the own
	// piece goes to the scratch first where dst is the own input (in
	// place) and that is not the first source, or where the piece is
	// reduced into the first source's scratch (no dst) and that source
	// is the own input. Two sources take the two-operand kernel, whose
	// result may be either source.
	toScratch := p > 2 && (dst == nil && r == 0 || len(dst) > 0 && unsafePtr(own) == unsafePtr(dst) && r != 0)
	srcs := c.sc.chunk
	for plo := 0; plo < len(own); plo += piece {
		phi := min(plo+piece, len(own))
		for q := range p {
			switch {
			case q == into:
				srcs[q] = dst[plo:phi]
			case q == r && !toScratch:
				srcs[q] = own[plo:phi]
				continue
			default:
				k := q * piece
				if p == 2 {
					k = 0
				}
				srcs[q] = scratch[k : k+phi-plo]
			}
			if q != r {
				if err := c.move(q, e, plo, srcs[q], false); err != nil {
					return err
				}
			} else {
				copy(srcs[q], own[plo:phi])
			}
		}
		var out []byte
		switch {
		case dst != nil:
			out = dst[plo:phi]
		case p == 2:
			out = srcs[1-r]
		default:
			out = srcs[0]
		}
		if p == 2 {
			a.red.reduce3(out, srcs[0], srcs[1])
		} else {
			a.red.reduceK(out, srcs)
		}
		for i := 1; i < p; i++ {
			if q := c.next(i); to == singleToAll || to == q {
				if err := c.moveRange(q, e, 1, plo, out, true); err != nil {
					return err
				}
			}
		}
	}
	st := Stats{Rounds: 1, Sent: uint64(p - 1), Received: uint64(p - 1), Reduced: uint64(p - 1)}
	switch {
	case to == singleToAll:
		st.Rounds, st.Sent, st.Received = 2, 2*st.Sent, 2*st.Received
	case to == r:
		st.Rounds, st.Received = 2, 2*st.Received
	case to >= 0:
		st.Rounds, st.Sent = 2, st.Sent+1
	}
	c.last.add(st)
	return c.endAll(ctx, e, 2)
}
