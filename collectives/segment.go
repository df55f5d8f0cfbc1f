package collectives

import (
	"context"
	"fmt"

	"github.com/shmcoll/shmcoll/simd"
)

// Segmentation. A vector larger than a slot half allows is run as several
// steps, each on one segment. For the collectives with fixed blocks (the
// reduce-scatters, allgathers, gather, scatter, alltoall) segment k of S
// holds piece k of every block j, elements [k*n_j/S, (k+1)*n_j/S) of it, so
// every segment keeps the load balanced. Allreduce, reduce, bcast and scan
// cut the vector into contiguous segments and split each into p nearly
// equal blocks.

// steps runs body in n steps (at least one), k = 0 .. n-1, each begun
// before body and ended after it.
func (c *Comm) steps(ctx context.Context, n int, body func(e uint64, k int) error) error {
	for k := range max(n, 1) {
		e, err := c.begin(ctx)
		if err != nil {
			return err
		}
		if err := body(e, k); err != nil {
			return err
		}
		c.end(e)
	}
	return nil
}

// vectorSteps runs body on the contiguous segments of at most M of N
// elements, one step each: elements [base, base+m). N = 0 is one empty
// segment.
func (c *Comm) vectorSteps(ctx context.Context, N, M int, body func(e uint64, base, m int) error) error {
	return c.steps(ctx, (N+M-1)/M, func(e uint64, k int) error { return body(e, k*M, min(M, N-k*M)) })
}

// blockSteps runs body on the S segments that cut the call's blocks into
// pieces of at most capElems in all (numPieces), one step each, with
// c.sc.pre and c.sc.uoff set for segment k (pieces).
func (c *Comm) blockSteps(ctx context.Context, a *call, capElems int, body func(e uint64, k, S int) error) error {
	S, err := numPieces(a.counts, capElems)
	if err != nil {
		return c.fail(err)
	}
	return c.steps(ctx, S, func(e uint64, k int) error {
		c.pieces(k, S, a.counts, a.displs)
		return body(e, k, S)
	})
}

// evenSplit fills pre with p nearly equal blocks of m elements.
func evenSplit(pre []int, p, m int) {
	b, r := m/p, m%p
	for j := 0; j <= p; j++ {
		pre[j] = j*b + min(j, r)
	}
}

// numPieces returns the number of segments S that cut blocks of the given
// counts into pieces of which one segment's total is at most capElems.
func numPieces(counts []int, capElems int) (int, error) {
	total, nz := 0, 0
	for _, n := range counts {
		total += n
		if n > 0 {
			nz++
		}
	}
	if total <= capElems {
		return 1, nil
	}
	if capElems <= nz {
		return 0, fmt.Errorf("%w: a slot half of %d elements cannot hold a piece of each of %d blocks (raise Options.SlotBytes)", ErrInvalidArgument, capElems, nz)
	}
	// sum_j ceil(n_j/S) <= total/S + nz <= capElems
	d := capElems - nz
	return (total + d - 1) / d, nil
}

// pieceLo is the first element of piece k of S of a block of n elements
// (no division for the usual one piece).
func pieceLo(k, S, n int) int {
	if S == 1 {
		return k * n
	}
	return k * n / S
}

// pieces fills c.sc.pre with the packed offsets of the pieces of segment k
// of S of the call's blocks, and c.sc.uoff with their offsets in a user
// buffer with the given displacements.
func (c *Comm) pieces(k, S int, counts, displs []int) {
	pre, uoff := c.sc.pre[:len(counts)+1], c.sc.uoff[:len(counts)]
	displs = displs[:len(counts)]
	pre[0] = 0
	if S == 1 { // the whole blocks
		for j, n := range counts {
			pre[j+1] = pre[j] + n
			uoff[j] = displs[j]
		}
		return
	}
	for j, n := range counts {
		lo, hi := pieceLo(k, S, n), pieceLo(k+1, S, n)
		pre[j+1] = pre[j] + hi - lo
		uoff[j] = displs[j] + lo
	}
}

// roff is the element offset of R[i] in the rotated buffer of rank x,
// 0 <= i <= p, for the blocks of c.sc.pre: R[i] holds block (x+i) mod p.
func (c *Comm) roff(x, i int) int {
	pre, p := c.sc.pre, c.size
	if x+i <= p {
		return pre[x+i] - pre[x]
	}
	return pre[p] - pre[x] + pre[x+i-p]
}

// eachRun calls f for the maximal runs of R[i..i2) of the calling rank that
// are contiguous both in the rotated buffer and in the user buffer (block j
// at c.sc.uoff[j]): rot and user are element offsets, n > 0 elements.
func (c *Comm) eachRun(i, i2 int, f func(rot, user, n int)) {
	pre, p := c.sc.pre, c.size
	cr, cu, cn := 0, 0, 0
	for t := i; t < i2; t++ {
		j := c.rank + t
		if j >= p {
			j -= p
		}
		n := pre[j+1] - pre[j]
		if n == 0 {
			continue
		}
		rot, u := c.roff(c.rank, t), c.sc.uoff[j]
		if cn > 0 && cr+cn == rot && cu+cn == u {
			cn += n
			continue
		}
		if cn > 0 {
			f(cr, cu, cn)
		}
		cr, cu, cn = rot, u, n
	}
	if cn > 0 {
		f(cr, cu, cn)
	}
}

// span returns b[lo*esz : hi*esz].
func span(b []byte, esz, lo, hi int) []byte { return b[lo*esz : hi*esz] }

// copyPieces copies this step's piece of every block but skip (-1: none)
// from the user's blocks in src (at c.sc.uoff) to h at c.sc.pre.
func (c *Comm) copyPieces(h, src []byte, esz, skip int) {
	pre, uoff := c.sc.pre, c.sc.uoff
	for j := range c.size {
		if j != skip {
			simd.Copy(span(h, esz, pre[j], pre[j+1]), span(src, esz, uoff[j], uoff[j]+pre[j+1]-pre[j]))
		}
	}
}
