package circulant

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// ErrVerify is wrapped by every failure a verifier reports.
var ErrVerify = errors.New("circulant: verification failed")

func verifyErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrVerify, fmt.Sprintf(format, args...))
}

// VerifyPlans proves that the plans of kind for p ranks with the given
// skips (nil: [HalvingSkips]) are correct, in O(p + q) time, by the
// rotation argument of [RS] Theorem 1: every rank's plan is rank 0's with
// all ranks shifted by the rank (checked on sampled ranks here, on all of
// them by [SimulatePlans]), so the contributors of R[i] at rank r are
// {r+i-d : d in D[i]} for offset sets D[i] that do not depend on r. A
// reduce round hooks the tree of R[i+s] under R[i]. The plan is correct if
// every round's ranges line up with its peers (the block received into
// R[j] is block (r+j) mod p), every R[i], i > 0, is sent exactly once and
// only into an R[j] that is still to be sent (so the forest stays a forest
// and ends as one tree over all p offsets: every input reduced exactly
// once into the right rank), and, for the allgather rounds, every block is
// received exactly once after its sender holds it complete. It also
// checks q rounds and p-1 blocks per rank (2q and 2(p-1) for Allreduce).
func VerifyPlans(kind Kind, p int, skips []int) error {
	pl, err := NewPlan(kind, p, 0, skips, nil)
	if err != nil {
		return err
	}
	if err := verifyRelative(pl); err != nil {
		return err
	}
	// The rotation: sample ranks and compare with rank 0's plan shifted.
	for _, r := range sampleRanks(p) {
		if r == 0 {
			continue
		}
		pr, err := NewPlan(kind, p, r, pl.Skips, nil)
		if err != nil {
			return err
		}
		if err := sameShifted(pl, pr); err != nil {
			return err
		}
	}
	return nil
}

func sampleRanks(p int) []int {
	rs := []int{0, 1, p / 2, p - 1}
	if p <= 8 {
		rs = rs[:0]
		for r := 0; r < p; r++ {
			rs = append(rs, r)
		}
	}
	return rs
}

func sameShifted(p0, pr *Plan) error {
	if len(p0.Rounds) != len(pr.Rounds) {
		return verifyErr("p = %d: rank %d has %d rounds, rank 0 %d", p0.P, pr.Rank, len(pr.Rounds), len(p0.Rounds))
	}
	for k, a := range p0.Rounds {
		b := pr.Rounds[k]
		if b.Skip != a.Skip || b.Send != a.Send || b.Recv != a.Recv || b.Op != a.Op ||
			b.To != pr.mod(a.To+pr.Rank) || b.From != pr.mod(a.From+pr.Rank) {
			return verifyErr("p = %d: round %d of rank %d is not rank 0's shifted: %+v vs %+v", p0.P, k, pr.Rank, b, a)
		}
	}
	return nil
}

