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

// TestProcesses runs the matrix among real processes: the test binary
// re-executes itself p times as TestProcessChild with the environment
// shmrun sets (SHMCOLL_RANK, SHMCOLL_SIZE, SHMCOLL_ARENA).
func TestProcesses(t *testing.T) {
	if os.Getenv(shm.EnvArena) != "" {
		t.Skip("in a child")
	}
	ps := []int{2, 3, 4}
	if long {
		ps = []int{2, 3, 4, 5, 6, 7, 8}
	}
	if testing.Short() {
		ps = []int{3}
	}
	for _, alg := range []Algorithm{Flat, Circulant, Replicated} {
		for _, p := range ps {
			t.Run(fmt.Sprintf("alg=%v/p=%d", alg, p), func(t *testing.T) {
				runChildren(t, p, alg.String())
			})
		}
	}
}

// runChildren runs p ranks of TestProcessChild with the given algorithm
// (or "stress") and environment.
func runChildren(t *testing.T, p int, alg string, env ...string) {
	t.Helper()
	runRanks(t, "TestProcessChild", p, func(int) []string {
		return append([]string{"SHMCOLL_TEST_ALG=" + alg}, env...)
	})
}

// runRanks runs p ranks of the test function child as processes of one
// arena, rank r with env(r) added to the environment, and fails if one
// fails or the arena's segment is left behind.
func runRanks(t *testing.T, child string, p int, env func(r int) []string) {
	t.Helper()
	runRanksKilled(t, child, p, -1, env)
}

// runRanksKilled is runRanks where rank killed (-1: none) is to die: it
// fails if that rank exits normally, and does not require it to pass.
func runRanksKilled(t *testing.T, child string, p, killed int, env func(r int) []string) {
	t.Helper()
	name := shm.NewName()
	out := make([][]byte, p)
	errs := make([]error, p)
	var wg sync.WaitGroup
	for r := range p {
		cmd := exec.Command(os.Args[0], "-test.run=^"+child+"$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(),
			shm.EnvRank+"="+strconv.Itoa(r), shm.EnvSize+"="+strconv.Itoa(p), shm.EnvArena+"="+name)
		cmd.Env = append(cmd.Env, env(r)...)
		wg.Go(func() { out[r], errs[r] = cmd.CombinedOutput() })
	}
	wg.Wait()
	if path, _ := shm.SegmentPath(name); path != "" {
		if _, err := os.Stat(path); err == nil {
			t.Errorf("segment %s left behind", path)
		}
	}
	for r := range p {
		switch {
		case r == killed && errs[r] == nil:
			t.Errorf("rank %d was to be killed and exited normally:\n%s", r, out[r])
		case r != killed && (errs[r] != nil || !strings.Contains(string(out[r]), "--- PASS: "+child)):
			t.Errorf("rank %d: %v\n%s", r, errs[r], out[r])
		}
	}
}

// TestProcessChild is one rank of TestProcesses.
func TestProcessChild(t *testing.T) {
	if os.Getenv(shm.EnvArena) == "" {
		t.Skip("run by TestProcesses")
	}
	if n, _ := strconv.Atoi(os.Getenv("SHMCOLL_TEST_STRESS")); n > 0 {
		c, err := JoinEnv(bg, Options{SlotBytes: 4096})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if err := stressCalls(c, 42, n); err != nil {
			t.Fatal(err)
		}
		_, total := c.Stats()
		t.Logf("rank %d of %d: %d calls, %d steps", c.Rank(), c.Size(), total.Calls, total.Steps)
		return
	}
	alg, err := ParseAlgorithm(os.Getenv("SHMCOLL_TEST_ALG"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := JoinEnv(bg, pinAll(alg))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.InProcess() {
		t.Fatal("a process rank says it is in-process")
	}
	if err := matrixCalls(t, c, alg, false, nil); err != nil {
		t.Fatal(err)
	}
	// Split in two halves with their own arenas, used beside the parent.
	sub, err := c.Split(bg, c.Rank()%2, c.Rank())
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	v := []int64{int64(c.Rank())}
	if err := Allreduce(bg, sub, nil, v, Sum); err != nil {
		t.Fatal(err)
	}
	want := int64(0)
	for q := c.Rank() % 2; q < c.Size(); q += 2 {
		want += int64(q)
	}
	if v[0] != want {
		t.Errorf("split allreduce: %d, want %d", v[0], want)
	}
	if err := Barrier(bg, c); err != nil {
		t.Fatal(err)
	}
	_, total := c.Stats()
	t.Logf("rank %d of %d (pid %d): %d calls, %d steps", c.Rank(), c.Size(), os.Getpid(), total.Calls, total.Steps)
}
