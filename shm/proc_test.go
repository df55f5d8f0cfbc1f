//go:build linux

package shm

import (
	"bytes"
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
)

// The test binary re-executes itself as ranks: TestMain runs the role named
// by SHMCOLL_TEST_ROLE instead of the tests.
const envRole = "SHMCOLL_TEST_ROLE"

func TestMain(m *testing.M) {
	if role := os.Getenv(envRole); role != "" {
		os.Exit(childMain(role))
	}
	code := m.Run()
	if code == 0 {
		if left := ourSegments(); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "segments left in /dev/shm: %v\n", left)
			code = 1
		}
	}
	os.Exit(code)
}

var (
	namesMu   sync.Mutex
	testNames []string
)

// testName returns a fresh arena name and remembers it, so that TestMain
// can check that none of the tests' segments is left (other users' jobs
// may have segments in /dev/shm at the same time).
func testName() string {
	n := NewName()
	namesMu.Lock()
	testNames = append(testNames, n)
	namesMu.Unlock()
	return n
}

// ourSegments lists the segments of this test binary's arenas that exist.
func ourSegments() []string {
	namesMu.Lock()
	defer namesMu.Unlock()
	var left []string
	for _, n := range testNames {
		if p, err := SegmentPath(n); err == nil && fileExists(p) {
			left = append(left, p)
		}
	}
	return left
}

func envInt(k string) int {
	v, err := strconv.Atoi(os.Getenv(k))
	if err != nil {
		panic(k + " not set")
	}
	return v
}

// childMain runs one rank. Its last line of output is "ok" or the error.
func childMain(role string) int {
	ctx := context.Background()
	opt := waitOptions()
	opt.SlotBytes = envInt("SHMCOLL_TEST_SLOT")
	cmaTestSetup(&opt)
	var e *Endpoint
	var err error
	if os.Getenv("SHMCOLL_TEST_ENVJOIN") != "" {
		e, err = JoinEnv(ctx, opt)
	} else {
		e, err = Join(ctx, os.Getenv(EnvArena), envInt(EnvRank), envInt(EnvSize), opt)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "join:", err)
		return 2
	}
	defer e.Close()
	rank, size := e.Rank(), e.Size()
	switch role {
	case "pong", "ringhop":
		err = benchChild(role, e)
		if os.Getenv("SHMCOLL_TEST_SLEEP") != "" {
			fmt.Printf("oneP=%v\ntimeouts=%d\n", e.oneP, e.sleepTimeouts.Load())
		}
	case "ring":
		err = ringExchange(e, envInt("SHMCOLL_TEST_ROUNDS"), envInt("SHMCOLL_TEST_WORDS"))
	case "cma", "cmaserve":
		err = cmaChild(role, e)
	case "stress":
		err = allToAll(e, envInt("SHMCOLL_TEST_ROUNDS"), envInt("SHMCOLL_TEST_WORDS"))
	case "stuck":
		// Everyone but the victim waits on the victim's counter through a
		// chain: rank r waits for rank r+1, the last one for the victim.
		victim := envInt("SHMCOLL_TEST_VICTIM")
		if rank == victim {
			e.Post(0, 1)
			fmt.Println("victim ready")
			time.Sleep(time.Hour)
		}
		peer := (rank + 1) % size
		err = e.Wait(ctx, peer, 2, 1)
		var ae *AbortError
		if errors.As(err, &ae) && errors.Is(err, ErrPeerDead) && ae.Peer == victim {
			fmt.Printf("got peer dead %d\n", ae.Peer)
			err = nil
		} else {
			err = fmt.Errorf("unexpected wait result: %v", err)
		}
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if !strings.HasPrefix(role, "pong") && role != "ringhop" {
		fmt.Println("ok")
	}
	return 0
}

type rankProc struct {
	cmd *exec.Cmd
	out *syncBuffer
}

// syncBuffer is a bytes.Buffer that a child's output goroutine writes while
// the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startRanks starts size copies of the test binary as ranks of role.
func startRanks(t *testing.T, role, name string, size int, env ...string) []rankProc {
	t.Helper()
	ps := make([]rankProc, size)
	for r := range size {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envRole+"="+role,
			fmt.Sprintf("%s=%d", EnvRank, r), fmt.Sprintf("%s=%d", EnvSize, size), EnvArena+"="+name,
			"SHMCOLL_TEST_SLOT=65536", "SHMCOLL_TEST_ROUNDS=200", "SHMCOLL_TEST_WORDS=1024")
		cmd.Env = append(cmd.Env, env...)
		out := new(syncBuffer)
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ps[r] = rankProc{cmd, out}
	}
	t.Cleanup(func() {
		for _, p := range ps {
			if p.cmd.ProcessState == nil {
				p.cmd.Process.Kill()
				p.cmd.Wait()
			}
		}
	})
	return ps
}

