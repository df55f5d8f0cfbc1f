package collectives

import (
	"context"
	"fmt"
	"math"
	"os"
	"time"
)

// Placement: whether the two ranks of a communicator run on CPUs that
// share a cache. It decides where one copy by cross-memory attach (Single)
// overtakes the two copies through the slots for the collectives that move
// data (singleMin): ranks that share a cache pass a slot's lines through
// it and the slots stay ahead up to larger calls; ranks on different dies
// load each other's lines slowly, and the copy that crosses between them
// once is ahead from smaller calls. A machine can move the ranks' CPUs (a
// virtual machine's hypervisor does), so the placement is measured while
// the program runs, by every rank at the same points: before an
// allgather(v), bcast, gather, scatter or alltoall (blocking, or a
// nonblocking one when it runs) whose size lies between the two
// placements' thresholds (placementBand), the first such call and every
// placementEvery-th after it, the ranks time barriers and agree the slower
// rank's time through an allreduce (ProbePlacement). The answer holds
// until the next probe. Every rank probes at the same calls and takes the
// same answer, so the selection that reads it stays agreed.

// Placement is what a communicator of two ranks knows of where its ranks
// run (Comm.Placement).
type Placement uint8

const (
	// PlacementUnknown: not measured: more or fewer than two ranks, ranks
	// that share CPUs, or no probe yet.
	PlacementUnknown Placement = iota
	// PlacementNear: a barrier of the two ranks takes less than
	// nearBarrier: they share a core or its cache.
	PlacementNear
	// PlacementFar: the ranks are further apart.
	PlacementFar
)

func (p Placement) String() string {
	switch p {
	case PlacementNear:
		return "near"
	case PlacementFar:
		return "far"
	}
	return "unknown"
}

// PlacementEnv names the environment variable that overrides what a
// placement probe measures on this rank: "near" or "far" ("" or "probe":
// measure). The ranks still time their barriers and agree through the
// allreduce, so ranks whose settings differ take the same answer: far
// if any rank says far.
const PlacementEnv = "SHMCOLL_PLACEMENT"

const (
	// nearBarrier: a pair whose barrier, a handoff each way, takes less
	// than this shares a core or its cache.
	nearBarrier = 200 * time.Nanosecond
	// sharedCPU: a barrier this slow switches contexts; a batch of them
	// ends the probe at once.
	sharedCPU      = 5 * time.Microsecond
	probeBatch     = 16 // barriers per batch; a warm-up batch, then the fastest of probeBatches counts
	probeBatches   = 3
	placementEvery = 128 // calls in the placement bands per probe
)

// placementOverride reads PlacementEnv.
func placementOverride() (Placement, error) {
	switch v := os.Getenv(PlacementEnv); v {
	case "", "probe":
		return PlacementUnknown, nil
	case "near":
		return PlacementNear, nil
	case "far":
		return PlacementFar, nil
	default:
		return PlacementUnknown, fmt.Errorf("%w: %s=%q: want near, far or probe", ErrInvalidArgument, PlacementEnv, v)
	}
}

// Placement returns what the last placement probe found (PlacementUnknown
// before the first, and always where the communicator does not have
// exactly two ranks with CPUs of their own).
func (c *Comm) Placement() Placement { return c.place }

// nearFlat reports whether a call of coll on bytes takes Flat because its
// two ranks share a cache: an allgather that one copy by cross-memory
// attach would serve at an unknown placement, where the flat allgather's
// two copies through the slots, whose pieces pass through the shared
// cache, are ahead (the selection table names other algorithms there,
// chosen among the slot algorithms without Single).
func nearFlat(coll Collective, bytes int, over bool, place Placement) bool {
	return place == PlacementNear && coll == CollAllgather &&
		bytes >= singleMin(coll, over, PlacementUnknown) && bytes < singleMin(coll, over, PlacementNear)
}

// placeable reports whether the communicator's selection depends on
// its placement: two ranks with CPUs of their own and cross-memory attach
// on (all agreed at join).
func (c *Comm) placeable() bool {
	return c.size == 2 && !c.ep.Oversubscribed() && c.singleOn()
}

