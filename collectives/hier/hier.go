//go:build mpi

package hier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/shmcoll/shmcoll/collectives"
	"github.com/shmcoll/shmcoll/mpi"
	"github.com/shmcoll/shmcoll/shm"
)

// Algorithm chooses how a hierarchical collective splits its work.
type Algorithm uint8

// The algorithms (see the package documentation).
const (
	Auto      Algorithm = iota // MultiLane or Leader by size
	MultiLane                  // every local rank drives one lane
	Leader                     // only local rank 0 talks to other nodes
)

func (a Algorithm) String() string {
	switch a {
	case Auto:
		return "auto"
	case MultiLane:
		return "multilane"
	case Leader:
		return "leader"
	}
	return fmt.Sprintf("Algorithm(%d)", uint8(a))
}

// leaderBelow is where Auto switches from Leader to MultiLane, in bytes.
const leaderBelow = 64 << 10

// Options configure [New].
type Options struct {
	// Collectives configures the node-local communicators.
	Collectives collectives.Options
	// NodeSizes cuts each shared-memory node into emulated nodes of these
	// sizes (they must sum to the node's size); one value k means nodes of k
	// consecutive ranks, the last one smaller if k does not divide. Empty
	// means SHMCOLL_NODE_SIZE, and without it one node per shared-memory
	// group.
	NodeSizes []int
	// NodeOf, when set, puts the r-th rank of each shared-memory node on
	// emulated node NodeOf(r) (any integers >= 0; equal means same node) and
	// overrides NodeSizes: for example r%2 makes nodes whose ranks are not
	// consecutive, as some launchers place them.
	NodeOf func(r int) int
	// Algorithm pins the algorithm of every call (Auto: by size).
	Algorithm Algorithm
	// ReturnErrors makes a failed collective return its error (after
	// aborting the node's arena) instead of aborting the MPI job. Ranks of
	// other nodes may then wait in MPI forever: use it only when the caller
	// aborts the job itself.
	ReturnErrors bool
}

// arenaPrefix starts the name of every node arena, so that leak checks can
// tell ours from other shmcoll segments (a variable only so that the tests'
// ranks can tell theirs from those of other jobs running meanwhile).
var arenaPrefix = "hier-"

// ErrBadNodeSizes is returned by New when the emulated node sizes do not fit.
var ErrBadNodeSizes = errors.New("hier: bad node sizes")

// Comm is a hierarchical communicator: the ranks of an MPI communicator,
// grouped into nodes. Its calls are collective over all its ranks, made in
// the same order everywhere; one goroutine uses it at a time.
type Comm struct {
	world mpi.Comm // a duplicate of the parent: our traffic never meets the caller's
	node  mpi.Comm // the ranks of my node
	lane  mpi.Comm // local rank i of every node with one, ordered by node
	local *collectives.Comm

	nodeIdx   int
	nodeSizes []int // of every node, by node index
	lanes     int   // the smallest node's size: lanes every node takes part in
	where     []place
	first     []int // first[j]: where node j's ranks start in node order (earlier nodes' sizes summed)
	// contiguous: node j holds world ranks first[j] ... first[j]+nodeSizes[j]-1
	// in local-rank order (always so for SHMCOLL_NODE_SIZE nodes), so node
	// order is world order.
	contiguous   bool
	alg          Algorithm
	returnErrors bool
	scratch      []byte // crossReduce's
	work         []byte // the collectives' own (see work)
}

// place is where a world rank sits in the hierarchy.
type place struct{ node, local int }

// New forms the hierarchy over parent (collective over parent).
func New(ctx context.Context, parent mpi.Comm, opt Options) (_ *Comm, err error) {
	c := &Comm{alg: opt.Algorithm, returnErrors: opt.ReturnErrors}
	defer func() {
		if err != nil {
			c.free()
		}
	}()
	if c.world, err = parent.Dup(); err != nil {
		return nil, err
	}
	shared, err := c.world.SplitTypeShared(c.world.Rank())
	if err != nil {
		return nil, err
	}
	defer shared.Free()

	sizes := opt.NodeSizes
	if len(sizes) == 0 {
		if sizes, err = parseNodeSizes(os.Getenv("SHMCOLL_NODE_SIZE")); err != nil {
			return nil, err
		}
	}
	color, err := emulatedNode(sizes, shared.Rank(), shared.Size())
	if opt.NodeOf != nil {
		if color = opt.NodeOf(shared.Rank()); color < 0 {
			err = fmt.Errorf("%w: NodeOf(%d) = %d", ErrBadNodeSizes, shared.Rank(), color)
		}
	}
	// Every rank must take part in the splits below; agree on failure first.
	if agreeErr := agree(c.world, err); agreeErr != nil {
		return nil, agreeErr
	}
	if c.node, err = shared.Split(color, shared.Rank()); err != nil {
		return nil, err
	}

	// Leaders number the nodes in world-rank order and learn every node's size.
	leaderColor := -1
	if c.node.Rank() == 0 {
		leaderColor = 0
	}
	leaders, err := c.world.Split(leaderColor, c.world.Rank())
	if err != nil {
		return nil, err
	}
	info := []int64{0, 0}
	var all []int64
	if !leaders.IsNull() {
		info[0], info[1] = int64(leaders.Rank()), int64(leaders.Size())
		all = make([]int64, leaders.Size())
		err = mpi.Allgather(leaders, []int64{int64(c.node.Size())}, all)
		leaders.Free()
		if err != nil {
			return nil, err
		}
	}
	if err = mpi.Bcast(c.node, info, 0); err != nil {
		return nil, err
	}
	c.nodeIdx = int(info[0])
	if all == nil {
		all = make([]int64, info[1])
	}
	if err = mpi.Bcast(c.node, all, 0); err != nil {
		return nil, err
	}
	c.nodeSizes = make([]int, len(all))
	c.lanes = int(all[0])
	for i, s := range all {
		c.nodeSizes[i] = int(s)
		c.lanes = min(c.lanes, int(s))
	}
	if c.lane, err = c.world.Split(c.node.Rank(), c.nodeIdx); err != nil {
		return nil, err
	}
	// Where every world rank sits, for rooted collectives and gathers.
	pos := make([]int32, 2*c.world.Size())
	if err = mpi.Allgather(c.world, []int32{int32(c.nodeIdx), int32(c.node.Rank())}, pos); err != nil {
		return nil, err
	}
	c.where = make([]place, c.world.Size())
	c.first = make([]int, len(c.nodeSizes))
	for r := range c.where {
		c.where[r] = place{node: int(pos[2*r]), local: int(pos[2*r+1])}
	}
	c.contiguous = true
	for j := range c.first {
		if j > 0 {
			c.first[j] = c.first[j-1] + c.nodeSizes[j-1]
		}
	}
	for r, w := range c.where {
		if r != c.first[w.node]+w.local {
			c.contiguous = false
		}
	}

	// The node's arena, named by local rank 0.
	name := make([]byte, 64)
	if c.node.Rank() == 0 {
		copy(name, arenaPrefix+shm.NewName())
	}
	if err = mpi.Bcast(c.node, name, 0); err != nil {
		return nil, err
	}
	c.local, err = collectives.Join(ctx, string(bytes.TrimRight(name, "\x00")), c.node.Rank(), c.node.Size(), localOptions(opt.Collectives, shared.Size()))
	if agreeErr := agree(c.world, err); agreeErr != nil {
		if c.local != nil {
			c.local.Close()
			c.local = nil
		}
		return nil, agreeErr
	}
	return c, nil
}