func TestProcessRing(t *testing.T) {
	for _, p := range []int{2, 4} {
		t.Run(fmt.Sprint("ranks=", p), func(t *testing.T) {
			name := testName()
			if p == 4 {
				name = segmentPrefix() + name // the launcher's form
			}
			ps := startRanks(t, "ring", name, p)
			for r, pr := range ps {
				if err := pr.cmd.Wait(); err != nil || !strings.HasSuffix(pr.out.String(), "ok\n") {
					t.Errorf("rank %d: %v: %s", r, err, pr.out)
				}
			}
		})
	}
}

// TestProcessStress runs the all-to-all protocol stress across processes,
// where the race detector cannot see: every word read is checked.
func TestProcessStress(t *testing.T) {
	p, rounds := 8, 300
	if testing.Short() {
		p, rounds = 4, 60
	}
	if longTests() {
		p, rounds = 16, 5000
	}
	ps := startRanks(t, "stress", testName(), p, fmt.Sprint("SHMCOLL_TEST_ROUNDS=", rounds), "SHMCOLL_TEST_WORDS=4096",
		"SHMCOLL_TEST_SLOT=32768")
	for r, pr := range ps {
		if err := pr.cmd.Wait(); err != nil || !strings.HasSuffix(pr.out.String(), "ok\n") {
			t.Errorf("rank %d: %v: %s", r, err, pr.out)
		}
	}
}

