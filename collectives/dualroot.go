package collectives

import "context"

// The doubly pipelined dual-root binary-tree allreduce of Träff (002): the
// ranks form two balanced postorder-numbered binary trees, ranks
// [0, ceil(p/2)) and [ceil(p/2), p); every block goes up both trees at
// once (each rank reducing (first subtree) op (second subtree) op own
// input), the two roots exchange their partial blocks and both compute
// the result block (lower tree) op (upper tree), which then goes down
// both trees while later blocks still go up. Rank order is kept
// everywhere, so non-commutative operators are correct, and the two roots
// compute bitwise the same result. The loop, its phases and why no slot
// range is rewritten before its readers are done: tree.go (treeDual).
//
// Counts per block: a rank with k children receives and reduces k partial
// blocks and exposes one to its parent, and receives one result block and
// exposes it to its children if it has any: at most three hand-offs and
// two reductions a round; a root also reduces the other root's block.
// Number of blocks: the pipelining lemma on 6h+1+3(n-1) steps (h the
// tree height), see treeKind.lead.

func init() {
	register(CollAllreduce, DualRoot, func(c *Comm, ctx context.Context) error { return c.treeAllreduce(ctx, treeDual) }, true)
}