// localOptions are the node-local communicator's options. The arena sees
// only its emulated node's ranks, but every rank of the shared-memory
// group competes for the machine's CPUs: when those outnumber the CPUs, a
// rank waiting in shared memory must not spin (unless the caller set the
// waits), since the rank it waits for is then likely waiting for a CPU,
// often in the middle of its MPI stage. It yields at once, as
// shm.Endpoint does for arenas whose own ranks outnumber the CPUs.
func localOptions(o collectives.Options, sharedRanks int) collectives.Options {
	if sharedRanks > runtime.NumCPU() && o.SpinFor == 0 {
		o.SpinFor = -1 // no spin
		if o.YieldFor == 0 {
			o.YieldFor = time.Millisecond
		}
	}
	return o
}

// agree returns an error on every rank when err is non-nil on any, so that
// no rank goes on to a collective the others have left.
func agree(w mpi.Comm, err error) error {
	bad := []int32{0}
	if err != nil {
		bad[0] = 1
	}
	if e := mpi.Allreduce(w, nil, bad, mpi.Max); e != nil {
		return errors.Join(err, e)
	}
	if err == nil && bad[0] != 0 {
		return errors.New("hier: another rank failed to form the hierarchy")
	}
	return err
}

// parseNodeSizes reads SHMCOLL_NODE_SIZE: "", "k" or "a,b,...".
func parseNodeSizes(s string) ([]int, error) {
	if s = strings.TrimSpace(s); s == "" {
		return nil, nil
	}
	var sizes []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%w: SHMCOLL_NODE_SIZE=%q: want k or a,b,... of positive integers", ErrBadNodeSizes, s)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

// emulatedNode returns the emulated node of the rank-th of size ranks.
func emulatedNode(sizes []int, rank, size int) (int, error) {
	switch len(sizes) {
	case 0:
		return 0, nil
	case 1:
		if sizes[0] < 1 {
			return 0, fmt.Errorf("%w: node size %d", ErrBadNodeSizes, sizes[0])
		}
		return rank / sizes[0], nil
	}
	sum, node := 0, -1
	for i, s := range sizes {
		if s < 1 {
			return 0, fmt.Errorf("%w: node size %d", ErrBadNodeSizes, s)
		}
		if node < 0 && rank < sum+s {
			node = i
		}
		sum += s
	}
	if sum != size {
		return 0, fmt.Errorf("%w: sizes %v sum to %d, the shared-memory node has %d ranks", ErrBadNodeSizes, sizes, sum, size)
	}
	return node, nil
}

// Rank is the calling rank in the parent communicator.
func (c *Comm) Rank() int { return c.world.Rank() }

// Size is the number of ranks.
func (c *Comm) Size() int { return c.world.Size() }

// Node returns the calling rank's node index, the number of nodes and its
// rank within the node.
func (c *Comm) Node() (index, nodes, localRank int) {
	return c.nodeIdx, len(c.nodeSizes), c.node.Rank()
}

// NodeSizes returns the number of ranks of every node, by node index.
func (c *Comm) NodeSizes() []int { return append([]int(nil), c.nodeSizes...) }

// Local is the node-local shared-memory communicator.
func (c *Comm) Local() *collectives.Comm { return c.local }

// Close releases the arena and the MPI communicators. Collective.
func (c *Comm) Close() error {
	var errs []error
	if c.local != nil {
		if err := c.local.Close(); err != nil && !errors.Is(err, collectives.ErrClosed) {
			errs = append(errs, err)
		}
		c.local = nil
	}
	errs = append(errs, c.free())
	return errors.Join(errs...)
}

func (c *Comm) free() error {
	var errs []error
	for _, m := range []*mpi.Comm{&c.lane, &c.node, &c.world} {
		if !m.IsNull() {
			errs = append(errs, m.Free())
			*m = mpi.Comm{}
		}
	}
	return errors.Join(errs...)
}