// verifyRelative runs the forest argument on one rank's plan.
func verifyRelative(pl *Plan) error {
	p := pl.P
	q := len(pl.Skips) - 1
	// state[i]: 0 = live partial (not yet sent), 1 = sent (reduce phase
	// over for it); for the allgather phase, complete[i].
	sent := make([]bool, p)
	complete := make([]bool, p)
	merges := 0
	if pl.Kind == Allgather {
		complete[0] = true
	}
	wantRounds := q
	if pl.Kind == Allreduce {
		wantRounds = 2 * q
	}
	if len(pl.Rounds) != wantRounds {
		return verifyErr("p = %d %v: %d rounds, want %d", p, pl.Kind, len(pl.Rounds), wantRounds)
	}
	inRS := pl.Kind != Allgather
	for k, rd := range pl.Rounds {
		c := rd.Send.Len()
		if c <= 0 || rd.Recv.Len() != c || rd.Send.Lo < 0 || rd.Send.Hi > p || rd.Recv.Lo < 0 || rd.Recv.Hi > p {
			return verifyErr("p = %d round %d: bad ranges %+v", p, k, rd)
		}
		if rd.Send.Lo < rd.Recv.Hi && rd.Recv.Lo < rd.Send.Hi {
			return verifyErr("p = %d round %d: send %v and receive %v overlap", p, k, rd.Send, rd.Recv)
		}
		// The blocks line up: From's R[Send.Lo+j] is my R[Recv.Lo+j], and
		// my R[Send.Lo+j] is To's R[Recv.Lo+j].
		if pl.mod(rd.From+rd.Send.Lo) != pl.mod(pl.Rank+rd.Recv.Lo) || pl.mod(rd.To+rd.Recv.Lo) != pl.mod(pl.Rank+rd.Send.Lo) {
			return verifyErr("p = %d round %d: peers %d/%d do not line up with ranges %v -> %v", p, k, rd.To, rd.From, rd.Send, rd.Recv)
		}
		if inRS && rd.Op == OpCopy {
			inRS = false
			if !sent[0] && merges == p-1 {
				complete[0] = true
			}
		}
		switch rd.Op {
		case OpReduce:
			if !inRS {
				return verifyErr("p = %d round %d: reduce after copy rounds", p, k)
			}
			for j := 0; j < c; j++ {
				src, dst := rd.Send.Lo+j, rd.Recv.Lo+j
				if sent[src] {
					return verifyErr("p = %d round %d: R[%d] sent twice", p, k, src)
				}
				if sent[dst] {
					return verifyErr("p = %d round %d: R[%d] reduced into after it was sent (contribution lost)", p, k, dst)
				}
			}
			for j := 0; j < c; j++ {
				sent[rd.Send.Lo+j] = true
				merges++
			}
		case OpCopy:
			for j := 0; j < c; j++ {
				src, dst := rd.Send.Lo+j, rd.Recv.Lo+j
				if !complete[src] {
					return verifyErr("p = %d round %d: R[%d] sent before it is complete", p, k, src)
				}
				if complete[dst] {
					return verifyErr("p = %d round %d: R[%d] received twice", p, k, dst)
				}
			}
			for j := 0; j < c; j++ {
				complete[rd.Recv.Lo+j] = true
			}
		default:
			return verifyErr("p = %d round %d: bad op %v", p, k, rd.Op)
		}
	}
	if inRS && pl.Kind == Allreduce && merges == p-1 && !sent[0] {
		complete[0] = true // p == 1: no rounds at all
	}
	if pl.Kind == ReduceScatter {
		// p-1 merges of distinct, live roots into live roots leave one tree;
		// its root is the only unsent index, which must be 0.
		if merges != p-1 || sent[0] {
			return verifyErr("p = %d: %d merges, R[0] sent %v: reduction incomplete", p, merges, sent[0])
		}
	} else {
		for i, ok := range complete {
			if !ok {
				return verifyErr("p = %d %v: R[%d] never complete", p, pl.Kind, i)
			}
		}
	}
	rounds, s, r, red := pl.Counts()
	wantBlocks, wantRed := p-1, p-1
	switch pl.Kind {
	case Allreduce:
		wantBlocks = 2 * (p - 1)
	case Allgather:
		wantRed = 0
	}
	if rounds != wantRounds || s != wantBlocks || r != wantBlocks || red != wantRed {
		return verifyErr("p = %d %v: rounds %d sent %d received %d reduced %d", p, pl.Kind, rounds, s, r, red)
	}
	return nil
}

