// Package circulant is the schedule mathematics of shmcoll: skip
// sequences, per-round plans and n-block schedules for collectives on the
// circulant graph of p ranks, and verifiers that prove them correct. It is
// pure code (no I/O, no unsafe, no shared state); the collectives run it.
//
// Two papers by J. L. Träff are implemented:
//
//   - [RS] "Optimal, Non-pipelined Reduce-scatter and Allreduce
//     Algorithms" (2025): reduce-scatter in q = ceil(log2 p) rounds with
//     p-1 blocks sent, received and reduced per rank (Algorithm 1),
//     allreduce as reduce-scatter plus the reversed allgather (Algorithm
//     2), any valid skip sequence (Corollary 2), irregular blocks, and
//     alltoall by concatenation. See [Plan], [NewPlan], [AlltoallPlan].
//   - [BC] "Optimal Broadcast Schedules in Logarithmic Time ..." (2024):
//     the round-optimal n-block broadcast schedules (baseblock, receive and
//     send schedule of any rank in O(log p)), and their use for broadcast,
//     reduction, allgatherv and reduce-scatter. See [Schedules].
//
// # Skip sequences
//
// A skip sequence s[0] = p > s[1] > ... > s[q] = 1 defines the rounds:
// round k of a reduce-scatter uses the pair (s', s) = (s[k], s[k+1]). The
// default is [HalvingSkips] (s[k+1] = ceil(s[k]/2)); [PowerOfTwoSkips],
// [LinearSkips] and [SqrtSkips] are the alternatives of [RS] Corollary 2,
// and [CheckSkips] decides whether any sequence is usable.
//
// # Data layout of the round plans
//
// Each rank r keeps its p blocks rotated: R[i] holds (a partial result of)
// absolute block (r+i) mod p, so R[0] is the rank's own block. With block
// sizes n[j], R[i] starts at element sum of n[(r+t) mod p] for t < i, and
// consecutive R indices are consecutive elements: every range a round
// sends or receives is one contiguous element range. [RotateIn] makes R
// from a vector laid out by absolute block; [RotateOut] undoes it.
//
// In a reduce-scatter round with pair (s', s) rank r sends R[s..s'-1] to
// rank (r+s) mod p and receives s'-s blocks from rank (r-s) mod p, which
// are that rank's R[s..s'-1] and line up with r's R[0..s'-s-1]. In shared
// memory the receiver reads them straight from the sender's buffer
// ([Round.PeerElems]). A sent range is never written again in the
// reduce-scatter, and a round's send and receive ranges never overlap, so
// no acknowledgement is needed within the reduce-scatter. An allgather
// round for the pair (s', s) sends R[0..s'-s-1] to (r-s) mod p and copies
// the s'-s blocks from (r+s) mod p into R[s..s'-1]. In an allreduce those
// are the blocks r sent to (r+s) in the reduce-scatter round of the same
// pair; (r+s) read them before it could finish its reduce-scatter and
// produce what r now copies, so overwriting them is safe by structure.
//
// # Reduction order
//
// A reduce round computes R[j] = R[j] ⊕ T[j] with the local accumulator on
// the left and the received partial T[j] on the right, for j ascending.
// Rank r's result is therefore ((x_r ⊕ P_0) ⊕ P_1) ⊕ ... ⊕ P_{q-1}, where
// P_k is the partial result received in round k from rank r - s[k+1],
// built the same way; the tree has the same shape on every rank and every
// run, relabelled by rank ([ReduceScatterExpr] prints it). For p = 22 and
// r = 21 it is [RS]'s example
//
//	x21+x10+(x15+x4)+(x18+x7+(x12+x1))+(x19+x8+(x13+x2)+(x16+x5))+(x20+x9+(x14+x3)+(x17+x6+(x11+x0)))
//
// Each result block is computed at exactly one rank and then only copied,
// so an allreduce gives bitwise-identical floats on all ranks. The order
// relies on the operator being commutative (as [RS] assumes): a rank's own
// input is not combined in rank order.
//
// # n-block schedules
//
// [Schedules] gives, for p ranks and any rank r relative to root 0, the
// baseblock and the receive and send schedules recv[k], send[k] of [BC]:
// in round k of every phase r receives block recv[k] from r - skip[k] and
// sends block send[k] to r + skip[k] (mod p), skip = [SkipTable](p). The n
// blocks move in NumRounds(n) = n-1+q rounds: phase offsets shift the
// blocks by q per phase, a few leading virtual rounds are skipped, and the
// last phase caps blocks at n-1 ([Schedules.Round], [CapBlock]). For
// another root r0 rank r uses the schedules of (r - r0) mod p.
//
//   - Broadcast from any root: [Schedules.ForRank] and
//     [RankSchedule.BroadcastRound].
//   - Reduction to a root: [RankSchedule.ReduceRound], the broadcast
//     backwards with every transfer reversed; every non-root sends each
//     partial block once, after all its contributions arrived.
//   - Allgatherv ([BC] Algorithm 7) and reduce-scatter: p simultaneous
//     broadcasts or reductions, one message per round carrying a block of
//     each root; [Schedules.NewTable] holds all ranks' schedules and
//     [Table.AllgathervSend], [Table.AllgathervRecv],
//     [Table.ReduceScatterSend] and [Table.ReduceScatterRecv] name the
//     blocks.
//
// # Verification
//
// [CheckSkips], [VerifyPlans] (the rotation and reduction-tree argument,
// O(p) per p), [SimulatePlans] (all ranks against each other),
// [VerifySchedules] (the four correctness conditions of [BC] section 2)
// and [VerifyBroadcast] (broadcast and reduction among all ranks) are the
// proofs the tests run exhaustively over ranges of p; they are exported so
// that a collective can check an unusual configuration before it runs.
package circulant
