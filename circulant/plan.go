package circulant

import "fmt"

// Op says what a rank does with the blocks it receives in a round.
type Op uint8

const (
	// OpReduce combines each received block into the local one:
	// R[Recv.Lo+j] = R[Recv.Lo+j] ⊕ T[j], local accumulator on the left.
	OpReduce Op = iota + 1
	// OpCopy stores each received block: R[Recv.Lo+j] = T[j].
	OpCopy
)

func (o Op) String() string {
	switch o {
	case OpReduce:
		return "reduce"
	case OpCopy:
		return "copy"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Kind is the collective a [Plan] implements.
type Kind uint8

const (
	// ReduceScatter is [RS] Algorithm 1: q rounds, p-1 blocks sent,
	// received and reduced per rank; block r ends complete in R[0] of rank r.
	ReduceScatter Kind = iota + 1
	// Allreduce is [RS] Algorithm 2: the ReduceScatter rounds followed by
	// the Allgather rounds; 2q rounds, 2(p-1) blocks sent and received,
	// p-1 reduced.
	Allreduce
	// Allgather is the second half of Allreduce on its own: R[0] of rank r
	// holds block r at the start; the skips are used in reverse order and
	// each rank sends R[0..c-1] and copies into R[s..s'-1]; q rounds, p-1
	// blocks sent and received.
	Allgather
)

func (k Kind) String() string {
	switch k {
	case ReduceScatter:
		return "reduce_scatter"
	case Allreduce:
		return "allreduce"
	case Allgather:
		return "allgather"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Span is the half-open index range [Lo, Hi).
type Span struct{ Lo, Hi int }

// Len returns Hi - Lo.
func (s Span) Len() int { return s.Hi - s.Lo }

// Round is what one rank does in one round of a [Plan]. Ranges are given
// twice: in blocks of the rank's rotated buffer R (see the package
// documentation), and in elements of that buffer.
//
// The rank exposes (sends) R[Send] to rank To, and receives Recv.Len()
// blocks from rank From, which it reduces into or copies to R[Recv]. Every
// rank runs the same program relative to its rank, so the blocks received
// are R[Send] of rank From: in From's rotated buffer they are the elements
// PeerElems. Send and Recv never overlap.
type Round struct {
	Skip      int  // s: To = Rank+s and From = Rank-s (mod p) when reducing, the opposite when copying
	To, From  int  // peer ranks
	Send      Span // blocks of R sent to To (R indices)
	Recv      Span // blocks of R that receive From's blocks (R indices)
	Op        Op   // reduce (reduce-scatter rounds) or copy (allgather rounds)
	SendElems Span // Send in elements of this rank's rotated buffer
	RecvElems Span // Recv in elements of this rank's rotated buffer
	PeerElems Span // the received blocks in elements of From's rotated buffer
}

// Plan is the complete round-by-round program of one rank for one
// collective of [RS] (Träff 2025) on a circulant graph. Build it once per
// (kind, p, rank, skips, block sizes) and reuse it: running it allocates
// nothing. Treat it as read-only; it is then safe for concurrent use.
type Plan struct {
	Kind   Kind
	P      int     // number of ranks
	Rank   int     // the rank this plan is for
	Skips  []int   // the skip sequence, descending from p to 1
	Rounds []Round // in execution order

	prefix []int // prefix[j] = elements in blocks 0..j-1 (absolute), len p+1; nil: one element per block
}

// NewPlan builds the plan of rank for kind on p ranks with the given skip
// sequence (nil means [HalvingSkips](p)) and block sizes: sizes[j] is the
// number of elements of (absolute) block j, the same on all ranks, zero
// allowed, as in MPI_Reduce_scatter; nil means one element per block, so
// that element ranges equal block ranges (multiply by the block length for
// MPI_Reduce_scatter_block). The plan keeps its own copies of skips and
// sizes.
func NewPlan(kind Kind, p, rank int, skips []int, sizes []int) (*Plan, error) {
	if kind < ReduceScatter || kind > Allgather {
		return nil, fmt.Errorf("%w: unknown plan kind %d", ErrInvalidArgument, kind)
	}
	if p < 1 {
		return nil, fmt.Errorf("%w: p = %d, want p >= 1", ErrInvalidArgument, p)
	}
	if rank < 0 || rank >= p {
		return nil, fmt.Errorf("%w: rank %d out of range [0, %d)", ErrInvalidArgument, rank, p)
	}
	if skips == nil {
		skips = HalvingSkips(p)
	} else {
		if err := CheckSkips(p, skips); err != nil {
			return nil, err
		}
		skips = append([]int(nil), skips...)
	}
	if sizes != nil && len(sizes) != p {
		return nil, fmt.Errorf("%w: %d block sizes for p = %d", ErrInvalidArgument, len(sizes), p)
	}
	pl := &Plan{Kind: kind, P: p, Rank: rank, Skips: skips}
	if sizes != nil {
		pl.prefix = make([]int, p+1)
		for j, n := range sizes {
			if n < 0 {
				return nil, fmt.Errorf("%w: block %d has size %d", ErrInvalidArgument, j, n)
			}
			pl.prefix[j+1] = pl.prefix[j] + n
			if pl.prefix[j+1] < pl.prefix[j] {
				return nil, fmt.Errorf("%w: block sizes overflow int", ErrInvalidArgument)
			}
		}
	}
	q := len(skips) - 1
	nr := q
	if kind == Allreduce {
		nr = 2 * q
	}
	pl.Rounds = make([]Round, 0, nr)
	if kind != Allgather {
		for k := 0; k < q; k++ {
			pl.Rounds = append(pl.Rounds, pl.rsRound(skips[k], skips[k+1]))
		}
	}
	if kind != ReduceScatter {
		for k := q - 1; k >= 0; k-- {
			pl.Rounds = append(pl.Rounds, pl.agRound(skips[k], skips[k+1]))
		}
	}
	return pl, nil
}

// rsRound is [RS] Algorithm 1's round with s' = sp, s = s: send R[s..s'-1]
// to r+s, receive s'-s blocks from r-s and reduce them into R[0..s'-s-1].
func (pl *Plan) rsRound(sp, s int) Round {
	c := sp - s
	from := pl.mod(pl.Rank - s)
	rd := Round{
		Skip: s, To: pl.mod(pl.Rank + s), From: from,
		Send: Span{s, sp}, Recv: Span{0, c}, Op: OpReduce,
	}
	pl.fillElems(&rd)
	return rd
}

// agRound is the allgather round of [RS] Algorithm 2 for the pair
// (s', s): send R[0..s'-s-1] to r-s, copy the s'-s blocks from r+s into
// R[s..s'-1].
func (pl *Plan) agRound(sp, s int) Round {
	c := sp - s
	rd := Round{
		Skip: s, To: pl.mod(pl.Rank - s), From: pl.mod(pl.Rank + s),
		Send: Span{0, c}, Recv: Span{s, sp}, Op: OpCopy,
	}
	pl.fillElems(&rd)
	return rd
}

func (pl *Plan) fillElems(rd *Round) {
	rd.SendElems = pl.ElemSpan(pl.Rank, rd.Send)
	rd.RecvElems = pl.ElemSpan(pl.Rank, rd.Recv)
	rd.PeerElems = pl.ElemSpan(rd.From, rd.Send)
}

func (pl *Plan) mod(x int) int {
	x %= pl.P
	if x < 0 {
		x += pl.P
	}
	return x
}

// Elems returns the number of elements of the whole (rotated) buffer.
func (pl *Plan) Elems() int { return pl.start(pl.P) }

// BlockSize returns the number of elements of absolute block j.
func (pl *Plan) BlockSize(j int) int { return pl.start(j+1) - pl.start(j) }

// start returns the element offset of absolute block j in the unrotated
// vector, 0 <= j <= p.
func (pl *Plan) start(j int) int {
	if pl.prefix == nil {
		return j
	}
	return pl.prefix[j]
}

// Block returns the absolute block index held in R[i] of rank x:
// (x+i) mod p.
func (pl *Plan) Block(x, i int) int { return pl.mod(x + i) }

// ElemOffset returns the element offset of R[i] in the rotated buffer of
// rank x, for 0 <= i <= p (i == p gives the buffer length). O(1).
func (pl *Plan) ElemOffset(x, i int) int {
	if x+i <= pl.P {
		return pl.start(x+i) - pl.start(x)
	}
	return pl.start(pl.P) - pl.start(x) + pl.start(x+i-pl.P)
}

// ElemSpan converts a span of R indices of rank x's rotated buffer to
// elements of that buffer.
func (pl *Plan) ElemSpan(x int, s Span) Span {
	return Span{pl.ElemOffset(x, s.Lo), pl.ElemOffset(x, s.Hi)}
}

// Counts returns the number of rounds and of blocks this rank sends,
// receives and reduces when it runs the plan.
func (pl *Plan) Counts() (rounds, sent, received, reduced int) {
	for _, rd := range pl.Rounds {
		sent += rd.Send.Len()
		received += rd.Recv.Len()
		if rd.Op == OpReduce {
			reduced += rd.Recv.Len()
		}
	}
	return len(pl.Rounds), sent, received, reduced
}

// RotateIn copies the vector v, laid out by absolute block (block j at
// element offset sum(sizes[:j])), into the rank's rotated buffer rot, so
// that R[i] = V[(rank+i) mod p]. Both must have [Plan.Elems] elements.
// This is the copy-in before the first round; it allocates nothing.
func RotateIn[T any](pl *Plan, rot, v []T) {
	pl.checkLen(len(rot), len(v))
	o := pl.start(pl.Rank)
	n := copy(rot, v[o:])
	copy(rot[n:], v[:o])
}

// RotateOut undoes [RotateIn]: v[block j] = R[(j-rank) mod p]. It is the
// copy-out after an allreduce or allgather.
func RotateOut[T any](pl *Plan, v, rot []T) {
	pl.checkLen(len(rot), len(v))
	o := pl.start(pl.Rank)
	n := copy(v[o:], rot)
	copy(v[:o], rot[n:])
}

func (pl *Plan) checkLen(a, b int) {
	if a != pl.Elems() || b != pl.Elems() {
		panic(fmt.Sprintf("circulant: buffers of %d and %d elements for a plan of %d", a, b, pl.Elems()))
	}
}
