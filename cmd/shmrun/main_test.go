package main

import (
	"bytes"
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
)

// envMain makes the test binary act as shmrun itself.
const envMain = "SHMRUN_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envMain) != "" {
		os.Unsetenv(envMain) // the ranks are rank programs, not shmrun
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	launchtest.MaybeRun()
	os.Exit(m.Run())
}

// shmrun runs shmrun in this process with the test binary as the rank program.
func shmrun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	t.Setenv(launchtest.Env, "1")
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func sortedLines(s string) []string {
	if s == "" {
		return nil
	}
	l := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	sort.Strings(l)
	return l
}

func TestUsageErrors(t *testing.T) {
	self := os.Args[0]
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-np", "0", self}, "-np 0: need 1 to 4096 ranks"},
		{[]string{"-np", "-2", self}, "-np -2: need 1 to 4096 ranks"},
		{[]string{self}, "-np 0: need 1 to 4096 ranks"},
		{[]string{"-np", "5000", self}, "-np 5000: need 1 to 4096 ranks"},
		{[]string{"-np", "2"}, "missing program to run"},
		{[]string{"-np", "2", "-bind", "numa", self}, `-bind "numa": want core, socket, none or auto`},
		{[]string{"-np", "2", "-map", "scatter", self}, `-map "scatter": want compact or spread`},
		{[]string{"-np", "2", "-map", "none", self}, `-map "none": want compact or spread`},
		{[]string{"-np", "2", "-timeout", "-1s", self}, "must not be negative"},
		{[]string{"-np", "2", "-arena", "file", self}, `-arena "file": want memfd or named`},
		{[]string{"-np", "2", "-slot", "0", self}, `-slot "0": want a positive size`},
		{[]string{"-np", "2", "-slot", "4Q", self}, `-slot "4Q": want a positive size`},
		{[]string{"-np", "2", "-slot", "1025G", self}, `-slot "1025G": want a positive size`},
		{[]string{"-np", "2", "-slot", "128G", self}, "slot of 137438953472 bytes"},
		{[]string{"-np", "2", "-heap", "4Q", self}, `-heap "4Q": want a positive size`},
		{[]string{"-np", "x", self}, `invalid value "x" for flag -np`},
		{[]string{"-frobnicate", self}, "flag provided but not defined: -frobnicate"},
	} {
		code, stdout, stderr := shmrun(t, tc.args...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, tc.msg) || !strings.Contains(stderr, "usage: shmrun") {
			t.Errorf("shmrun %q: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, code, stdout, stderr, tc.msg)
		}
	}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-n", "0", self}, "-n 0: need 1 to 4096 ranks"},
		{[]string{"-n", "2", "-np", "3", self}, "-n 2 and -np 3: give the number of ranks once"},
	} {
		code, stdout, stderr := shmrun(t, tc.args...)
		if code != 2 || stdout != "" || !strings.Contains(stderr, tc.msg) || !strings.Contains(stderr, "usage: shmrun") {
			t.Errorf("shmrun %q: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, code, stdout, stderr, tc.msg)
		}
	}
}

// TestHelp: -h lists the flags, the environment each rank gets, the exit
// codes and an example.
func TestHelp(t *testing.T) {
	code, stdout, stderr := shmrun(t, "-h")
	if code != 0 || stdout != "" {
		t.Fatalf("shmrun -h: exit %d, stdout %q", code, stdout)
	}
	for _, want := range []string{"-n int", "-np int", "-bind mode", "SHMCOLL_RANK", "SHMCOLL_SIZE", "SHMCOLL_ARENA",
		"SHMCOLL_CPU", "GOMAXPROCS", "124", "127", "128+SIG", "Example:\n  shmrun -n 4 "} {
		if !strings.Contains(stderr, want) {
			t.Errorf("shmrun -h does not say %q:\n%s", want, stderr)
		}
	}
}

