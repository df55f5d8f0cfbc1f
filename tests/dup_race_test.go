package tests

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shmcoll/shmcoll/collectives"
)

// TestDupAbortRace: 7 process ranks repeat Dup, an Abort of the new
// communicator by rank 0 as soon as its Dup returns, and a Barrier on the
// parent. Once any rank's Dup has returned, the join of the new
// communicator is complete, so the abort must not fail a slower rank's
// Dup: Dup succeeds on every rank, and the parent stays usable. The race
// needs a rank to be preempted at the wrong moment, hence processes that
// outnumber the CPUs and many iterations: the ranks stop after 3000
// iterations or 30 s (SHMCOLL_LONG=1: 20,000 iterations or 5 minutes),
// whichever comes first.
func TestDupAbortRace(t *testing.T) {
	if os.Getenv(envMode) != "" {
		t.Skip("in a rank")
	}
	iters, budget := 3000, 30*time.Second
	if testing.Short() {
		iters = 300
	}
	if longMode() {
		iters, budget = 20000, 5*time.Minute
	}
	res := runRanks(t, 7, "dupabort", envDupIters+"="+strconv.Itoa(iters), envDupBudget+"="+budget.String())
	for r, x := range res {
		if x.err != nil || !strings.Contains(x.out, "dup race: ok") {
			t.Errorf("rank %d: %v\n%s", r, x.err, x.out)
		}
	}
	t.Logf("rank 0: %s", lineWith(res[0].out, "dup race:"))
}

const (
	envDupIters  = "SHMCOLL_TESTS_DUP_ITERS"
	envDupBudget = "SHMCOLL_TESTS_DUP_BUDGET"
)

// dupAbortRank is one rank of TestDupAbortRace. Rank 0 decides when to
// stop (iterations or time budget) and tells the others through an
// allreduce that doubles as the parent's barrier.
func dupAbortRank(t *testing.T, c *collectives.Comm) {
	iters, err := strconv.Atoi(os.Getenv(envDupIters))
	if err != nil {
		t.Fatal(err)
	}
	budget, err := time.ParseDuration(os.Getenv(envDupBudget))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), budget+time.Minute)
	defer cancel()
	start := time.Now()
	mine, stop := []int32{0}, []int32{0}
	for n := 0; ; n++ {
		d, err := c.Dup(ctx)
		if err != nil {
			t.Fatalf("iteration %d: Dup: %v", n, err)
		}
		if c.Rank() == 0 {
			d.Abort(errors.New("rank 0 aborts the duplicate"))
		}
		d.Close()
		if c.Rank() == 0 && (n+1 >= iters || time.Since(start) > budget) {
			mine[0] = 1
		}
		if err := collectives.Allreduce(ctx, c, mine, stop, collectives.Max); err != nil {
			t.Fatalf("iteration %d: allreduce on the parent: %v", n, err)
		}
		if stop[0] != 0 {
			fmt.Printf("dup race: ok, %d iterations in %v\n", n+1, time.Since(start).Round(time.Millisecond))
			return
		}
	}
}

// lineWith returns the first line of out that contains s.
func lineWith(out, s string) string {
	for line := range strings.Lines(out) {
		if strings.Contains(line, s) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}
