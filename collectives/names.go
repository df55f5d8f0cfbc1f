package collectives

import (
	"context"
	"fmt"
	"strings"
)

// Collective names a collective operation.
type Collective uint8

// The collectives (see [Collective.String] for their names).
const (
	CollAllreduce Collective = iota
	CollReduceScatterBlock
	CollReduceScatter
	CollAllgather
	CollAllgatherv
	CollBcast
	CollReduce
	CollBarrier
	CollAlltoall
	CollAlltoallv
	CollScatter
	CollGather
	CollScan
	CollExscan
	numColls
	collSplit // internal: Split and Dup agreement
)

// collNames are the names by Collective, in the order of the constants.
var collNames = [...]string{"allreduce", "reduce_scatter_block", "reduce_scatter", "allgather",
	"allgatherv", "bcast", "reduce", "barrier", "alltoall", "alltoallv", "scatter", "gather", "scan",
	"exscan", collSplit: "split", collGatherv: "gatherv", collScatterv: "scatterv"}

// String returns the collective's name as [ParseCollective] reads it
// ("allreduce", "reduce_scatter_block", ...).
func (c Collective) String() string {
	if int(c) < len(collNames) && collNames[c] != "" {
		return collNames[c]
	}
	return fmt.Sprintf("Collective(%d)", uint8(c))
}

// ParseCollective returns the collective named s ("allreduce", ...),
// case-insensitive.
func ParseCollective(s string) (Collective, error) {
	return parseName[Collective]("collective", collNames[:numColls], s)
}

