package collectives

import (
	"context"
	"fmt"
	"os"
	"strings"
)

// Collective names a collective operation.
type Collective uint8

// The collectives, named as in DESIGN.md (see [Collective.String]).
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

var collNames = [...]string{
	CollAllreduce:          "allreduce",
	CollReduceScatterBlock: "reduce_scatter_block",
	CollReduceScatter:      "reduce_scatter",
	CollAllgather:          "allgather",
	CollAllgatherv:         "allgatherv",
	CollBcast:              "bcast",
	CollReduce:             "reduce",
	CollBarrier:            "barrier",
	CollAlltoall:           "alltoall",
	CollAlltoallv:          "alltoallv",
	CollScatter:            "scatter",
	CollGather:             "gather",
	CollScan:               "scan",
	CollExscan:             "exscan",
	numColls:               "",
	collSplit:              "split",
	collGatherv:            "gatherv",
	collScatterv:           "scatterv",
}

func (c Collective) String() string {
	if int(c) < len(collNames) && collNames[c] != "" {
		return collNames[c]
	}
	return fmt.Sprintf("Collective(%d)", uint8(c))
}

// ParseCollective returns the collective named s ("allreduce", ...),
// case-insensitive.
func ParseCollective(s string) (Collective, error) {
	for c := range numColls {
		if strings.EqualFold(s, collNames[c]) {
			return c, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown collective %q", ErrInvalidArgument, s)
}

// Algorithm names an algorithm family.
type Algorithm uint8

const (
	// Auto lets the selection table choose.
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
	// ReduceBcast (allreduce): a pipelined reduce up one postorder binary
	// tree followed by a pipelined bcast down it; rank order is kept.
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
	// Taken without a pin from 1 MiB up (allgather: 4 MiB, 16 MiB when
	// ranks outnumber the CPUs) when every buffer of the call is in the
	// arena.
	Direct
	numAlgorithms
)

var algNames = [numAlgorithms]string{"auto", "flat", "circulant", "replicated",
	"nblock", "dualroot", "tree", "reducebcast",
	"rabenseifner", "rabenseifner21", "recdoubling", "bruck", "ring", "mst", "bde",
	"rabenseifnerodd", "direct"}

func (a Algorithm) String() string {
	if a < numAlgorithms {
		return algNames[a]
	}
	return fmt.Sprintf("Algorithm(%d)", uint8(a))
}

// ParseAlgorithm returns the algorithm named s ("auto", "flat",
// "circulant", "replicated", "nblock"), case-insensitive.
func ParseAlgorithm(s string) (Algorithm, error) {
	for a := range numAlgorithms {
		if strings.EqualFold(s, algNames[a]) {
			return a, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown algorithm %q", ErrInvalidArgument, s)
}

// impl runs one collective with one algorithm on the call in c.cur.
type impl func(c *Comm, ctx context.Context) error

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

// choose returns the algorithm for a call: the pinned one if any, else the
// selection table's entry for this (collective, p, oversubscription,
// size), else the heuristic selectAlgorithm. Its inputs (collective,
// bytes, p, commutativity, the pins, the table, whose hash the ranks
// compared when they joined) are the same on every rank of a correct
// program, and the choice is part of the call descriptor.
func (c *Comm) choose(coll Collective, bytes int, commutative bool) (Algorithm, error) {
	// The last choice per collective: the same arguments (and pin: tests
	// change it) choose the same.
	m := &c.chosen[coll]
	if m.ok && m.bytes == bytes && m.commutative == commutative && m.pin == c.pinned[coll] {
		return m.alg, nil
	}
	a, err := c.chooseNew(coll, bytes, commutative)
	if err == nil {
		*m = choice{ok: true, bytes: bytes, commutative: commutative, pin: c.pinned[coll], alg: a}
	}
	return a, err
}

// choice is a remembered choice of choose.
type choice struct {
	ok, commutative bool
	pin, alg        Algorithm
	bytes           int
}

func (c *Comm) chooseNew(coll Collective, bytes int, commutative bool) (Algorithm, error) {
	a := c.pinned[coll]
	if a == Auto {
		a = c.sel.lookup(coll, bytes, commutative)
	}
	if a == Auto {
		a = selectAlgorithm(coll, bytes, c.size, commutative, c.ep.Oversubscribed())
	}
	if algorithms[coll][a] == nil {
		return 0, fmt.Errorf("%w: algorithm %v does not implement %v", ErrInvalidArgument, a, coll)
	}
	if !commutative && !orderPreserving[coll][a] {
		return 0, fmt.Errorf("%w: %v for %v", ErrNotCommutative, a, coll)
	}
	return a, nil
}

// LastAlgorithm returns the algorithm of the current or last call (Auto
// before the first): what auto chose, or the pinned one.
func (c *Comm) LastAlgorithm() Algorithm { return c.cur.alg }

// Oversubscribed reports whether the ranks are processes that outnumber
// the machine's online CPUs (the same on every rank); selection table
// entries measured in the same condition apply.
func (c *Comm) Oversubscribed() bool { return c.ep.Oversubscribed() }

// selectAlgorithm is the fallback of auto selection: choose uses it when
// the selection table (the default of tune/default.txt, SHMCOLL_TUNE_FILE
// or Options.Table; see [Table]) has no entry for the call's collective,
// p, oversubscription and size, or when the operator is not commutative
// and the entry names neither an order-preserving algorithm nor an
// ordered alternative.
//
// On shared memory a round costs a cache-line hand-off per waiting rank
// and, when ranks outnumber cores, a context switch, so the heuristic
// prefers the fewest synchronizations that keep the bytes moved per rank
// near the minimum:
//   - allreduce: replicated (one synchronization) for small vectors (16
//     KiB; 64 KiB for two ranks), where doing p times the reduction work
//     costs less than a second hand-off; above that, circulant for two
//     ranks (half the vector copied in, the first reduction fused with the
//     copy-in, the last round straight into recv) and flat for more (two
//     synchronizations, 1/p of the reduction per rank).
//   - reduce: replicated (only the root reduces) for two ranks and small
//     vectors, flat above.
//   - reduce-scatter: circulant for two ranks (one round, copy-in fused
//     with the reduction) unless the vector fits in the counter's line
//     (tinyBytes: flat, which sends it there); flat above two ranks (one
//     synchronization instead of ceil(log2 p)).
//   - barrier: circulant (ceil(log2 p) rounds of one peer each instead of
//     every rank polling every other), but flat (one synchronization) when
//     the ranks are processes that outnumber the CPUs: each round then
//     costs turns on a shared CPU, not a cache-line hand-off (np=8 on 2
//     CPUs: barrier 36-41 µs circulant, 11-21 µs flat; the allreduce
//     after it 43-45 µs and 13-24 µs).
//   - everything else: flat (one synchronization per segment).
//
// Replicated and flat combine in rank order, so a non-commutative
// operator takes the same path; where the table says circulant it takes
// flat. The thresholds come from short, noisy runs of BenchmarkAllreduce
// and BenchmarkCollectives on the project's shared two-core machine
// (allreduce, float64, p = 2 at 1 MiB: circulant 156 µs, flat 245 µs,
// replicated 361 µs; at 64 KiB: replicated 7.8 µs, circulant 22 µs, flat
// 28 µs; best of three); the table that shmbench tune measures overrides
// them where it has entries (docs/TUNING.md).
//
// over (shm.Endpoint.Oversubscribed) depends only on p and the machine's
// online CPUs, so it is the same on every rank.
// HeuristicAlgorithm is the fallback's choice (selectAlgorithm) for a call
// of coll on bytes with p ranks: what auto picks where the selection table
// says nothing. oversubscribed is [Comm.Oversubscribed]'s value. shmbench
// tune keeps it unless another algorithm is clearly faster.
func HeuristicAlgorithm(coll Collective, bytes, p int, commutative, oversubscribed bool) Algorithm {
	if coll >= numColls || p < 1 {
		return Auto
	}
	return selectAlgorithm(coll, bytes, p, commutative, oversubscribed)
}

func selectAlgorithm(coll Collective, bytes, p int, commutative, over bool) Algorithm {
	switch coll {
	case CollAllreduce:
		if bytes <= 16<<10 || p == 2 && bytes <= 64<<10 {
			return Replicated
		}
		if p == 2 && commutative {
			return Circulant
		}
		return Flat
	case CollReduce:
		if p == 2 || bytes <= 16<<10 {
			return Replicated
		}
		return Flat
	case CollReduceScatterBlock, CollReduceScatter:
		if p == 2 && commutative && bytes > tinyBytes {
			return Circulant
		}
		return Flat
	case CollBarrier:
		if over {
			return Flat
		}
		return Circulant
	}
	return Flat
}

// envPins reads SHMCOLL_ALGO_<COLL> for every collective.
func envPins(pins *[numColls]Algorithm) error {
	for coll := range numColls {
		v := os.Getenv("SHMCOLL_ALGO_" + strings.ToUpper(coll.String()))
		if v == "" {
			continue
		}
		a, err := ParseAlgorithm(v)
		if err != nil {
			return fmt.Errorf("SHMCOLL_ALGO_%s: %w", strings.ToUpper(coll.String()), err)
		}
		pins[coll] = a
	}
	return nil
}
