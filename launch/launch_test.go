package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shmcoll/shmcoll/launch/launchtest"
	"github.com/shmcoll/shmcoll/numa"
	"github.com/shmcoll/shmcoll/shm"
)

func TestMain(m *testing.M) {
	launchtest.MaybeRun()
	os.Exit(m.Run())
}

// job starts the test binary as np ranks running the given actions.
func job(t *testing.T, cfg Config, actions ...string) (*Job, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cfg.Prog = os.Args[0]
	cfg.Args = actions
	cfg.Env = append(cfg.Env, launchtest.Env+"=1")
	cfg.Stdout, cfg.Stderr = &stdout, &stderr
	j, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		j.Kill()
		j.Wait()
	})
	return j, &stdout, &stderr
}

// sortedLines returns the lines of s, sorted.
func sortedLines(s string) []string {
	l := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if s == "" {
		l = nil
	}
	sort.Strings(l)
	return l
}

func TestOutputPrefixed(t *testing.T) {
	j, stdout, stderr := job(t, Config{NP: 3}, "lines:2", "stderr:oops", "partial:no newline")
	if err := j.Wait(); err != nil {
		t.Fatal(err)
	}
	var want []string
	for r := range 3 {
		want = append(want, fmt.Sprintf("[%d] rank %d line 0", r, r), fmt.Sprintf("[%d] rank %d line 1", r, r),
			fmt.Sprintf("[%d] no newline", r))
	}
	sort.Strings(want)
	if got := sortedLines(stdout.String()); !slices.Equal(got, want) {
		t.Errorf("stdout lines %q\nwant %q", got, want)
	}
	if got := sortedLines(stderr.String()); !slices.Equal(got, []string{"[0] oops", "[1] oops", "[2] oops"}) {
		t.Errorf("stderr %q", stderr.String())
	}
}

func TestOutputNoPrefix(t *testing.T) {
	j, stdout, _ := job(t, Config{NP: 2, NoPrefix: true}, "echo:plain")
	if err := j.Wait(); err != nil {
		t.Fatal(err)
	}
	if stdout.String() != "plain\nplain\n" {
		t.Errorf("stdout %q", stdout.String())
	}
}