// TestRanksFlags: -n and -np both set the number of ranks, and may both be
// given if they agree.
func TestRanksFlags(t *testing.T) {
	for _, args := range [][]string{{"-n", "3"}, {"-np", "3"}, {"-n", "3", "-np", "3"}} {
		code, stdout, stderr := shmrun(t, append(args, os.Args[0], "env")...)
		if lines := sortedLines(stdout); code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[2], "[2] env 2 3 ") {
			t.Errorf("shmrun %q: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
}

func TestProgramNotFound(t *testing.T) {
	code, _, stderr := shmrun(t, "-np", "2", "shmcoll-no-such-program")
	if code != 127 || !strings.Contains(stderr, `"shmcoll-no-such-program"`) {
		t.Errorf("exit %d, stderr %q; want 127 naming the program", code, stderr)
	}
	code, _, _ = shmrun(t, "-np", "2", "./no/such/path")
	if code != 127 {
		t.Errorf("missing path: exit %d, want 127", code)
	}
}

func TestSuccess(t *testing.T) {
	code, stdout, stderr := shmrun(t, "-np", "3", os.Args[0], "env", "stderr:to stderr")
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	re := regexp.MustCompile(`^\[(\d)\] env (\d) 3 fd:3 \d*$`)
	lines := sortedLines(stdout)
	if len(lines) != 3 {
		t.Fatalf("stdout %q", stdout)
	}
	for i, l := range lines {
		if m := re.FindStringSubmatch(l); m == nil || m[1] != strconv.Itoa(i) || m[2] != m[1] {
			t.Errorf("line %q", l)
		}
	}
	if got := sortedLines(stderr); !slices.Equal(got, []string{"[0] to stderr", "[1] to stderr", "[2] to stderr"}) {
		t.Errorf("stderr %q", got)
	}
	code, stdout, _ = shmrun(t, "-np", "2", "-noprefix", os.Args[0], "echo:x")
	if code != 0 || stdout != "x\nx\n" {
		t.Errorf("-noprefix: exit %d, stdout %q", code, stdout)
	}
	// Flags after the program belong to the program.
	code, stdout, _ = shmrun(t, "-np", "1", os.Args[0], "echo:-np")
	if code != 0 || stdout != "[0] -np\n" {
		t.Errorf("program flags: exit %d, stdout %q", code, stdout)
	}
}

func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"-np", "3", os.Args[0], "exit:7@1", "sleep:1h"}, 7, "rank 1 (pid "},
		{[]string{"-np", "3", os.Args[0], "signal:9@2", "sleep:1h"}, 128 + 9, "rank 2 (pid "},
		{[]string{"-np", "2", os.Args[0], "panic@0", "sleep:1h"}, 2, "rank 0 (pid "},
		{[]string{"-np", "2", "-timeout", "200ms", os.Args[0], "sleep:1h"}, 124, "timed out after 200ms"},
		{[]string{"-np", "1", os.Args[0], "exit:255"}, 255, "exited with status 255"},
	} {
		start := time.Now()
		code, _, stderr := shmrun(t, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.msg) {
			t.Errorf("shmrun %q: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, tc.code, tc.msg)
		}
		t.Logf("%q: %v", tc.args, time.Since(start))
	}
}

// startShmrun starts the test binary as a real shmrun process.
func startShmrun(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), envMain+"=1", launchtest.Env+"=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd, &out
}

