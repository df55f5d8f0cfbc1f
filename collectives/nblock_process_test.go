package collectives

import (
	"fmt"
	"os"
	"testing"

	"github.com/shmcoll/shmcoll/shm"
)

// TestPipelinedProcesses runs the matrix with the n-block and tree
// algorithms pinned among real processes: the test binary re-executes
// itself as TestProcessChild (process_test.go) p times.
func TestPipelinedProcesses(t *testing.T) {
	if os.Getenv(shm.EnvArena) != "" {
		t.Skip("in a child")
	}
	algs := []Algorithm{Nblock, DualRoot, Tree}
	ps := []int{3, 4}
	if long {
		algs = []Algorithm{Nblock, DualRoot, Tree, ReduceBcast}
		ps = []int{2, 3, 4, 5, 8}
	}
	if testing.Short() {
		ps = []int{3}
	}
	for _, alg := range algs {
		for _, p := range ps {
			t.Run(fmt.Sprintf("alg=%v/p=%d", alg, p), func(t *testing.T) { runChildren(t, p, alg.String()) })
		}
	}
}

// TestNblockReduceFit runs the n-block reduce among two processes: where
// each has a CPU of its own (as here and on CI), a reduce of one segment
// takes fitCost's blocks (several from 16 KiB), and the root reduces one
// block per round; the sums are exact whatever the count.
func TestNblockReduceFit(t *testing.T) {
	if os.Getenv(shm.EnvArena) != "" {
		t.Skip("in a child")
	}
	runRanks(t, "TestNblockReduceFitChild", 2, func(int) []string { return nil })
}

// TestNblockReduceFitChild is one rank of TestNblockReduceFit.
func TestNblockReduceFitChild(t *testing.T) {
	if os.Getenv(shm.EnvArena) == "" {
		t.Skip("run by TestNblockReduceFit")
	}
	opt := pinAll(Nblock)
	opt.SlotBytes = 1 << 20 // segments of 512 KiB
	c, err := JoinEnv(bg, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, p := c.Rank(), c.Size()
	M := c.half / 4
	for _, n := range []int{100, 4 << 10, 16 << 10, 64 << 10, 3 * M / 2} { // int32: 400 B to 768 KiB
		recv := make([]int32, n)
		if err := Reduce(bg, c, vec(r, n), recv, Sum, 0); err != nil {
			t.Fatal(err)
		}
		last, _ := c.Stats()
		blocks, all := c.nblocks(1, 4*n, n, true, true), 0
		for base := 0; base < n; base += M { // the second segment keeps the papers' count
			m := min(M, n-base)
			all += c.nblocks(1, 4*m, m, true, n <= M)
		}
		if r == 0 {
			expect(t, fmt.Sprintf("reduce n=%d", n), recv, sumAll(p, n))
			if last.Rounds != uint64(all) {
				t.Errorf("n=%d: the root reduced in %d rounds, want one per block: %d", n, last.Rounds, all)
			}
		}
		if fit := !c.ep.Oversubscribed(); fit && n >= 16<<10 && blocks < 2 {
			t.Errorf("n=%d: %d block for ranks with CPUs of their own", n, blocks)
		} else if !fit && blocks != c.nblocks(1, 4*n, n, true, false) {
			t.Errorf("n=%d: oversubscribed ranks took %d blocks, not machineCost's", n, blocks)
		}
	}
	t.Logf("rank %d: oversubscribed %v", r, c.ep.Oversubscribed())
}
