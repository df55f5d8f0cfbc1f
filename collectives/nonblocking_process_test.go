package collectives

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shmcoll/shmcoll/shm"
)

// TestNonblockingProcesses runs the nonblocking calls of every collective
// among 3 processes.
func TestNonblockingProcesses(t *testing.T) {
	if os.Getenv(shm.EnvArena) != "" {
		t.Skip("in a child")
	}
	runRanks(t, "TestNonblockingChild", 3, func(int) []string { return nil })
}

// TestNonblockingChild is one rank of TestNonblockingProcesses, or of
// TestNonblockingPeerDeath with SHMCOLL_TEST_NB_DIE set.
func TestNonblockingChild(t *testing.T) {
	if os.Getenv(shm.EnvArena) == "" {
		t.Skip("run by TestNonblockingProcesses")
	}
	c, err := JoinEnv(bg, Options{SlotBytes: 4096, Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if os.Getenv("SHMCOLL_TEST_NB_DIE") != "" {
		nbDie(t, c)
		return
	}
	for _, n := range []int{1, 600} {
		if err := nbCalls(c, n); err != nil {
			t.Fatal(err)
		}
	}
}

// nbDie: after a barrier, the last rank kills itself while the others'
// nonblocking calls wait for it; theirs fail with ErrPeerDead.
func nbDie(t *testing.T, c *Comm) {
	if err := Barrier(bg, c); err != nil {
		t.Fatal(err)
	}
	if c.Rank() == c.Size()-1 {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	reqs := []*Request{
		IAllreduce(bg, c, make([]float64, 2000), make([]float64, 2000), Sum),
		IBarrier(bg, c),
	}
	for i, req := range reqs {
		if err := req.Wait(); !errors.Is(err, ErrPeerDead) {
			t.Errorf("request %d: %v, want ErrPeerDead", i, err)
		}
	}
	if err := Barrier(bg, c); !errors.Is(err, ErrPeerDead) {
		t.Errorf("blocking call after: %v, want ErrPeerDead", err)
	}
}

// TestNonblockingPeerDeath: a rank killed while the others' nonblocking
// calls wait for it fails them with ErrPeerDead, without a hang.
func TestNonblockingPeerDeath(t *testing.T) {
	if os.Getenv(shm.EnvArena) != "" {
		t.Skip("in a child")
	}
	const p = 3
	name := shm.NewName()
	out := make([][]byte, p)
	errs := make([]error, p)
	var wg sync.WaitGroup
	for r := range p {
		cmd := exec.Command(os.Args[0], "-test.run=^TestNonblockingChild$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), shm.EnvRank+"="+strconv.Itoa(r), shm.EnvSize+"="+strconv.Itoa(p),
			shm.EnvArena+"="+name, "SHMCOLL_TEST_NB_DIE=1")
		wg.Go(func() { out[r], errs[r] = cmd.CombinedOutput() })
	}
	wg.Wait()
	for r := range p - 1 {
		if errs[r] != nil || !strings.Contains(string(out[r]), "--- PASS: TestNonblockingChild") {
			t.Errorf("rank %d: %v\n%s", r, errs[r], out[r])
		}
	}
	if errs[p-1] == nil {
		t.Errorf("rank %d was to be killed and exited normally:\n%s", p-1, out[p-1])
	}
	if path, _ := shm.SegmentPath(name); path != "" {
		if _, err := os.Stat(path); err == nil {
			t.Errorf("segment %s left behind", path)
		}
	}
}