// placementBand returns the sizes of coll's calls whose algorithm depends
// on the placement: [lo, hi), empty where it does not.
func placementBand(coll Collective) (lo, hi int) {
	n, f := singleMin(coll, false, PlacementNear), singleMin(coll, false, PlacementFar)
	if n == 0 {
		n = math.MaxInt // never at that placement
	}
	if f == 0 {
		f = math.MaxInt
	}
	return min(n, f), max(n, f)
}

// placed runs before a call of coll on bytes (equal on every rank, by the
// calling rules; a nonblocking call runs it when its turn comes): where
// the call lies in the placement band it counts it and probes the
// placement at the first such call and every placementEvery-th after it.
// It inlines to two comparisons for a smaller call or another p.
func (c *Comm) placed(ctx context.Context, coll Collective, bytes int) error {
	if c.size != 2 || bytes < placementMinBytes {
		return nil
	}
	return c.placedPair(ctx, coll, bytes)
}

// placementMinBytes is the smallest size of any placement band: smaller
// calls return from placed at once (TestPlacementSelection checks it).
const placementMinBytes = 1 << 20

func (c *Comm) placedPair(ctx context.Context, coll Collective, bytes int) error {
	if lo, hi := placementBand(coll); bytes < lo || bytes >= hi || c.closed || !c.placeable() {
		return nil // a closed communicator fails in start
	}
	c.placeCalls++
	if (c.placeCalls-1)%placementEvery != 0 {
		return nil
	}
	if _, err := c.ProbePlacement(ctx); err != nil {
		return fmt.Errorf("placement probe before %v: %w", coll, err)
	}
	return nil
}

// ProbePlacement measures the placement of a communicator of two ranks
// with CPUs of their own (on every other communicator it returns
// PlacementUnknown and makes no call): a collective call, on every rank.
// The ranks run a batch of barriers to warm up, then up to probeBatches
// timed batches until one is faster than nearBarrier per barrier; each
// rank takes the slower rank's time of each batch (an allreduce), so that
// all stop after the same batch and agree. PlacementEnv overrides this
// rank's time. The answer is kept (Placement) and chooses the algorithm
// of the calls that depend on it until the next probe. The probe's calls
// are not counted in Stats.
func (c *Comm) ProbePlacement(ctx context.Context) (Placement, error) {
	if c.size != 2 || c.ep.Oversubscribed() {
		return PlacementUnknown, nil
	}
	force, err := placementOverride()
	if err != nil {
		return PlacementUnknown, c.fail(err)
	}
	c.probes++
	// The probe's calls are not the program's: Stats stays as it was, and
	// store advice this rank gives (its hint word: up to which call it
	// asks for non-temporal stores) is extended by the calls the probe
	// made, so that the probe does not use up the window of the large
	// calls it runs between.
	last, total, seq0 := c.last, c.total, c.seq
	defer func() {
		c.last, c.total = last, total
		if h := c.ep.Hint(c.rank); h.Load() >= seq0 {
			h.Add(c.seq - seq0)
		}
	}()
	// A root-first barrier (ReduceBcast) takes two handoffs in a row, a
	// symmetric one a handoff each way at once: the limits scale by them.
	near, shared := nearBarrier, sharedCPU
	if c.rootFirst {
		near, shared = 2*near, 2*shared
	}
	best := time.Duration(math.MaxInt64)
	t := c.probeTime[:]
	for i := range probeBatches + 1 {
		t0 := time.Now()
		for range probeBatch {
			if err := Barrier(ctx, c); err != nil {
				return PlacementUnknown, err
			}
		}
		t[0] = int64(time.Since(t0) / probeBatch)
		switch force {
		case PlacementNear:
			t[0] = 0
		case PlacementFar:
			t[0] = math.MaxInt64
		}
		if err := Allreduce(ctx, c, nil, t, Max); err != nil {
			return PlacementUnknown, err
		}
		if i == 0 {
			continue
		}
		best = min(best, time.Duration(t[0]))
		if best < near || best > shared {
			break
		}
	}
	p := PlacementFar
	if best < near {
		p = PlacementNear
	}
	if p != c.place {
		c.place = p
		c.chosen = [numColls]choice{} // decisions that read the placement
	}
	return p, nil
}
