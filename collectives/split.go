package collectives

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/shmcoll/shmcoll/shm"
)

// Split partitions the communicator: the ranks that pass the same color
// form a new communicator, in which they are ordered by key, ties broken by
// their rank here. A negative color leaves the calling rank out (it gets a
// nil Comm). Every rank of c must call Split. The new communicator has its
// own arena, with c's options and slot size; the ranks agree on its name
// through c's arena (one step in which every rank publishes its color,
// key and a fresh name; each group takes the name of its new rank 0).
func (c *Comm) Split(ctx context.Context, color, key int) (*Comm, error) {
	a, err := c.start(ctx, collSplit, 0)
	if err != nil {
		return nil, err
	}
	c.describe(a)
	e, err := c.begin(ctx)
	if err != nil {
		return nil, err
	}
	const entry = 128
	le := binary.LittleEndian
	mine := c.ep.Descriptor(c.rank)[int(e&1)*entry:][:entry]
	le.PutUint64(mine[0:], uint64(int64(color)))
	le.PutUint64(mine[8:], uint64(int64(key)))
	name := shm.NewName()
	mine[16] = byte(len(name))
	copy(mine[17:], name)
	c.post(e, 1)
	type member struct{ key, rank int }
	var group []member
	for q := range c.size {
		if q != c.rank {
			if err := c.wait(ctx, q, e, 1); err != nil {
				return nil, err
			}
		}
		d := c.ep.Descriptor(q)[int(e&1)*entry:][:entry]
		if color >= 0 && int(int64(le.Uint64(d[0:]))) == color {
			group = append(group, member{int(int64(le.Uint64(d[8:]))), q})
		}
	}
	c.last.Rounds++
	c.full = true
	c.end(e)
	if color < 0 {
		return nil, nil
	}
	// group is in rank order: the stable sort breaks ties by rank.
	slices.SortStableFunc(group, func(a, b member) int { return cmp.Compare(a.key, b.key) })
	newRank := slices.IndexFunc(group, func(m member) bool { return m.rank == c.rank })
	d := c.ep.Descriptor(group[0].rank)[int(e&1)*entry:][:entry]
	n := int(d[16])
	if n > entry-17 {
		return nil, c.fail(fmt.Errorf("corrupt split entry of rank %d", group[0].rank))
	}
	leaderName := string(d[17 : 17+n])
	opt := c.opt
	opt.SlotBytes = c.ep.SlotBytes()
	opt.HeapBytes = c.ep.HeapBytes()
	tc, err := tableOf(opt)
	if err != nil {
		return nil, c.fail(err)
	}
	// The join watches c's arena: a rank of the group that dies before it
	// joins, or a failure anywhere in c, ends it within c's timeout.
	so := opt.shm(tc.hash)
	so.Parent = c.ep
	so.ParentRanks = make([]int, len(group))
	for i, m := range group {
		so.ParentRanks[i] = m.rank
	}
	join := shm.Join
	if c.ep.InProcess() {
		join = shm.JoinLocal
	}
	ep, err := join(ctx, leaderName, newRank, len(group), so)
	if err != nil {
		return nil, c.fail(fmt.Errorf("joining the new communicator: %w", err))
	}
	return wrap(ep, nil, opt, tc)
}

// Dup returns a new communicator with the same ranks in the same order and
// its own arena. Every rank of c must call it.
func (c *Comm) Dup(ctx context.Context) (*Comm, error) {
	return c.Split(ctx, 0, c.rank)
}