// TestOutputNotInterleaved has 4 ranks write many lines at once: every line
// arrives whole, with its rank's prefix, in its rank's order.
func TestOutputNotInterleaved(t *testing.T) {
	const n = 3000
	j, stdout, _ := job(t, Config{NP: 4}, "lines:"+strconv.Itoa(n))
	if err := j.Wait(); err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^\[(\d)\] rank (\d) line (\d+)$`)
	next := make([]int, 4)
	for _, line := range strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n") {
		m := re.FindStringSubmatch(line)
		if m == nil || m[1] != m[2] {
			t.Fatalf("mangled line %q", line)
		}
		r, _ := strconv.Atoi(m[1])
		i, _ := strconv.Atoi(m[3])
		if i != next[r] {
			t.Fatalf("rank %d: line %d after line %d", r, i, next[r]-1)
		}
		next[r]++
	}
	if !slices.Equal(next, []int{n, n, n, n}) {
		t.Fatalf("lines per rank %v, want %d each", next, n)
	}
}

func TestEnvironment(t *testing.T) {
	t.Setenv(EnvCPU, "7") // as in a rank of an outer job: must not leak into unbound ranks
	j, stdout, _ := job(t, Config{NP: 4, Env: []string{"SHMCOLL_RANK=99"}}, "env")
	if err := j.Wait(); err != nil {
		t.Fatal(err)
	}
	if j.Arena() != "fd:3" {
		t.Errorf("arena %q, want fd:3 (memfd by default)", j.Arena())
	}
	var want []string
	for r := range 4 {
		want = append(want, fmt.Sprintf("[%d] env %d 4 %s ", r, r, j.Arena()))
	}
	if got := sortedLines(stdout.String()); !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	a, _ := NewArenaName()
	b, _ := NewArenaName()
	if a == b {
		t.Errorf("two arena names are equal: %s", a)
	}
	for _, name := range []string{a, b} {
		if !regexp.MustCompile(`^shmcoll\.` + strconv.Itoa(os.Getuid()) + `\.[0-9a-f]{16}$`).MatchString(name) {
			t.Errorf("arena name %q", name)
		}
		if err := shm.ValidName(name); err != nil {
			t.Errorf("shm refuses %q: %v", name, err)
		}
	}
}

// leftArenas returns the named arenas of jobs that are still in /dev/shm.
// It looks only at the given jobs' own names: other programs (and other
// test binaries running at the same time) may own segments there too.
func leftArenas(jobs []*Job) []string {
	var left []string
	for _, j := range jobs {
		name := j.Arena()
		if !strings.HasPrefix(name, "shmcoll.") {
			continue // a memfd arena has no name to leave behind
		}
		if _, err := os.Lstat("/dev/shm/" + name); err == nil {
			left = append(left, name)
		}
	}
	return left
}

// TestJoinEnv runs ranks that join their arena with shm.JoinEnv, for both
// kinds of arena, and checks that /dev/shm holds nothing afterwards.
func TestJoinEnv(t *testing.T) {
	var jobs []*Job
	name, err := NewArenaName()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cfg        Config
		arena      string
		slot, heap int
	}{
		{Config{NP: 4}, "fd:3", shm.DefaultSlotBytes, 0},
		{Config{NP: 3, SlotBytes: 64 << 10, HeapBytes: 1 << 20}, "fd:3", 64 << 10, 1 << 20},
		{Config{NP: 4, ArenaKind: ArenaNamed}, "shmcoll.", shm.DefaultSlotBytes, 0},
		{Config{NP: 2, Arena: name}, name, shm.DefaultSlotBytes, 0},
	} {
		j, stdout, stderr := job(t, tc.cfg, "join")
		jobs = append(jobs, j)
		if err := j.Wait(); err != nil {
			t.Fatalf("%v: %v; stderr %q", tc.cfg.ArenaKind, err, stderr)
		}
		if !strings.HasPrefix(j.Arena(), tc.arena) {
			t.Errorf("arena %q, want %s...", j.Arena(), tc.arena)
		}
		var want []string
		for r := range tc.cfg.NP {
			want = append(want, fmt.Sprintf("[%d] joined %d of %d slot %d heap %d", r, r, tc.cfg.NP, tc.slot, tc.heap))
		}
		if got := sortedLines(stdout.String()); !slices.Equal(got, want) {
			t.Errorf("%v: got %q, want %q", tc.cfg.ArenaKind, got, want)
		}
	}
	if left := leftArenas(jobs); len(left) > 0 {
		t.Errorf("/dev/shm still holds %v", left)
	}
}

// TestNamedArenaRankDiesBeforeJoin: rank 1 dies before joining, so the
// segment rank 0 created is never unlinked by the ranks; the launcher removes
// it.
func TestNamedArenaRankDiesBeforeJoin(t *testing.T) {
	j, _, _ := job(t, Config{NP: 2, ArenaKind: ArenaNamed}, "exit:3@1", "join")
	if re := rankErr(t, j.Wait()); re.Rank != 1 && re.Rank != 0 {
		t.Fatalf("got %v", re)
	}
	path, err := shm.SegmentPath(j.Arena())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s left behind: %v", path, err)
	}
}

// readPids waits for np pid files named prefix<r>.pid in dir.
func readPids(t *testing.T, dir, prefix string, np int) []int {
	t.Helper()
	pids := make([]int, np)
	deadline := time.Now().Add(20 * time.Second)
	for r := range np {
		for {
			b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%s%d.pid", prefix, r)))
			if err == nil {
				pids[r], _ = strconv.Atoi(string(b))
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no pid file %s%d.pid", prefix, r)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return pids
}

// alive reports whether pid is a living (not zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}

// waitGone waits until none of pids is alive.
func waitGone(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d still alive", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func rankErr(t *testing.T, err error) *RankError {
	t.Helper()
	var re *RankError
	if !errors.As(err, &re) {
		t.Fatalf("error %v (%T) is not a *RankError", err, err)
	}
	return re
}

// TestFailureKillsTheRest: rank 2 exits with 7 while the others sleep; they
// get SIGTERM (and say so), Wait names rank 2 with status 7.
func TestFailureKillsTheRest(t *testing.T) {
	dir := t.TempDir()
	j, stdout, _ := job(t, Config{NP: 4}, "trapterm:0", "pidfile:"+dir, "await:"+dir, "exit:7@2", "sleep:1h")
	re := rankErr(t, j.Wait())
	if re.Rank != 2 || re.Status != 7 || re.Signal != 0 || re.ExitCode() != 7 || re.PID != j.PIDs()[2] {
		t.Errorf("got %+v (%v), want rank 2 status 7", re, re)
	}
	want := []string{"[0] rank 0 got terminated", "[1] rank 1 got terminated", "[3] rank 3 got terminated"}
	if got := sortedLines(stdout.String()); !slices.Equal(got, want) {
		t.Errorf("stdout %q, want %q", got, want)
	}
	waitGone(t, readPids(t, dir, "rank", 4))
}

// TestFailureKillsStubbornRanks: ranks that ignore SIGTERM get SIGKILL after
// the grace period.
func TestFailureKillsStubbornRanks(t *testing.T) {
	dir := t.TempDir()
	j, _, _ := job(t, Config{NP: 3, KillGrace: 200 * time.Millisecond}, "ignoreterm", "pidfile:"+dir, "await:"+dir, "exit:3@0", "sleep:1h")
	re := rankErr(t, j.Wait())
	if re.Rank != 0 || re.ExitCode() != 3 {
		t.Errorf("got %v, want rank 0 status 3", re)
	}
	waitGone(t, readPids(t, dir, "rank", 3))
}

func TestCrashBySignal(t *testing.T) {
	j, _, _ := job(t, Config{NP: 3}, "signal:9@1", "sleep:1h")
	re := rankErr(t, j.Wait())
	if re.Rank != 1 || re.Signal != syscall.SIGKILL || re.Status != -1 || re.ExitCode() != 137 {
		t.Errorf("got %+v (%v), want rank 1 killed by SIGKILL, exit code 137", re, re)
	}
	// A C-style crash: a shell that sends itself SIGSEGV.
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	j2, err := Start(context.Background(), Config{NP: 2, Prog: sh, Args: []string{"-c", `[ "$SHMCOLL_RANK" = 1 ] && kill -SEGV $$; sleep 30`}})
	if err != nil {
		t.Fatal(err)
	}
	re = rankErr(t, j2.Wait())
	if re.Rank != 1 || re.Signal != syscall.SIGSEGV || re.ExitCode() != 139 {
		t.Errorf("sh: got %v, want rank 1 killed by SIGSEGV", re)
	}
}

// TestKilledRankReported: a rank killed by a signal the launcher did not
// send is the failure reported, even when a peer's own error was reaped
// first (a peer that sees the rank die exits at once); a rank the launcher
// terminates is not.
func TestKilledRankReported(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	ready := filepath.Join(t.TempDir(), "ready")
	script := `case $SHMCOLL_RANK in
0) while [ ! -e ` + ready + ` ]; do sleep 0.01; done; exit 3 ;;
1) trap '' TERM; touch ` + ready + `; sleep 0.3; kill -KILL $$ ;;
*) sleep 30 ;;
esac`
	j, err := Start(context.Background(), Config{NP: 3, Prog: sh, Args: []string{"-c", script}, KillGrace: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	re := rankErr(t, j.Wait())
	if re.Rank != 1 || re.Signal != syscall.SIGKILL || re.ExitCode() != 137 {
		t.Errorf("got %v, want rank 1 killed by SIGKILL", re)
	}
}

func TestPanic(t *testing.T) {
	j, _, stderr := job(t, Config{NP: 2}, "panic@0", "sleep:1h")
	re := rankErr(t, j.Wait())
	if re.Rank != 0 || re.ExitCode() != 2 {
		t.Errorf("got %v, want rank 0 status 2", re)
	}
	if !strings.Contains(stderr.String(), "[0] panic: launchtest: panic action") {
		t.Errorf("stderr %q lacks the prefixed panic", stderr.String())
	}
}

func TestSuccessWithEarlyExit(t *testing.T) {
	j, _, _ := job(t, Config{NP: 3}, "sleep:200ms@1", "exit:0")
	if err := j.Wait(); err != nil {
		t.Fatalf("ranks exiting 0 at different times: %v", err)
	}
}

// TestSignalForwarded: Signal reaches every rank, which handles it. (The
// ranks exit with 0: a failing rank would have the rest killed with SIGTERM,
// which could overtake the forwarded signal.)
func TestSignalForwarded(t *testing.T) {
	dir := t.TempDir()
	j, stdout, _ := job(t, Config{NP: 3}, "trapterm:0", "pidfile:"+dir, "sleep:1h")
	pids := readPids(t, dir, "rank", 3)
	if !slices.Equal(pids, j.PIDs()) {
		t.Errorf("pid files %v, job PIDs %v", pids, j.PIDs())
	}
	j.Signal(syscall.SIGHUP)
	if err := j.Wait(); err != nil {
		t.Errorf("ranks that handled the signal and exited with 0: %v", err)
	}
	want := []string{"[0] rank 0 got hangup", "[1] rank 1 got hangup", "[2] rank 2 got hangup"}
	if got := sortedLines(stdout.String()); !slices.Equal(got, want) {
		t.Errorf("stdout %q, want %q", got, want)
	}
	// Without a handler the ranks die of the signal: 128+15.
	dir = t.TempDir()
	j, _, _ = job(t, Config{NP: 2}, "pidfile:"+dir, "sleep:1h")
	readPids(t, dir, "rank", 2)
	j.Signal(syscall.SIGTERM)
	if re := rankErr(t, j.Wait()); re.Signal != syscall.SIGTERM || re.ExitCode() != 143 {
		t.Errorf("got %v, want death by SIGTERM", re)
	}
}

// TestForwardedTermReported: after a forwarded SIGTERM, a rank that dies
// of it is the failure reported, even when a peer that exited with a
// status of its own (as a peer that sees a rank die does) was reaped first.
func TestForwardedTermReported(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	script := `case $SHMCOLL_RANK in
0) trap 'exit 4' TERM ;;
1) trap 'trap - TERM; sleep 0.3; kill -TERM $$' TERM ;;
esac
touch ` + dir + `/ready$SHMCOLL_RANK; sleep 30 & wait`
	j, err := Start(context.Background(), Config{NP: 2, Prog: sh, Args: []string{"-c", script}, KillGrace: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ready0", "ready1"} {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
				break
			}
			if time.Now().After(deadline) {
				j.Kill()
				t.Fatalf("rank of %s did not start", f)
			}
		}
	}
	j.Signal(syscall.SIGTERM)
	if re := rankErr(t, j.Wait()); re.Rank != 1 || re.Signal != syscall.SIGTERM || re.ExitCode() != 143 {
		t.Errorf("got %v, want rank 1 killed by SIGTERM", re)
	}
}

// TestGrandchildrenKilled: what a rank starts dies with the job.
func TestGrandchildrenKilled(t *testing.T) {
	dir := t.TempDir()
	j, _, _ := job(t, Config{NP: 2}, "spawn:"+dir, "pidfile:"+dir, "sleep:1h")
	grand := readPids(t, dir, "grand", 2)
	readPids(t, dir, "rank", 2)
	j.Kill()
	if err := j.Wait(); !errors.Is(err, ErrKilled) {
		t.Errorf("Wait after Kill: %v, want ErrKilled", err)
	}
	waitGone(t, grand)
}

func TestTimeout(t *testing.T) {
	j, _, _ := job(t, Config{NP: 2, Timeout: 300 * time.Millisecond}, "sleep:1h")
	err := j.Wait()
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("got %v, want ErrTimeout", err)
	}
	waitGone(t, j.PIDs())
}

func TestContextCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	j, err := Start(ctx, Config{NP: 2, Prog: os.Args[0], Args: []string{"sleep:1h"}, Env: []string{launchtest.Env + "=1"}})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := j.Wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	select {
	case <-j.Done():
	default:
		t.Fatal("Done not closed after Wait")
	}
}

func TestArenaRemoved(t *testing.T) {
	j, _, _ := job(t, Config{NP: 2, ArenaKind: ArenaNamed}, "shmfile@0", "exit:1@0", "sleep:1h")
	path := "/dev/shm/" + j.Arena()
	if re := rankErr(t, j.Wait()); re.Rank != 0 {
		t.Fatalf("got %v", re)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s left behind: %v", path, err)
	}
}

func TestBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		is   error
	}{
		{"np 0", Config{NP: 0, Prog: os.Args[0]}, ErrBadConfig},
		{"np -1", Config{NP: -1, Prog: os.Args[0]}, ErrBadConfig},
		{"np too large", Config{NP: MaxRanks + 1, Prog: os.Args[0]}, ErrBadConfig},
		{"no program", Config{NP: 1}, ErrBadConfig},
		{"missing program", Config{NP: 1, Prog: "shmcoll-no-such-program"}, exec.ErrNotFound},
		{"bad env", Config{NP: 1, Prog: os.Args[0], Env: []string{"NOEQUALS"}}, ErrBadConfig},
		{"bad bind", Config{NP: 1, Prog: os.Args[0], Bind: Bind(42)}, ErrBadConfig},
		{"bad arena kind", Config{NP: 1, Prog: os.Args[0], ArenaKind: ArenaKind(7)}, ErrBadConfig},
		{"bad arena name", Config{NP: 1, Prog: os.Args[0], ArenaKind: ArenaNamed, Arena: "../etc"}, ErrBadConfig},
		{"negative slot", Config{NP: 1, Prog: os.Args[0], SlotBytes: -1}, ErrBadConfig},
		{"huge slot", Config{NP: 1, Prog: os.Args[0], SlotBytes: 1 << 40}, ErrBadConfig},
	} {
		j, err := Start(context.Background(), tc.cfg)
		if !errors.Is(err, tc.is) {
			t.Errorf("%s: Start = %v, %v; want an error wrapping %v", tc.name, j, err, tc.is)
		}
	}
	if _, err := ParseBind("numa"); !errors.Is(err, ErrBadConfig) {
		t.Errorf("ParseBind(numa): %v", err)
	}
	for _, b := range []Bind{BindNone, BindCore, BindSocket, BindAuto} {
		if got, err := ParseBind(b.String()); err != nil || got != b {
			t.Errorf("ParseBind(%q) = %v, %v", b.String(), got, err)
		}
	}
}

// affinities runs the affinity action and returns each rank's CPU list and
// GOMAXPROCS, and the SHMCOLL_CPU each rank saw.
func affinities(t *testing.T, cfg Config) (*Job, []string, []string, []string) {
	t.Helper()
	j, stdout, _ := job(t, cfg, "affinity", "env")
	if err := j.Wait(); err != nil {
		t.Fatal(err)
	}
	sets := make([]string, cfg.NP)
	procs := make([]string, cfg.NP)
	cpus := make([]string, cfg.NP)
	re := regexp.MustCompile(`^\[(\d+)\] affinity (\S+) gomaxprocs (\d+)$`)
	reEnv := regexp.MustCompile(`^\[(\d+)\] env \d+ \d+ \S+ (-?\d*)$`)
	for _, line := range strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n") {
		if m := re.FindStringSubmatch(line); m != nil {
			r, _ := strconv.Atoi(m[1])
			sets[r], procs[r] = m[2], m[3]
		} else if m := reEnv.FindStringSubmatch(line); m != nil {
			r, _ := strconv.Atoi(m[1])
			cpus[r] = m[2]
		} else {
			t.Fatalf("unexpected line %q", line)
		}
	}
	return j, sets, procs, cpus
}

// TestBindCore binds one rank per CPU the test may use (run it under
// taskset -c to exercise planning inside a cpuset).
func TestBindCore(t *testing.T) {
	allowed, err := numa.AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	host, err := numa.Detect()
	if err != nil {
		t.Fatal(err)
	}
	usable, err := host.Restrict(allowed)
	if err != nil {
		t.Fatal(err)
	}
	np := len(allowed)
	plan, err := usable.Plan(np, numa.Compact)
	if err != nil {
		t.Fatal(err)
	}
	j, sets, procs, cpus := affinities(t, Config{NP: np, Bind: BindCore, Topology: host})
	for r := range np {
		want := strconv.Itoa(plan[r])
		if sets[r] != want || procs[r] != "1" || cpus[r] != want {
			t.Errorf("rank %d: affinity %s gomaxprocs %s SHMCOLL_CPU %s; want %s, 1, %s", r, sets[r], procs[r], cpus[r], want, want)
		}
		if !slices.Equal(j.CPUs()[r], []int{plan[r]}) {
			t.Errorf("rank %d: Job.CPUs %v, want [%d]", r, j.CPUs()[r], plan[r])
		}
	}
	// The launcher's own threads keep their affinity.
	if now, _ := numa.Affinity(0); len(now) != len(allowed) {
		t.Errorf("launcher thread affinity changed to %v", now)
	}
}

// TestBindFakeTopology binds on a fake 2-socket topology: fake CPUs map onto
// host CPUs modulo their count.
func TestBindFakeTopology(t *testing.T) {
	allowed, err := numa.AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	fake, err := numa.ParseFake("2x4")
	if err != nil {
		t.Fatal(err)
	}
	hostOf := func(c int) int { return allowed[c%len(allowed)] }
	for _, tc := range []struct {
		bind   Bind
		policy numa.Policy
		np     int
		plan   []int   // fake CPUs
		sets   [][]int // fake CPU sets
	}{
		{BindCore, numa.Spread, 4, []int{0, 4, 1, 5}, [][]int{{0}, {4}, {1}, {5}}},
		{BindSocket, numa.Spread, 3, []int{0, 4, 1}, [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}, {0, 1, 2, 3}}},
		{BindSocket, numa.Compact, 2, []int{0, 1}, [][]int{{0, 1, 2, 3}, {0, 1, 2, 3}}},
	} {
		_, sets, _, cpus := affinities(t, Config{NP: tc.np, Bind: tc.bind, Map: tc.policy, Topology: fake})
		for r := range tc.np {
			var want []int
			for _, c := range tc.sets[r] {
				want = append(want, hostOf(c))
			}
			slices.Sort(want)
			want = slices.Compact(want)
			if sets[r] != numa.FormatCPUList(want) || cpus[r] != strconv.Itoa(tc.plan[r]) {
				t.Errorf("%v %v rank %d: affinity %s SHMCOLL_CPU %s; want %s, %d", tc.bind, tc.policy, r, sets[r], cpus[r],
					numa.FormatCPUList(want), tc.plan[r])
			}
		}
	}
}

// TestBindAutoOversubscribed: auto binds oversubscribed ranks too, dealt
// out over the cores in turn.
func TestBindAutoOversubscribed(t *testing.T) {
	allowed, _ := numa.AllowedCPUs()
	fake, err := numa.ParseFake("1x2")
	if err != nil {
		t.Fatal(err)
	}
	_, sets, _, cpus := affinities(t, Config{NP: 3, Bind: BindAuto, Topology: fake})
	for r := range 3 {
		want := allowed[(r%2)%len(allowed)]
		if sets[r] != strconv.Itoa(want) || cpus[r] != strconv.Itoa(r%2) {
			t.Errorf("rank %d: affinity %s SHMCOLL_CPU %q; want CPU %d, SHMCOLL_CPU %d", r, sets[r], cpus[r], want, r%2)
		}
	}
}

// TestCoreShares: auto binding divides the cores among the ranks, whole
// cores with their SMT siblings, in package order; spread deals the ranks
// across packages.
func TestCoreShares(t *testing.T) {
	for _, tc := range []struct {
		spec   string
		np     int
		policy numa.Policy
		want   [][]int // fake CPUs of each rank
	}{
		{"2x4", 1, numa.Compact, [][]int{{0, 1, 2, 3, 4, 5, 6, 7}}},
		{"2x4", 2, numa.Compact, [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}}},
		{"2x4", 3, numa.Compact, [][]int{{0, 1, 2}, {3, 4, 5}, {6, 7}}},
		{"2x4", 4, numa.Spread, [][]int{{0, 1}, {4, 5}, {2, 3}, {6, 7}}},
		{"2x4", 8, numa.Compact, [][]int{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}},
		{"1x2x2", 1, numa.Compact, [][]int{{0, 2, 1, 3}}},
		{"1x2x2", 2, numa.Spread, [][]int{{0, 2}, {1, 3}}},
		{"2x2x2", 3, numa.Spread, [][]int{{0, 4, 1, 5}, {2, 6}, {3, 7}}},
	} {
		top, err := numa.ParseFake(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		if got := coreShares(top, tc.np, tc.policy); !slices.EqualFunc(got, tc.want, slices.Equal) {
			t.Errorf("%s np=%d %v: %v, want %v", tc.spec, tc.np, tc.policy, got, tc.want)
		}
	}
}

// TestBindAuto: with at least as many cores as ranks, auto binds each rank
// to its share of the CPUs this process may use, and a Go rank's
// GOMAXPROCS is the size of that share; with more ranks than cores, one
// CPU each and GOMAXPROCS 1.
func TestBindAuto(t *testing.T) {
	allowed, err := numa.AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	host, err := numa.Detect()
	if err != nil {
		t.Fatal(err)
	}
	usable, err := host.Restrict(allowed)
	if err != nil {
		t.Fatal(err)
	}
	for _, np := range []int{1, usable.Cores, usable.Cores + 1} {
		j, sets, procs, cpus := affinities(t, Config{NP: np, Bind: BindAuto})
		var shares [][]int
		if np <= usable.Cores {
			shares = coreShares(usable, np, numa.Compact)
		} else {
			plan, _ := usable.Plan(np, numa.Compact)
			for _, c := range plan {
				shares = append(shares, []int{c})
			}
		}
		seen := map[int]bool{}
		for r := range np {
			want := slices.Sorted(slices.Values(shares[r]))
			if sets[r] != numa.FormatCPUList(want) || procs[r] != strconv.Itoa(len(want)) || cpus[r] != strconv.Itoa(shares[r][0]) {
				t.Errorf("np=%d rank %d: affinity %s gomaxprocs %s SHMCOLL_CPU %s; want %s, %d, %d", np, r, sets[r], procs[r], cpus[r],
					numa.FormatCPUList(want), len(want), shares[r][0])
			}
			if !slices.Equal(j.CPUs()[r], want) {
				t.Errorf("np=%d rank %d: Job.CPUs %v, want %v", np, r, j.CPUs()[r], want)
			}
			for _, c := range want {
				if seen[c] && np <= usable.Cores {
					t.Errorf("np=%d: CPU %d in two ranks' shares", np, c)
				}
				seen[c] = true
			}
		}
		if np <= usable.Cores && len(seen) != len(allowed) {
			t.Errorf("np=%d: shares cover %d of %d CPUs", np, len(seen), len(allowed))
		}
	}
}

// TestHomeNode: a bound rank finds its node with numa.HomeNode, on the host
// and on a fake topology the launcher planned on (whose spec the rank gets).
func TestHomeNode(t *testing.T) {
	fake, err := numa.ParseFake("2x2/2") // CPU c is on node c
	if err != nil {
		t.Fatal(err)
	}
	host, err := numa.Detect()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cfg  Config
		want []string
	}{
		{Config{NP: 4, Bind: BindCore, Topology: fake, Map: numa.Spread},
			[]string{"[0] home 0 topology 2x2/2", "[1] home 2 topology 2x2/2", "[2] home 1 topology 2x2/2", "[3] home 3 topology 2x2/2"}},
		{Config{NP: 1, Bind: BindCore, Topology: host},
			[]string{fmt.Sprintf("[0] home %d topology ", host.NodeOfCPU(host.CPUs[0].ID))}},
	} {
		j, stdout, _ := job(t, tc.cfg, "home")
		if err := j.Wait(); err != nil {
			t.Fatal(err)
		}
		if got := sortedLines(stdout.String()); !slices.Equal(got, tc.want) {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

// TestEscapedGrandchildHoldsOutput: a rank starts a process in a session of
// its own (out of the launcher's reach) that keeps the rank's stdout open,
// then fails. The failure is reported as the rank's, the other rank is
// killed, and the job still ends (the launcher stops waiting for the pipe).
func TestEscapedGrandchildHoldsOutput(t *testing.T) {
	setsid, err := exec.LookPath("setsid")
	if err != nil {
		t.Skip("no setsid")
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	var stdout bytes.Buffer
	j, err := Start(context.Background(), Config{NP: 2, Prog: sh, Stdout: &stdout, Args: []string{"-c",
		`if [ "$SHMCOLL_RANK" = 0 ]; then ` + setsid + ` sleep 3 & echo started; exit 4; fi; exec sleep 60`}})
	if err != nil {
		t.Fatal(err)
	}
	re := rankErr(t, j.Wait())
	if re.Rank != 0 || re.ExitCode() != 4 {
		t.Errorf("got %v, want rank 0 status 4", re)
	}
	if stdout.String() != "[0] started\n" {
		t.Errorf("stdout %q", stdout.String())
	}
}

// openFDs counts the launcher's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(ents)
}

// TestNoLeaks runs many jobs that succeed, fail, crash, time out or are
// killed, and checks that the launcher keeps no descriptor, no process and
// nothing in /dev/shm. SHMCOLL_LONG=1 runs more of them.
func TestNoLeaks(t *testing.T) {
	rounds := 4
	if os.Getenv("SHMCOLL_LONG") == "1" {
		rounds = 100
	}
	var jobs []*Job
	j0, _, _ := job(t, Config{NP: 1}, "exit:0")
	j0.Wait() // let the runtime open what it keeps open
	fds := openFDs(t)
	var pids []int
	for i := range rounds {
		for k, tc := range []struct {
			cfg     Config
			actions []string
		}{
			{Config{NP: 3}, []string{"join"}},
			{Config{NP: 3, ArenaKind: ArenaNamed}, []string{"join"}},
			{Config{NP: 3}, []string{"exit:2@1", "sleep:1h"}},
			{Config{NP: 2, ArenaKind: ArenaNamed}, []string{"signal:9@0", "join"}},
			{Config{NP: 2, Timeout: 50 * time.Millisecond}, []string{"sleep:1h"}},
			{Config{NP: 2, Bind: BindCore}, []string{"lines:100"}},
		} {
			j, _, _ := job(t, tc.cfg, tc.actions...)
			jobs = append(jobs, j)
			err := j.Wait()
			if (err == nil) != (k < 2 || k == 5) {
				t.Fatalf("round %d job %d: %v", i, k, err)
			}
			pids = append(pids, j.PIDs()...)
		}
	}
	if n := openFDs(t); n > fds {
		t.Errorf("%d descriptors open before, %d after", fds, n)
	}
	if left := leftArenas(jobs); len(left) > 0 {
		t.Errorf("/dev/shm still holds %v", left)
	}
	waitGone(t, pids)
}