func readPids(t *testing.T, dir string, np int) []int {
	t.Helper()
	pids := make([]int, np)
	deadline := time.Now().Add(30 * time.Second)
	for r := range np {
		for {
			b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("rank%d.pid", r)))
			if err == nil {
				pids[r], _ = strconv.Atoi(string(b))
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("rank %d wrote no pid file", r)
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
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}

func waitGone(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("rank process %d outlived shmrun", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func exitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("shmrun did not exit")
	}
	return cmd.ProcessState.ExitCode()
}

// TestSIGTERMEndsAllRanks sends SIGTERM to a real shmrun: it forwards it,
// the ranks die of it, shmrun exits with 128+15 and no rank survives.
func TestSIGTERMEndsAllRanks(t *testing.T) {
	dir := t.TempDir()
	cmd, out := startShmrun(t, "-np", "3", os.Args[0], "pidfile:"+dir, "sleep:1h")
	pids := readPids(t, dir, 3)
	cmd.Process.Signal(syscall.SIGTERM)
	if code := exitCode(t, cmd); code != 128+15 {
		t.Errorf("shmrun exit %d, want 143; output %q", code, out)
	}
	waitGone(t, pids)
}

// TestSIGINTForwarded: ranks that handle SIGINT see it exactly once (a
// terminal's SIGINT reaches only shmrun's process group; shmrun forwards it)
// and exit normally.
func TestSIGINTForwarded(t *testing.T) {
	dir := t.TempDir()
	cmd, out := startShmrun(t, "-np", "2", os.Args[0], "trapterm:0", "pidfile:"+dir, "sleep:1h")
	pids := readPids(t, dir, 2)
	cmd.Process.Signal(syscall.SIGINT)
	if code := exitCode(t, cmd); code != 0 {
		t.Errorf("shmrun exit %d, want 0; output %q", code, out)
	}
	for r := range 2 {
		if want := fmt.Sprintf("[%d] rank %d got interrupt\n", r, r); strings.Count(out.String(), want) != 1 {
			t.Errorf("output %q does not hold %q once", out, want)
		}
	}
	waitGone(t, pids)
}

// TestShmrunKilled: when shmrun dies by SIGKILL (no chance to forward), its
// ranks die with it.
func TestShmrunKilled(t *testing.T) {
	dir := t.TempDir()
	cmd, _ := startShmrun(t, "-np", "2", os.Args[0], "pidfile:"+dir, "sleep:1h")
	pids := readPids(t, dir, 2)
	cmd.Process.Kill()
	exitCode(t, cmd)
	waitGone(t, pids)
}

func TestFailureEndsShmrun(t *testing.T) {
	dir := t.TempDir()
	cmd, out := startShmrun(t, "-np", "4", os.Args[0], "pidfile:"+dir, "await:"+dir, "exit:9@3", "sleep:1h")
	pids := readPids(t, dir, 4)
	if code := exitCode(t, cmd); code != 9 {
		t.Errorf("shmrun exit %d, want 9; output %q", code, out)
	}
	if !strings.Contains(out.String(), "shmrun: rank 3 (pid "+strconv.Itoa(pids[3])+") exited with status 9") {
		t.Errorf("output %q does not name rank 3", out)
	}
	waitGone(t, pids)
}

// TestJoin: ranks started by shmrun join their arena with one call, for
// both kinds of arena; nothing is left in /dev/shm.
func TestJoin(t *testing.T) {
	before, _ := filepath.Glob("/dev/shm/shmcoll.*")
	for _, tc := range []struct {
		args       []string
		slot, heap int
	}{
		{[]string{"-np", "3"}, 4 << 20, 0},
		{[]string{"-np", "3", "-slot", "64K", "-heap", "1M"}, 64 << 10, 1 << 20},
		{[]string{"-np", "2", "-arena", "named"}, 4 << 20, 0},
	} {
		code, stdout, stderr := shmrun(t, append(tc.args, os.Args[0], "join")...)
		np, _ := strconv.Atoi(tc.args[1])
		var want []string
		for r := range np {
			want = append(want, fmt.Sprintf("[%d] joined %d of %d slot %d heap %d", r, r, np, tc.slot, tc.heap))
		}
		if got := sortedLines(stdout); code != 0 || !slices.Equal(got, want) {
			t.Errorf("shmrun %q: exit %d, stdout %q, stderr %q; want %q", tc.args, code, got, stderr, want)
		}
	}
	// Segments of other test binaries (go test runs packages side by side)
	// come and go within seconds; one that a job here left behind stays.
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		after, _ := filepath.Glob("/dev/shm/shmcoll.*")
		left := slices.DeleteFunc(after, func(s string) bool { return slices.Contains(before, s) })
		if len(left) == 0 {
			break
		}
		if time.Now().After(end) {
			t.Errorf("/dev/shm: %v left behind", left)
			break
		}
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int{"1": 1, "65536": 65536, "64K": 64 << 10, "4M": 4 << 20, "2G": 2 << 30} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "K", "-1", "0", "1.5M", "4m", "2T", "99999999999999999999"} {
		if got, err := parseBytes(bad); err == nil {
			t.Errorf("parseBytes(%q) = %d, want an error", bad, got)
		}
	}
}

