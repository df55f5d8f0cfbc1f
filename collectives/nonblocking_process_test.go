package collectives

import (
	"errors"
	"os"
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
	runRanksKilled(t, "TestNonblockingChild", 3, 2, func(int) []string { return []string{"SHMCOLL_TEST_NB_DIE=1"} })
}
