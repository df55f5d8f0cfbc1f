package tests

// Whole-process tests of the launcher with the real stack: ranks started by
// launch join with collectives.JoinEnv and run collectives. The test binary
// is its own rank program: the launcher re-executes it with
// -test.run=^TestLaunchRankHelper$ and SHMCOLL_TESTS_LAUNCH set to a mode.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/shmcoll/shmcoll/collectives"
	"github.com/shmcoll/shmcoll/launch"
)

const envLaunchMode = "SHMCOLL_TESTS_LAUNCH"

// TestLaunchRankHelper is the rank program; it does nothing in a normal run.
func TestLaunchRankHelper(t *testing.T) {
	mode := os.Getenv(envLaunchMode)
	if mode == "" {
		t.Skip("rank program of the launch tests, run by them")
	}
	if err := launchRank(mode); err != nil {
		fmt.Fprintln(os.Stderr, "rank:", err)
		if mode == "die" {
			// Stay until the launcher kills us: a survivor that exited at
			// once could be reaped before the rank that died first, and the
			// test checks that the launcher names the first.
			time.Sleep(time.Hour)
		}
		os.Exit(1)
	}
	os.Exit(0)
}

// launchRank joins, runs an allreduce of n int64 whose exact result it
// knows, and prints "allreduce ok".
func launchRank(mode string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := collectives.JoinEnv(ctx, collectives.Options{})
	if err != nil {
		return err
	}
	defer c.Close()
	r, p := c.Rank(), c.Size()
	if mode == "die" && r == 1 {
		os.Exit(3) // after joining, before the collective
	}
	const n = 10000
	send := make([]int64, n)
	for i := range send {
		send[i] = int64(r+1) * int64(i+1)
	}
	recv := make([]int64, n)
	if err := collectives.Allreduce(ctx, c, send, recv, collectives.Sum); err != nil {
		return err
	}
	total := int64(p * (p + 1) / 2)
	for i, v := range recv {
		if v != total*int64(i+1) {
			return fmt.Errorf("rank %d: recv[%d] = %d, want %d", r, i, v, total*int64(i+1))
		}
	}
	fmt.Printf("allreduce ok %d %d\n", r, p)
	return nil
}

func startRanks(t *testing.T, cfg launch.Config, mode string) (*launch.Job, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cfg.Prog = os.Args[0]
	cfg.Args = []string{"-test.run=^TestLaunchRankHelper$"}
	cfg.Env = append(cfg.Env, envLaunchMode+"="+mode)
	cfg.Stdout, cfg.Stderr = &stdout, &stderr
	cfg.Timeout = 2 * time.Minute
	j, err := launch.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		j.Kill()
		j.Wait()
	})
	return j, &stdout, &stderr
}

// jobTrace gathers what noLeak needs of the jobs a test ran: their ranks'
// process ids and their arenas' names.
type jobTrace struct {
	pids  map[int]bool
	names []string
}

func (tr *jobTrace) add(j *launch.Job) {
	if tr.pids == nil {
		tr.pids = map[int]bool{}
	}
	for _, p := range j.PIDs() {
		tr.pids[p] = true
	}
	tr.names = append(tr.names, j.Arena())
}

func TestLaunchAllreduce(t *testing.T) {
	before := shmSnapshot()
	var tr jobTrace
	for _, cfg := range []launch.Config{
		{NP: 4},
		{NP: 3, ArenaKind: launch.ArenaNamed},
		{NP: 2, Bind: launch.BindCore},
		{NP: 5, SlotBytes: 16 << 10},
	} {
		name := fmt.Sprintf("np=%d/arena=%v/bind=%v/slot=%d", cfg.NP, cfg.ArenaKind, cfg.Bind, cfg.SlotBytes)
		j, stdout, stderr := startRanks(t, cfg, "allreduce")
		if err := j.Wait(); err != nil {
			t.Fatalf("%s: %v\nstderr: %s", name, err, stderr)
		}
		tr.add(j)
		var want []string
		for r := range cfg.NP {
			want = append(want, fmt.Sprintf("[%d] allreduce ok %d %d", r, r, cfg.NP))
		}
		got := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
		sort.Strings(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: output %q, want %q", name, got, want)
		}
	}
	noLeak(t, before, tr.pids, tr.names...)
}

// TestLaunchRankDiesInCollective: rank 1 exits with 3 after joining; the job
// fails naming rank 1 and its status, the survivors are killed, and nothing
// is left in /dev/shm.
func TestLaunchRankDiesInCollective(t *testing.T) {
	before := shmSnapshot()
	var tr jobTrace
	for _, kind := range []launch.ArenaKind{launch.ArenaMemfd, launch.ArenaNamed} {
		j, _, stderr := startRanks(t, launch.Config{NP: 3, ArenaKind: kind}, "die")
		err := j.Wait()
		tr.add(j)
		var re *launch.RankError
		if !errors.As(err, &re) || re.Rank != 1 || re.ExitCode() != 3 {
			t.Errorf("%v: Wait = %v, want rank 1 status 3; stderr %s", kind, err, stderr)
		}
		if strings.Contains(stderr.String(), "recv[") {
			t.Errorf("%v: a survivor computed a wrong result: %s", kind, stderr)
		}
	}
	noLeak(t, before, tr.pids, tr.names...)
}
