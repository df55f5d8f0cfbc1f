package tests

// SIGINT and SIGTERM to shmrun and to shmbench run in the middle of a job:
// the command exits non-zero, no rank survives, and nothing of the job
// remains in /dev/shm (the job's arena, and the arenas of communicators the
// ranks made with Dup while the signal came).

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// descendants returns the processes below pid (from /proc).
func descendants(pid int) []int {
	parent := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 1 {
			pp, _ := strconv.Atoi(f[1])
			parent[p] = pp
		}
	}
	var out []int
	var walk func(int)
	walk = func(p int) {
		for c, pp := range parent {
			if pp == p {
				out = append(out, c)
				walk(c)
			}
		}
	}
	walk(pid)
	return out
}

// processGone reports whether pid has exited (or is a zombie).
func processGone(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X')
}

// lineWaiter collects the lines of a command's output and lets a test wait
// for a number of lines matching a prefix.
type lineWaiter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	count map[string]int
	ch    chan struct{}
}

func newLineWaiter(r io.Reader, prefixes ...string) *lineWaiter {
	w := &lineWaiter{count: map[string]int{}, ch: make(chan struct{}, 1)}
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			w.mu.Lock()
			w.buf.WriteString(sc.Text() + "\n")
			for _, p := range prefixes {
				if strings.Contains(sc.Text(), p) {
					w.count[p]++
				}
			}
			w.mu.Unlock()
			select {
			case w.ch <- struct{}{}:
			default:
			}
		}
	}()
	return w
}

func (w *lineWaiter) wait(t *testing.T, prefix string, n int, d time.Duration) bool {
	t.Helper()
	end := time.After(d)
	for {
		w.mu.Lock()
		c := w.count[prefix]
		w.mu.Unlock()
		if c >= n {
			return true
		}
		select {
		case <-w.ch:
		case <-end:
			return false
		}
	}
}

func (w *lineWaiter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// signalJob starts cmd, waits until ready() says the job runs, sends sig to
// the command, and checks the exit status (wantCode, or any but 0 if
// wantCode is -1), the ranks' deaths and /dev/shm.
func signalJob(t *testing.T, name string, cmd *exec.Cmd, sig syscall.Signal, wantCode int, ready func(out *lineWaiter) bool) {
	t.Helper()
	before := shmSnapshot()
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	out := newLineWaiter(pr, "READY", "allreduce")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); pw.Close() }()
	if !ready(out) {
		cmd.Process.Kill()
		<-done
		t.Fatalf("%s: the job did not start:\n%s", name, out)
	}
	ranks := descendants(cmd.Process.Pid)
	pids := map[int]bool{}
	for _, p := range ranks {
		pids[p] = true
	}
	cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%s: still running 60s after %v:\n%s", name, sig, out)
	}
	if code := cmd.ProcessState.ExitCode(); code == 0 || (wantCode > 0 && code != wantCode) {
		t.Errorf("%s: exit status %d after %v, want %d (-1: any but 0)\n%s", name, code, sig, wantCode, out)
	}
	for _, p := range ranks {
		if !processGone(p) {
			t.Errorf("%s: process %d survived the job", name, p)
			syscall.Kill(p, syscall.SIGKILL)
		}
	}
	noLeak(t, before, pids)
}

// TestFaultSignalShmrun: SIGINT and SIGTERM to shmrun while its ranks run
// collectives and Dup communicators (named arenas come and go).
func TestFaultSignalShmrun(t *testing.T) {
	shmrun, rank := tool(t, "cmd/shmrun"), tool(t, "tests/internal/faultrank")
	rounds := 3
	if testing.Short() {
		rounds = 1
	}
	if longMode() {
		rounds = 20
	}
	// Every third call is a Dup: a signal that comes while the ranks join
	// the new arena kills its creator before the last rank joins and
	// unlinks it; the launcher removes such segments (shm.Cleanup).
	dupEvery := 3
	for i := range rounds {
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
			for _, arena := range []string{"memfd", "named"} {
				np := 2 + i%3
				name := fmt.Sprintf("round %d %v %s np=%d", i, sig, arena, np)
				cmd := exec.Command(shmrun, "-np", strconv.Itoa(np), "-arena", arena, "-slot", "64K", "-bind", "none",
					rank, "-mode", "loop", "-dupevery", strconv.Itoa(dupEvery), "-seed", strconv.Itoa(i), "-maxn", "4096", "-slot", "65536")
				// The ranks die of the forwarded signal: shmrun reports the
				// first one, 128+signal.
				signalJob(t, name, cmd, sig, 128+int(sig), func(out *lineWaiter) bool {
					if !out.wait(t, "READY", np, 30*time.Second) {
						return false
					}
					time.Sleep(time.Duration(20+37*i) * time.Millisecond)
					return true
				})
			}
		}
	}
}

// TestFaultSignalShmbench: SIGINT and SIGTERM to shmbench run while it
// measures.
func TestFaultSignalShmbench(t *testing.T) {
	if testing.Short() {
		t.Skip("builds shmbench")
	}
	bench := tool(t, "cmd/shmbench")
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		cmd := exec.Command(bench, "run", "-np", "3", "-coll", "allreduce,bcast,allgather", "-algo", "all",
			"-sizes", "8:1M:4", "-time", "300ms", "-format", "csv", "-bind", "none")
		signalJob(t, fmt.Sprintf("shmbench run %v", sig), cmd, sig, -1, func(out *lineWaiter) bool {
			// The first result line: the ranks are measuring.
			return out.wait(t, "allreduce", 1, 60*time.Second)
		})
	}
}

// TestFaultKill9Shmbench: SIGKILL to one of shmbench run's ranks while it
// measures: shmbench exits non-zero naming the rank, the other ranks end,
// nothing remains in /dev/shm.
func TestFaultKill9Shmbench(t *testing.T) {
	if testing.Short() {
		t.Skip("builds shmbench")
	}
	bench := tool(t, "cmd/shmbench")
	before := shmSnapshot()
	cmd := exec.Command(bench, "run", "-np", "3", "-coll", "allreduce,allgather,bcast", "-algo", "all",
		"-sizes", "8:4M:4", "-time", "300ms", "-format", "csv", "-bind", "none")
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	out := newLineWaiter(pr, "allreduce")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); pw.Close() }()
	if !out.wait(t, "allreduce", 1, 60*time.Second) {
		cmd.Process.Kill()
		<-done
		t.Fatalf("shmbench did not start measuring:\n%s", out)
	}
	ranks := descendants(cmd.Process.Pid)
	if len(ranks) < 3 {
		t.Fatalf("shmbench has %d child processes, want 3", len(ranks))
	}
	pids := map[int]bool{}
	for _, p := range ranks {
		pids[p] = true
	}
	victim := ranks[len(ranks)/2]
	syscall.Kill(victim, syscall.SIGKILL)
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("shmbench still running 60s after a rank was killed:\n%s", out)
	}
	if code := cmd.ProcessState.ExitCode(); code == 0 {
		t.Errorf("shmbench exited with 0 after a rank was killed:\n%s", out)
	}
	if !strings.Contains(out.String(), fmt.Sprintf("(pid %d) killed by signal 9", victim)) {
		t.Errorf("shmbench does not name the killed rank (pid %d):\n%s", victim, lastLines(out.String(), 20))
	}
	for _, p := range ranks {
		if !processGone(p) {
			t.Errorf("process %d survived", p)
			syscall.Kill(p, syscall.SIGKILL)
		}
	}
	noLeak(t, before, pids)
}
