package tests

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shmcoll/shmcoll/collectives"
	"github.com/shmcoll/shmcoll/shm"
)

// Whole-process behaviour of the collectives: the test binary re-executes
// itself as the ranks (TestCollectivesRank), with the environment shmrun
// sets, in one of the modes below.

const envMode = "SHMCOLL_TESTS_COLL_MODE"

type rankResult struct {
	out  string
	err  error
	code int
}

// runRanks starts p ranks in mode on a fresh arena and returns their
// results; it fails the test if the arena's segment is left in /dev/shm.
func runRanks(t *testing.T, p int, mode string, extraEnv ...string) []rankResult {
	t.Helper()
	name := shm.NewName()
	defer segmentGone(t, name)
	res := make([]rankResult, p)
	var wg sync.WaitGroup
	for r := range p {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCollectivesRank$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), shm.EnvRank+"="+strconv.Itoa(r), shm.EnvSize+"="+strconv.Itoa(p),
			shm.EnvArena+"="+name, envMode+"="+mode)
		cmd.Env = append(cmd.Env, extraEnv...)
		wg.Go(func() {
			out, err := cmd.CombinedOutput()
			res[r] = rankResult{out: string(out), err: err, code: cmd.ProcessState.ExitCode()}
		})
	}
	wg.Wait()
	return res
}

// segmentGone fails the test if the named arena's segment still exists
// (other tests' segments may come and go meanwhile).
func segmentGone(t *testing.T, name string) {
	t.Helper()
	path, err := shm.SegmentPath(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err == nil {
		t.Errorf("segment %s left in /dev/shm", path)
	}
}

// TestCollectivesKill9: one of four ranks is killed with SIGKILL in the
// middle of a stream of large allreduces; every other rank's call fails
// with ErrPeerDead naming the dead rank, within the liveness timeout.
func TestCollectivesKill9(t *testing.T) {
	if os.Getenv(envMode) != "" {
		t.Skip("in a rank")
	}
	res := runRanks(t, 4, "kill", "SHMCOLL_TIMEOUT=300ms")
	for r, x := range res {
		if r == 2 {
			if x.code != -1 { // killed by a signal
				t.Errorf("rank 2 was not killed: exit %d\n%s", x.code, x.out)
			}
			continue
		}
		if x.err != nil || !strings.Contains(x.out, "peer dead: rank 2") {
			t.Errorf("rank %d: %v\n%s", r, x.err, x.out)
		}
	}
}

// TestCollectivesMismatchProcesses: ranks pass different counts; every
// process gets ErrMismatch, none hangs, none is corrupted.
func TestCollectivesMismatchProcesses(t *testing.T) {
	if os.Getenv(envMode) != "" {
		t.Skip("in a rank")
	}
	res := runRanks(t, 3, "mismatch")
	for r, x := range res {
		if x.err != nil || !strings.Contains(x.out, "mismatch reported") {
			t.Errorf("rank %d: %v\n%s", r, x.err, x.out)
		}
	}
}

// TestCollectivesRank is one rank of the tests above.
func TestCollectivesRank(t *testing.T) {
	mode := os.Getenv(envMode)
	if mode == "" {
		t.Skip("run by the process tests")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := collectives.JoinEnv(ctx, collectives.Options{SlotBytes: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	switch mode {
	case "kill":
		n := 1 << 17
		send, recv := make([]float64, n), make([]float64, n)
		for i := 0; ; i++ {
			if c.Rank() == 2 && i == 20 {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
			err := collectives.Allreduce(ctx, c, send, recv, collectives.Sum)
			if err == nil {
				continue
			}
			var ae *shm.AbortError
			if errors.Is(err, collectives.ErrPeerDead) && errors.As(err, &ae) && ae.Peer == 2 {
				fmt.Printf("peer dead: rank %d (after %d calls): %v\n", ae.Peer, i, err)
				return
			}
			t.Fatalf("call %d: %v", i, err)
		}
	case "mismatch":
		n := 1000 + 10*c.Rank()
		err := collectives.Allreduce(ctx, c, make([]int32, n), make([]int32, n), collectives.Sum)
		if !errors.Is(err, collectives.ErrMismatch) {
			t.Fatalf("got %v, want ErrMismatch", err)
		}
		fmt.Printf("mismatch reported: %v\n", err)
	case "dupabort":
		dupAbortRank(t, c)
	default:
		t.Fatalf("unknown mode %q", mode)
	}
}
