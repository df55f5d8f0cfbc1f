package shm

import "fmt"

// checkParent validates opt.Parent and opt.ParentRanks for rank of an
// arena of size ranks.
func (o Options) checkParent(rank, size int) error {
	p := o.Parent
	if p == nil {
		if o.ParentRanks != nil {
			return fmt.Errorf("%w: ParentRanks without a Parent", ErrBadSize)
		}
		return nil
	}
	if o.ParentRanks != nil && len(o.ParentRanks) != size {
		return fmt.Errorf("%w: %d ParentRanks for %d ranks", ErrBadSize, len(o.ParentRanks), size)
	}
	for r := range size {
		if pr := o.parentRank(r); pr < 0 || pr >= p.size {
			return fmt.Errorf("%w: rank %d is rank %d of a parent of %d ranks", ErrBadSize, r, pr, p.size)
		}
	}
	if pr := o.parentRank(rank); pr != p.rank {
		return fmt.Errorf("%w: rank %d is rank %d of the parent, not its own %d", ErrBadSize, rank, pr, p.rank)
	}
	return nil
}

// parentRank returns rank r's rank in o.Parent.
func (o Options) parentRank(r int) int {
	if o.ParentRanks == nil {
		return r
	}
	return o.ParentRanks[r]
}

// parentErr is the error that ends rank's join of an arena of size ranks
// because of o.Parent, or nil: the parent is aborted or closed, or a rank
// that has not joined the new arena e (nil: not mapped yet, no rank counts
// as joined) died or left the parent, which this aborts.
func (o Options) parentErr(e *Endpoint, rank, size int) error {
	p := o.Parent
	if p == nil {
		return nil
	}
	if err := p.Err(); err != nil {
		return fmt.Errorf("shm: rank %d joining: parent arena: %w", rank, err)
	}
	for r := range size {
		pr := o.parentRank(r)
		if r == rank || pr == p.rank {
			continue
		}
		var kind uint32
		pid := 0
		if p.u32(pr, cState).Load() == stateLeft {
			kind = abortPeerLeft
		} else if p.peers != nil {
			var dead bool
			if pid, dead = p.peers.dead(pr); dead {
				kind = abortPeerDead
			}
		}
		if kind == 0 {
			continue
		}
		// A rank that joined and then died is the new arena's to detect;
		// it may also have completed the join and left since.
		if e != nil {
			if st := e.u32(r, cState).Load(); st == stateJoined || st == stateLeft {
				continue
			}
		}
		p.abort(kind, pr, pid, "")
		return fmt.Errorf("shm: rank %d joining: parent arena: %w", rank, p.Err())
	}
	return nil
}
