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