// procState returns the state letter of /proc/pid/stat (R, S, T, Z, ...).
func procState(t *testing.T, pid int) byte {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.LastIndexByte(b, ')')
	return b[i+2]
}

// waitStopped waits until every pid is stopped (state T), or, with stopped
// false, no longer stopped.
func waitStopped(t *testing.T, stopped bool, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for _, pid := range pids {
		for (procState(t, pid) == 'T') != stopped {
			if time.Now().After(deadline) {
				t.Fatalf("pid %d: state %c, want stopped=%v", pid, procState(t, pid), stopped)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// TestStopAndContinue: SIGTSTP stops the ranks and shmrun; SIGCONT resumes
// them all, and the job then ends normally.
func TestStopAndContinue(t *testing.T) {
	dir := t.TempDir()
	cmd, out := startShmrun(t, "-np", "2", os.Args[0], "trapterm:0", "pidfile:"+dir, "sleep:1h")
	pids := readPids(t, dir, 2)
	cmd.Process.Signal(syscall.SIGTSTP)
	waitStopped(t, true, append(pids, cmd.Process.Pid)...)
	cmd.Process.Signal(syscall.SIGCONT)
	waitStopped(t, false, append(pids, cmd.Process.Pid)...)
	cmd.Process.Signal(syscall.SIGTERM)
	if code := exitCode(t, cmd); code != 0 {
		t.Errorf("shmrun exit %d, want 0; output %q", code, out)
	}
	for r := range 2 {
		if want := fmt.Sprintf("[%d] rank %d got terminated\n", r, r); strings.Count(out.String(), want) != 1 {
			t.Errorf("output %q does not hold %q once", out, want)
		}
	}
	waitGone(t, pids)
}

// TestAutoBindKeepsCPUs: with the default binding a lone rank is bound to
// every CPU shmrun may use and its GOMAXPROCS counts them all; two ranks
// on as many cores get disjoint sets that cover them.
func TestAutoBindKeepsCPUs(t *testing.T) {
	allowed, err := numa.AllowedCPUs()
	if err != nil {
		t.Skip(err)
	}
	code, stdout, stderr := shmrun(t, "-n", "1", os.Args[0], "affinity")
	want := fmt.Sprintf("[0] affinity %s gomaxprocs %d\n", numa.FormatCPUList(allowed), len(allowed))
	if code != 0 || stdout != want {
		t.Errorf("-n 1: exit %d, stdout %q, stderr %q; want %q", code, stdout, stderr, want)
	}
	host, err := numa.Detect()
	if err != nil {
		t.Fatal(err)
	}
	if usable, err := host.Restrict(allowed); err != nil || usable.Cores < 2 {
		t.Skipf("fewer than 2 cores to share (%v)", err)
	}
	code, stdout, stderr = shmrun(t, "-n", "2", os.Args[0], "affinity")
	re := regexp.MustCompile(`^\[\d\] affinity (\S+) gomaxprocs (\d+)$`)
	var all []int
	for _, l := range sortedLines(stdout) {
		m := re.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("-n 2: exit %d, line %q, stderr %q", code, l, stderr)
		}
		cpus, _ := numa.ParseCPUList(m[1])
		if m[2] != strconv.Itoa(len(cpus)) {
			t.Errorf("-n 2: %q: GOMAXPROCS is not the size of the set", l)
		}
		all = append(all, cpus...)
	}
	slices.Sort(all)
	if code != 0 || !slices.Equal(all, allowed) {
		t.Errorf("-n 2: exit %d, sets cover %v, want each of %v once", code, all, allowed)
	}
}