// parseName returns the value whose name in names is s, case-insensitive.
func parseName[T ~uint8](what string, names []string, s string) (T, error) {
	for v, name := range names {
		if strings.EqualFold(s, name) {
			return T(v), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown %s %q", ErrInvalidArgument, what, s)
}

// Algorithm names an algorithm family.
type Algorithm uint8

const (
	// Auto lets selection choose: a pin, Direct for arena buffers, the
	// selection table or the heuristic (see [Select]).
	Auto Algorithm = iota
	// Flat: every rank reads what it needs straight from the other ranks'
	// slots; reductions are split so that each rank reduces 1/p of the
	// vector from all p slots in rank order, one pass, with the k-way kernel.
	Flat
	// Circulant: the round patterns of Träff's circulant reduce-scatter and
	// allreduce (000), their reversal for allgather, concatenation for
	// alltoall, and one block on the circulant tree for bcast and reduce.
	Circulant
	// Replicated (allreduce, reduce): every rank (the root for reduce)
	// reduces the whole vector from all p slots in rank order: one
	// synchronization instead of two or more, p times the reduction work;
	// the latency choice for small vectors.
	Replicated
	// Nblock: Träff's round-optimal n-block schedules on the circulant
	// graph (004): pipelined bcast in n-1+ceil(log2 p) rounds, reduce by
	// the reversed schedule, allgather(v) as p simultaneous broadcasts
	// (Algorithm 7), reduce-scatter as p simultaneous reductions, and
	// allreduce as that reduce-scatter followed by that allgatherv
	// (2(n-1+ceil(log2 p)) rounds); n from the linear cost model. Reduce,
	// reduce-scatter and allreduce need a commutative operator.
	Nblock
	// DualRoot (allreduce): Träff's doubly pipelined dual-root binary tree
	// (002), two postorder-numbered trees reducing up and broadcasting
	// down at once; rank order is kept.
	DualRoot
	// Tree (allreduce, reduce, bcast): one postorder binary tree of 002
	// with the pipelining lemma's block count: allreduce doubly pipelined
	// (up and down at once); reduce pipelined up it and bcast down it, a
	// root other than rank p-1 joined by one hand-off (n-1+floor(log2 p)
	// rounds, one more with the hand-off); rank order is kept.
	Tree
	// ReduceBcast (allreduce, barrier): a pipelined reduce up one
	// postorder binary tree followed by a pipelined bcast down it; rank
	// order is kept. Barrier: every rank posts its arrival and waits for
	// rank 0, which posts once all have arrived, so rank 0 leaves first
	// (the order of MPICH's barrier; libshmcoll pins it under MPICH). Only
	// by a pin: auto takes the symmetric barriers.
	ReduceBcast
	// Rabenseifner (allreduce, reduce, reduce-scatter): recursive halving
	// reduce-scatter and recursive doubling allgather (001) on adjacent
	// pairs, so rank order is kept; levels whose range is small exchange
	// the whole range instead (the mixed protocol); a p that is not a
	// power of two is reduced by 3-to-2 elimination (triples).
	Rabenseifner
	// Rabenseifner21: Rabenseifner with 2-to-1 elimination (pairs of
	// ranks fold into one before the butterfly).
	Rabenseifner21
	// RecDoubling (allreduce, reduce): the latency-optimized full-buffer
	// exchange of 001: floor(log2 p) rounds of whole-vector exchange,
	// and 3-to-2 elimination for a p that is not a power of two.
	RecDoubling
	// Bruck (allgather, allgatherv, allreduce): Bruck's concatenation
	// allgather in ceil(log2 p) rounds for any p; allreduce reduces block r
	// of all ranks in rank order first (one k-way pass), then gathers.
	Bruck
	// Ring (allreduce, reduce-scatter, allgather(v), bcast): the ring
	// algorithms of 003, p-1 rounds per phase; bcast is an MST scatter
	// followed by the ring allgather.
	Ring
	// MST (bcast, reduce, scatter, gather): minimum spanning (binomial)
	// trees of 003 on halves of the rank range; reduce keeps rank order.
	MST
	// BDE (allgather(v), reduce-scatter, allreduce): bidirectional
	// exchange of 003 on halves of the rank range, any p.
	BDE
	// RabenseifnerOdd (allreduce, reduce-scatter): 001's factorization
	// p = 2^n q, q odd: the odd factor by the "ring" of the paper (an
	// alltoall and local reduction in rank order within groups of q
	// adjacent ranks, and an allgather at the end), the butterfly across
	// the 2^n groups; rank order is kept.
	RabenseifnerOdd
	// Direct (allreduce, reduce-scatter, allgather(v), bcast): for buffers
	// from [Alloc] on every rank, the ranks read each other's buffers in
	// place, with no copy into the slots; reductions are split as in Flat.
	// Taken without a pin for large calls whose buffers are all in the
	// arena (see [Select]).
	Direct
	// Single (allgather(v), bcast, alltoall(v), gather(v), scatter(v),
	// allreduce, reduce, reduce-scatter): one copy for private buffers by
	// cross-memory attach: every rank publishes the addresses of its
	// buffer's blocks, and the ranks that need them read them (gather:
	// write into the root's buffer; the reductions: read every peer's
	// input block, write the reduced block into the peers' recvs)
	// straight from the owner's memory, with no copy into the slots.
	// Taken without a pin above a size per collective when cross-memory
	// attach is on for the communicator (see [Comm.CrossMemory]; the
	// reductions only where two ranks run far apart, see [Select]). An alltoallv's sizes
	// differ per rank, so its Flat and Single are one algorithm in which
	// each sender chooses (Single pinned: every sender; Flat selected:
	// the senders whose bytes take Single for an alltoall; Flat pinned:
	// none) and announces its choice to its readers.
	Single
	numAlgorithms
)

var algNames = [numAlgorithms]string{"auto", "flat", "circulant", "replicated",
	"nblock", "dualroot", "tree", "reducebcast",
	"rabenseifner", "rabenseifner21", "recdoubling", "bruck", "ring", "mst", "bde",
	"rabenseifnerodd", "direct", "single"}

// String returns the algorithm's name as [ParseAlgorithm] reads it.
func (a Algorithm) String() string {
	if a < numAlgorithms {
		return algNames[a]
	}
	return fmt.Sprintf("Algorithm(%d)", uint8(a))
}

// ParseAlgorithm returns the algorithm named s, case-insensitive: one of
// auto, flat, circulant, replicated, nblock, dualroot, tree, reducebcast,
// rabenseifner, rabenseifner21, recdoubling, bruck, ring, mst, bde,
// rabenseifnerodd, direct, single (the names [Algorithm.String] returns).
func ParseAlgorithm(s string) (Algorithm, error) {
	return parseName[Algorithm]("algorithm", algNames[:], s)
}

// impl runs one collective with one algorithm on call a, the
// communicator's current call.
type impl func(c *Comm, ctx context.Context, a *call) error

// algorithms is the registry: which algorithm implements which collective.
// A missing entry means the algorithm does not serve that collective.
var algorithms [numColls][numAlgorithms]impl

// orderPreserving marks the (collective, algorithm) pairs that combine
// operands in rank order, so that they are correct for non-commutative
// operators.
var orderPreserving [numColls][numAlgorithms]bool

func register(coll Collective, alg Algorithm, f impl, ordered bool) {
	algorithms[coll][alg] = f
	orderPreserving[coll][alg] = ordered
}

// Implements reports whether algorithm a implements coll.
func Implements(coll Collective, a Algorithm) bool {
	return coll < numColls && a < numAlgorithms && algorithms[coll][a] != nil
}

// OrderPreserving reports whether algorithm a combines the operands of
// coll in rank order, so that it is correct for non-commutative operators.
func OrderPreserving(coll Collective, a Algorithm) bool {
	return Implements(coll, a) && orderPreserving[coll][a]
}
