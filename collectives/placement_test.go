package collectives

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/shmcoll/shmcoll/shm"
)

// TestPlacementSelection: allgather(v) takes Single from the size of the
// placement the communicator last measured, and Select says which.
func TestPlacementSelection(t *testing.T) {
	least := 0
	for coll := range numColls {
		if lo, hi := placementBand(coll); lo < hi && (least == 0 || lo < least) {
			least = lo
		}
	}
	if least != placementMinBytes {
		t.Errorf("the smallest placement band starts at %d, placementMinBytes is %d", least, placementMinBytes)
	}
	for _, tc := range []struct {
		coll   Collective
		bytes  int
		place  Placement
		single bool
	}{
		{CollAllgather, 6 << 20, PlacementFar, true},
		{CollAllgather, 6<<20 - 1, PlacementFar, false},
		{CollAllgather, 8 << 20, PlacementUnknown, true},
		{CollAllgather, 8 << 20, PlacementNear, false},
		{CollAllgather, 12<<20 - 1, PlacementNear, false},
		{CollAllgather, 12 << 20, PlacementNear, true},
		{CollAllgatherv, 6 << 20, PlacementFar, false},
		{CollAllgatherv, 8 << 20, PlacementFar, true},
		{CollAllgatherv, 8 << 20, PlacementUnknown, true},
		{CollAllgatherv, 8 << 20, PlacementNear, false},
		{CollAllgatherv, 12<<20 - 1, PlacementNear, false},
		{CollAllgatherv, 12 << 20, PlacementNear, true},
		{CollBcast, 4 << 20, PlacementNear, false},
		{CollBcast, 8 << 20, PlacementNear, true},
		{CollBcast, 4 << 20, PlacementFar, true},
		{CollBcast, 4 << 20, PlacementUnknown, true},
		{CollGather, 8 << 20, PlacementNear, false},
		{CollGather, 16 << 20, PlacementNear, true},
		{CollGather, 4 << 20, PlacementFar, true},
		{CollScatter, 8 << 20, PlacementNear, false},
		{CollScatter, 16 << 20, PlacementNear, true},
		{CollScatter, 1 << 20, PlacementFar, true},
		{CollAlltoall, 31 << 20, PlacementNear, false},
		{CollAlltoall, 8 << 20, PlacementFar, true},
		{CollAlltoall, 8 << 20, PlacementUnknown, true},
		{CollAllreduce, singleReduceFarMin, PlacementFar, true},
		{CollAllreduce, singleReduceFarMin - 1, PlacementFar, false},
		{CollAllreduce, 64 << 20, PlacementNear, false},
		{CollAllreduce, 64 << 20, PlacementUnknown, false},
		{CollReduce, singleReduceFarMin, PlacementFar, true},
		{CollReduceScatterBlock, singleReduceFarMin, PlacementFar, true},
		{CollReduceScatter, singleReduceFarMin, PlacementFar, true},
		{CollReduceScatter, 64 << 20, PlacementNear, false},
	} {
		call := Call{Coll: tc.coll, Bytes: tc.bytes, P: 2, CrossMemory: true, Placement: tc.place}
		a, why, err := Select(call, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if (a == Single) != tc.single {
			t.Errorf("%v of %d bytes at %v placement: %v (%s), want single %v", tc.coll, tc.bytes, tc.place, a, why, tc.single)
		}
		if a == Single && !strings.Contains(why, "at "+tc.place.String()+" placement") {
			t.Errorf("%v of %d bytes at %v placement: reason %q does not name the placement", tc.coll, tc.bytes, tc.place, why)
		}
		// A far pair's cold calls take flat (singleCold); the reason says so.
		if cold := a == Single && coldCovers(tc.coll, tc.bytes, 2, tc.place); cold != strings.Contains(why, fmt.Sprintf("from call %d of this collective and size", shm.HugeAfter)) {
			t.Errorf("%v of %d bytes at %v placement: reason %q, cold calls %v", tc.coll, tc.bytes, tc.place, why, cold)
		}
		// A reduction's cold calls take its slot algorithm (the
		// table's at that size).
		if tc.single && singleReduction(tc.coll) {
			tab, err := DefaultTable()
			if err != nil {
				t.Fatal(err)
			}
			sel := tab.selection(2, false)
			if alg := sel.lookup(tc.coll, tc.bytes, true); !strings.Contains(why, alg.String()+" before it") {
				t.Errorf("%v of %d bytes at %v placement: reason %q does not name %v for the cold calls", tc.coll, tc.bytes, tc.place, why, alg)
			}
		}
		// Near ranks take the flat allgather where Single would serve
		// an unknown placement.
		if flat := tc.coll == CollAllgather && tc.place == PlacementNear && !tc.single; flat && (a != Flat || !strings.Contains(why, "placement near")) {
			t.Errorf("%v of %d bytes at near placement: %v (%s), want flat by the placement", tc.coll, tc.bytes, a, why)
		}
		// Three ranks are never probed: the placement does not count.
		call.P = 3
		if a, _, _ := Select(call, Options{}); tc.coll == CollAllgather && (a == Single) != (tc.bytes >= 8<<20) {
			t.Errorf("%v of %d bytes, p = 3, placement %v: %v", tc.coll, tc.bytes, tc.place, a)
		}
	}
}

// placementCalls makes n allgathers of 8 MiB and n allgathervs of 8 MiB
// (both in the placement band) on c, checks every element and returns
// the algorithms the last ones took.
func placementCalls(c *Comm, n int) (ag, agv Algorithm, err error) {
	const m = 1 << 19 // int64 per block: 8 MiB in all
	r := c.Rank()
	send := make([]int64, m)
	recv := make([]int64, 2*m)
	for it := range n {
		for i := range send {
			send[i] = int64(r<<40 | it<<20 | i)
		}
		if err := Allgather(bg, c, send, recv); err != nil {
			return 0, 0, err
		}
		ag = c.LastAlgorithm()
		for i, v := range recv {
			if w := int64((i/m)<<40 | it<<20 | i%m); v != w {
				return 0, 0, fmt.Errorf("rank %d: allgather %d: recv[%d] = %#x, want %#x", r, it, i, v, w)
			}
		}
		if err := Allgatherv(bg, c, send, recv, []int{m, m}, nil); err != nil {
			return 0, 0, err
		}
		agv = c.LastAlgorithm()
		for i, v := range recv {
			if w := int64((i/m)<<40 | it<<20 | i%m); v != w {
				return 0, 0, fmt.Errorf("rank %d: allgatherv %d: recv[%d] = %#x, want %#x", r, it, i, v, w)
			}
		}
	}
	return ag, agv, nil
}

// errOversubscribed: the ranks share CPUs, where nothing is probed.
var errOversubscribed = errors.New("ranks share CPUs")

// TestPlacementProbe: two goroutine ranks probe their placement at the
// first allgather(v) in the band and every placementEvery-th after it,
// agree it, and choose by it (SHMCOLL_PLACEMENT near and far), the
// probe's calls uncounted in Stats; a bad SHMCOLL_PLACEMENT fails the
// call on both ranks, naming it.
func TestPlacementProbe(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want Placement
		alg  func(Algorithm) bool
	}{
		{"near", PlacementNear, func(a Algorithm) bool { return a != Single }},
		{"far", PlacementFar, func(a Algorithm) bool { return a == Single }},
		{"probe", 0, func(Algorithm) bool { return true }},
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Setenv(PlacementEnv, tc.env)
			const calls = placementEvery + 1 // of each: 2 placementEvery + 2 in the band, 3 probes
			err := Run(2, Options{}, func(c *Comm) error {
				if c.Oversubscribed() || c.CrossMemory() != nil {
					return errOversubscribed
				}
				if c.Placement() != PlacementUnknown {
					return fmt.Errorf("placement %v before any call", c.Placement())
				}
				ag, agv, err := placementCalls(c, calls)
				if err != nil {
					return err
				}
				if tc.want != 0 && c.Placement() != tc.want {
					return fmt.Errorf("rank %d: placement %v, want %v", c.Rank(), c.Placement(), tc.want)
				}
				if c.Placement() == PlacementUnknown {
					return fmt.Errorf("rank %d: no placement after %d calls in the band", c.Rank(), 2*calls)
				}
				if !tc.alg(ag) || !tc.alg(agv) {
					return fmt.Errorf("rank %d at %v placement: allgather took %v, allgatherv %v", c.Rank(), c.Placement(), ag, agv)
				}
				if c.probes != 3 {
					return fmt.Errorf("rank %d: %d probes in %d calls in the band, want 3", c.Rank(), c.probes, 2*calls)
				}
				if _, total := c.Stats(); total.Calls != 2*calls {
					return fmt.Errorf("rank %d: Stats counts %d calls, want %d", c.Rank(), total.Calls, 2*calls)
				}
				return nil
			})
			if errors.Is(err, errOversubscribed) {
				t.Skip("the ranks share CPUs or have no cross-memory attach: nothing is probed")
			}
			if err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("bad", func(t *testing.T) {
		t.Setenv(PlacementEnv, "close")
		errs := make([]error, 2)
		_ = Run(2, Options{}, func(c *Comm) error {
			if c.Oversubscribed() || c.CrossMemory() != nil {
				return nil
			}
			_, _, errs[c.Rank()] = placementCalls(c, 1)
			return nil
		})
		for r, err := range errs {
			if err == nil {
				continue // nothing probed
			}
			if !errors.Is(err, ErrInvalidArgument) && !errors.Is(err, ErrAborted) {
				t.Errorf("rank %d: %v, want ErrInvalidArgument or ErrAborted", r, err)
			}
			if r == 0 && !strings.Contains(err.Error(), PlacementEnv) {
				t.Errorf("rank %d: %v does not name %s", r, err, PlacementEnv)
			}
		}
	})
}

// TestPlacementProcesses: ranks that are processes agree the placement
// when their settings differ (far on one rank wins), and the selection
// follows it on both.
func TestPlacementProcesses(t *testing.T) {
	if os.Getenv(shm.EnvArena) != "" {
		t.Skip("in a child")
	}
	for _, tc := range []struct{ env0, env1, want string }{
		{"near", "near", "near"},
		{"near", "far", "far"},
		{"probe", "far", "far"},
	} {
		t.Run(tc.env0+","+tc.env1, func(t *testing.T) {
			runRanks(t, "TestPlacementChild", 2, func(r int) []string {
				return []string{PlacementEnv + "=" + []string{tc.env0, tc.env1}[r], "SHMCOLL_TEST_PLACEMENT=" + tc.want}
			})
		})
	}
}

// TestPlacementChild is one rank of TestPlacementProcesses.
func TestPlacementChild(t *testing.T) {
	want := os.Getenv("SHMCOLL_TEST_PLACEMENT")
	if os.Getenv(shm.EnvArena) == "" || want == "" {
		t.Skip("run by TestPlacementProcesses")
	}
	c, err := JoinEnv(bg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Oversubscribed() || c.CrossMemory() != nil {
		t.Skip("the ranks share CPUs or have no cross-memory attach: nothing is probed")
	}
	// Single takes these sizes warm (singleCold): the last of
	// shm.HugeAfter calls.
	ag, agv, err := placementCalls(c, shm.HugeAfter)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Placement().String(); got != want {
		t.Fatalf("rank %d: placement %s, want %s", c.Rank(), got, want)
	}
	if (ag == Single) != (want == "far") || (ag == Flat) != (want == "near") || (agv == Single) != (want == "far") {
		t.Fatalf("rank %d at %s placement: allgather took %v, allgatherv %v", c.Rank(), want, ag, agv)
	}
}

// TestPlacementKeepsAdvice: a probe's calls do not use up the store
// advice a rank gives (its hint word counts calls): the window left after
// the probe is the window before it.
func TestPlacementKeepsAdvice(t *testing.T) {
	err := Run(2, Options{}, func(c *Comm) error {
		if c.Oversubscribed() {
			return errOversubscribed
		}
		h := c.ep.Hint(c.Rank())
		h.Store(c.seq + 10)
		if _, err := c.ProbePlacement(bg); err != nil {
			return err
		}
		if left := h.Load() - c.seq; left != 10 {
			return fmt.Errorf("rank %d: the advice covers %d calls after the probe, want 10", c.Rank(), left)
		}
		return nil
	})
	if errors.Is(err, errOversubscribed) {
		t.Skip("the ranks share CPUs: nothing is probed")
	}
	if err != nil {
		t.Fatal(err)
	}
}
