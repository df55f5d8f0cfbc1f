package collectives

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
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
			t.Run(fmt.Sprintf("alg=%v/p=%d", alg, p), func(t *testing.T) { runProcesses(t, alg, p) })
		}
	}
}

// runProcesses runs TestProcessChild as p processes of one arena with
// alg pinned.
func runProcesses(t *testing.T, alg Algorithm, p int) {
	name := shm.NewName()
	out := make([][]byte, p)
	errs := make([]error, p)
	var wg sync.WaitGroup
	for r := range p {
		cmd := exec.Command(os.Args[0], "-test.run=^TestProcessChild$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(),
			shm.EnvRank+"="+strconv.Itoa(r), shm.EnvSize+"="+strconv.Itoa(p),
			shm.EnvArena+"="+name, "SHMCOLL_TEST_ALG="+alg.String())
		wg.Go(func() { out[r], errs[r] = cmd.CombinedOutput() })
	}
	wg.Wait()
	for r := range p {
		if errs[r] != nil || !strings.Contains(string(out[r]), "--- PASS: TestProcessChild") {
			t.Errorf("rank %d: %v\n%s", r, errs[r], out[r])
		}
	}
	// The arena is unlinked once every rank attached (other jobs' segments
	// may be in /dev/shm meanwhile: look for this one only).
	seg := fmt.Sprintf("/dev/shm/shmcoll.%d.%s", os.Getuid(), name)
	if _, err := os.Stat(seg); err == nil {
		t.Errorf("%s left in /dev/shm", seg)
	}
}