// SimulatePlans runs the plans of all p ranks against each other, as a
// collectives loop would, on explicit rotated buffers of contributor sets
// (one bit per rank per element), with the given block sizes (nil: one
// element per block). Each rank reads its From's blocks straight from
// From's buffer in the same round, as in shared memory. It checks that
// every reduction combines disjoint contributor sets (exactly-once), that
// the results are complete at the right ranks (reduce-scatter: block r at
// rank r; allreduce and allgather: every block everywhere), and the round
// and block counts. Time O(p^2 * elements-per-block * p/64).
func SimulatePlans(kind Kind, p int, skips []int, sizes []int) error {
	plans := make([]*Plan, p)
	for r := range plans {
		pl, err := NewPlan(kind, p, r, skips, sizes)
		if err != nil {
			return err
		}
		plans[r] = pl
	}
	w := (p + 63) / 64
	m := plans[0].Elems()
	// buf[r][e*w : (e+1)*w] is the contributor set of element e of rank r's
	// rotated buffer.
	buf := make([][]uint64, p)
	for r := range buf {
		buf[r] = make([]uint64, m*w)
		pl := plans[r]
		for i := 0; i < p; i++ {
			if kind == Allgather && i != 0 {
				continue // only own block known
			}
			for e := pl.ElemOffset(r, i); e < pl.ElemOffset(r, i+1); e++ {
				if kind == Allgather {
					setAll(buf[r][e*w:(e+1)*w], p) // own block is the result already
				} else {
					buf[r][e*w+r/64] |= 1 << (r % 64)
				}
			}
		}
	}
	nr := len(plans[0].Rounds)
	for k := 0; k < nr; k++ {
		for r := 0; r < p; r++ {
			rd := plans[r].Rounds[k]
			if rd.PeerElems.Len() != rd.RecvElems.Len() || rd.SendElems.Len() != plans[rd.To].Rounds[k].PeerElems.Len() {
				return verifyErr("p = %d round %d rank %d: element counts differ", p, k, r)
			}
			peer := plans[rd.From].Rounds[k]
			if peer.To != r || peer.Send != rd.Send {
				return verifyErr("p = %d round %d: rank %d expects from %d, which sends %v to %d", p, k, r, rd.From, peer.Send, peer.To)
			}
		}
		// Two passes so that every rank reads the state its peer had at the
		// start of the round. Send and Recv never overlap, so a rank's read
		// range is not written in the round; the two-pass order checks that.
		snap := make([][]uint64, p)
		for r := 0; r < p; r++ {
			rd := plans[r].Rounds[k]
			src := buf[rd.From][rd.PeerElems.Lo*w : rd.PeerElems.Hi*w]
			snap[r] = append([]uint64(nil), src...)
		}
		for r := 0; r < p; r++ {
			rd := plans[r].Rounds[k]
			dst := buf[r][rd.RecvElems.Lo*w : rd.RecvElems.Hi*w]
			if rd.Op == OpCopy {
				copy(dst, snap[r])
				continue
			}
			for i := range dst {
				if dst[i]&snap[r][i] != 0 {
					return verifyErr("p = %d round %d rank %d: contribution counted twice", p, k, r)
				}
				dst[i] |= snap[r][i]
			}
		}
	}
	for r := 0; r < p; r++ {
		pl := plans[r]
		hi := p
		if kind == ReduceScatter {
			hi = 1
		}
		for i := 0; i < hi; i++ {
			for e := pl.ElemOffset(r, i); e < pl.ElemOffset(r, i+1); e++ {
				if !isAll(buf[r][e*w:(e+1)*w], p) {
					return verifyErr("p = %d %v: rank %d block %d incomplete", p, kind, r, pl.Block(r, i))
				}
			}
		}
		if err := verifyRelative(pl); err != nil {
			return err
		}
	}
	return nil
}

func setAll(s []uint64, p int) {
	for i := range s {
		s[i] = ^uint64(0)
	}
	if p%64 != 0 {
		s[len(s)-1] = 1<<(p%64) - 1
	}
}

func isAll(s []uint64, p int) bool {
	n := 0
	for _, x := range s {
		n += bits.OnesCount64(x)
	}
	return n == p
}

// ReduceScatterExpr returns the expression by which rank computes its
// result block in [RS] Algorithm 1 with the given skips (nil: halving), in
// the paper's notation: x_i is rank i's input block for rank, "+" is the
// reduction operator applied left to right, with the local accumulator on
// the left, and parentheses mark partial results received from another
// rank. For p = 22, rank 21 it is the paper's
// x21+x10+(x15+x4)+(x18+x7+(x12+x1))+...: every rank's result is
// evaluated in this shape, so float results are the same on every run.
func ReduceScatterExpr(p, rank int, skips []int) (string, error) {
	pl, err := NewPlan(ReduceScatter, p, 0, skips, nil)
	if err != nil {
		return "", err
	}
	if rank < 0 || rank >= p {
		return "", fmt.Errorf("%w: rank %d out of range [0, %d)", ErrInvalidArgument, rank, p)
	}
	children := reductionChildren(pl)
	// R[i] of rank x is the tree rooted at offset i; its own leaf is the
	// input of rank x (the holder), and a child c of i was held by rank
	// x-(c-i). For the result at `rank`, the root is offset 0 at rank.
	var b strings.Builder
	var walk func(i, holder int)
	walk = func(i, holder int) {
		b.WriteString("x")
		b.WriteString(strconv.Itoa(holder))
		for _, c := range children[i] {
			b.WriteString("+")
			h := pl.mod(holder - (c - i))
			if len(children[c]) > 0 {
				b.WriteString("(")
				walk(c, h)
				b.WriteString(")")
			} else {
				walk(c, h)
			}
		}
	}
	walk(0, rank)
	return b.String(), nil
}

// reductionChildren returns, for every offset i, the offsets whose partial
// results a reduce-scatter plan reduces into R[i], in round order: the
// implicit reduction tree of [RS] Figure 1, the same for every rank.
func reductionChildren(pl *Plan) [][]int {
	children := make([][]int, pl.P)
	for _, rd := range pl.Rounds {
		if rd.Op != OpReduce {
			continue
		}
		for j := 0; j < rd.Send.Len(); j++ {
			children[rd.Recv.Lo+j] = append(children[rd.Recv.Lo+j], rd.Send.Lo+j)
		}
	}
	return children
}