// TestNoLostWakeup: a futex-only ping-pong across processes whose sleeps
// are bounded by 10s never has a sleep time out: every post that found a
// sleeper woke it. The peer runs with GOMAXPROCS 1, whose sleeps are raw
// system calls, and with GOMAXPROCS 2.
func TestNoLostWakeup(t *testing.T) {
	rounds := 3000
	if testing.Short() {
		rounds = 300
	}
	for _, procs := range []int{1, 2} {
		t.Run(fmt.Sprint("procs=", procs), func(t *testing.T) {
			name := testName()
			ps := startRanks(t, "pong", name, 1, EnvRank+"=1", EnvSize+"=2", "SHMCOLL_TEST_SLOT=4096",
				"SHMCOLL_TEST_SPIN=-1s", "SHMCOLL_TEST_YIELD=-1s", "SHMCOLL_TEST_SLEEP=10s", fmt.Sprint("GOMAXPROCS=", procs))
			e, err := Join(context.Background(), name, 0, 2, Options{SlotBytes: 4096, SpinFor: -1, YieldFor: -1, sleepFor: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			ctx := context.Background()
			for k := uint64(1); k <= uint64(rounds); k++ {
				e.Post(0, k)
				if err := e.Wait(ctx, 1, 0, k); err != nil {
					t.Fatal(err)
				}
			}
			e.Post(0, stopValue)
			if err := ps[0].cmd.Wait(); err != nil {
				t.Fatalf("%v: %s", err, ps[0].out)
			}
			out := ps[0].out.String()
			if n := e.sleepTimeouts.Load(); n != 0 || !strings.Contains(out, "timeouts=0\n") {
				t.Errorf("futex sleeps timed out: rank 0 %d, rank 1 %s", n, out)
			}
			if want := fmt.Sprintf("oneP=%v\n", procs == 1); !strings.Contains(out, want) {
				t.Errorf("rank 1 printed %q, want %q", out, want)
			}
		})
	}
}

func TestKillDuringWait(t *testing.T) {
	// The survivors are in each phase of waiting when the victim dies;
	// with GOMAXPROCS 1 their futex sleeps are raw system calls.
	for _, mode := range []struct{ name, spin, yield, procs string }{
		{"futex", "0s", "0s", ""}, {"rawfutex", "-1s", "-1s", "1"}, {"spin", "1h", "0s", ""}, {"yield", "-1s", "1h", ""},
	} {
		t.Run("wait="+mode.name, func(t *testing.T) {
			env := []string{"SHMCOLL_TEST_SPIN=" + mode.spin, "SHMCOLL_TEST_YIELD=" + mode.yield,
				fmt.Sprint("SHMCOLL_TEST_FIXED=", mode.name == "spin")}
			if mode.procs != "" {
				env = append(env, "GOMAXPROCS="+mode.procs)
			}
			killDuringWait(t, env...)
		})
	}
}

func killDuringWait(t *testing.T, env ...string) {
	const p, victim = 4, 2
	ps := startRanks(t, "stuck", testName(), p, append(env, "SHMCOLL_TEST_VICTIM=2", "SHMCOLL_TIMEOUT=1s")...)
	// Wait until the victim has joined (so everyone has), then kill it.
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(ps[victim].out.String(), "victim ready") {
		if time.Now().After(deadline) {
			t.Fatalf("victim never ready: %s", ps[victim].out)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // let the survivors settle in their phase
	killed := time.Now()
	ps[victim].cmd.Process.Signal(syscall.SIGKILL)
	for r, pr := range ps {
		err := pr.cmd.Wait()
		if r == victim {
			continue
		}
		if err != nil || !strings.Contains(pr.out.String(), fmt.Sprintf("got peer dead %d", victim)) {
			t.Errorf("rank %d: %v: %s", r, err, pr.out)
		}
	}
	// Speed is not asserted; the detection bound is Timeout/4 by design.
	t.Logf("survivors returned %v after the kill", time.Since(killed))
	if left := ourSegments(); len(left) > 0 {
		t.Errorf("left in /dev/shm: %v", left)
	}
}

// TestKillDuringJoin: a rank that dies after joining but before the others
// arrived fails the join of the rest with ErrPeerDead (not a timeout), and
// rank 0 removes the segment.
func TestKillDuringJoin(t *testing.T) {
	name := testName()
	path, _ := SegmentPath(name)
	var wg sync.WaitGroup
	var err0 error
	wg.Go(func() {
		_, err0 = Join(context.Background(), name, 0, 3, Options{SlotBytes: 4096, JoinTimeout: time.Minute})
	})
	for !fileExists(path) {
		time.Sleep(time.Millisecond)
	}
	ps := startRanks(t, "ring", name, 1, EnvRank+"=1", EnvSize+"=3", "SHMCOLL_TEST_SLOT=4096")
	// Rank 1 has joined once the joined count reaches 2.
	for {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > hAttached+4 && ne.Uint32(b[hAttached:]) == 2 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	ps[0].cmd.Process.Signal(syscall.SIGKILL)
	ps[0].cmd.Wait()
	wg.Wait()
	var ae *AbortError
	if !errors.Is(err0, ErrPeerDead) || !errors.As(err0, &ae) || ae.Peer != 1 {
		t.Fatalf("rank 0: %v", err0)
	}
	if fileExists(path) {
		t.Errorf("%s left behind", path)
	}
}

// TestJoinEnvUnderMPI: ranks started by mpirun (Open MPI, MPICH) without
// any SHMCOLL_* variable find each other through the launcher's variables.
func TestJoinEnvUnderMPI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts mpirun")
	}
	env := []string{envRole + "=stress", "SHMCOLL_TEST_ENVJOIN=1", "SHMCOLL_TEST_SLOT=65536",
		"SHMCOLL_TEST_ROUNDS=50", "SHMCOLL_TEST_WORDS=4096"}
	for _, l := range []struct {
		name string
		args []string
	}{
		{"mpirun.openmpi", []string{"--allow-run-as-root", "--oversubscribe", "-np", "3",
			"-x", envRole, "-x", "SHMCOLL_TEST_ENVJOIN", "-x", "SHMCOLL_TEST_SLOT", "-x", "SHMCOLL_TEST_ROUNDS", "-x", "SHMCOLL_TEST_WORDS"}},
		{"mpirun.mpich", []string{"-np", "3"}},
	} {
		t.Run(l.name, func(t *testing.T) {
			bin, err := exec.LookPath(l.name)
			if err != nil {
				t.Skipf("%s not installed", l.name)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, append(l.args, os.Args[0], "-test.run=^$")...)
			cmd.Env = append(os.Environ(), env...)
			for _, k := range []string{EnvRank, EnvSize, EnvArena} {
				cmd.Env = append(cmd.Env, k+"=") // empty: not set for ReadEnv
			}
			out, err := cmd.CombinedOutput()
			if err != nil || strings.Count(string(out), "ok\n") != 3 {
				t.Fatalf("%v: %s", err, out)
			}
		})
	}
}
