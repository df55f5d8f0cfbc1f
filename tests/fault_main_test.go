package tests

// Helpers of the fault, misuse, security and soak tests: the programs they
// run (shmrun, shmbench and the rank program tests/internal/faultrank), built
// once per test binary into a temporary directory, and the /dev/shm checks.
//
// Knobs of these tests:
//
//	SHMCOLL_LONG=1          long modes (1000 kill trials, 100,000-call soak,
//	                        20,000 Dup races, the docs/floors programs, ...)
//	SHMCOLL_FAULT_TRIALS=N  number of kill -9 trials
//	SHMCOLL_FAULT_SEED=S    rerun trials from seed S (the log prints it)
//	SHMCOLL_SOAK=D          duration of the process soaks
//	SHMCOLL_SOAK_SEED=S     rerun the in-process soak
//	SHMCOLL_KNOWN_BUGS=1    run the reproductions of bugs reported in other
//	                        packages (skipped otherwise)

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var toolDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if toolDir != "" {
		os.RemoveAll(toolDir)
	}
	os.Exit(code)
}

var (
	toolMu    sync.Mutex
	toolBuilt = map[string]string{}
)

// tool builds the main package pkg (relative to the module root, e.g.
// "cmd/shmrun") once and returns the path of the binary.
func tool(t testing.TB, pkg string) string {
	t.Helper()
	toolMu.Lock()
	defer toolMu.Unlock()
	if p, ok := toolBuilt[pkg]; ok {
		return p
	}
	if toolDir == "" {
		d, err := os.MkdirTemp("", "shmcoll-tests-")
		if err != nil {
			t.Fatal(err)
		}
		toolDir = d
	}
	out := filepath.Join(toolDir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, "github.com/shmcoll/shmcoll/"+pkg)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	toolBuilt[pkg] = out
	return out
}

func longMode() bool { return os.Getenv("SHMCOLL_LONG") == "1" }

// rankLine is one event line of the rank program, as shmrun prefixes it.
type rankLine struct {
	rank   int
	kind   string // READY, KILL, FAIL, WRONG, DONE, SAMPLE, JOINFAIL
	fields map[string]string
	text   string
}

var lineRE = regexp.MustCompile(`^\[(\d+)\] (READY|KILL|FAIL|WRONG|DONE|SAMPLE|JOINFAIL|LATE)\b ?(.*)$`)

// parseLines extracts the rank program's event lines from shmrun's output.
func parseLines(out string) []rankLine {
	var ls []rankLine
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := lineRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		r, _ := strconv.Atoi(m[1])
		l := rankLine{rank: r, kind: m[2], text: m[3], fields: map[string]string{}}
		rest := m[3]
		// key=value pairs up to err=, which takes the rest of the line.
		for rest != "" {
			kv, tail, _ := strings.Cut(rest, " ")
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				break
			}
			if k == "err" {
				l.fields[k] = strings.TrimPrefix(rest, "err=")
				break
			}
			l.fields[k] = v
			rest = tail
		}
		ls = append(ls, l)
	}
	return ls
}

func (l rankLine) int(t *testing.T, k string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(l.fields[k], 10, 64)
	if err != nil {
		t.Fatalf("rank %d %s line: field %s=%q: %v", l.rank, l.kind, k, l.fields[k], err)
	}
	return v
}

// segmentCreator returns the creator pid recorded in a segment's header
// (offset 64, documented in shm/doc.go), or 0.
func segmentCreator(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	var b [4]byte
	if _, err := f.ReadAt(b[:], 64); err != nil {
		return 0
	}
	return int(binary.NativeEndian.Uint32(b[:]))
}

// shmSnapshot lists the segments of this uid in /dev/shm.
func shmSnapshot() map[string]bool {
	m := map[string]bool{}
	ls, _ := filepath.Glob(fmt.Sprintf("/dev/shm/shmcoll.%d.*", os.Getuid()))
	for _, p := range ls {
		m[p] = true
	}
	return m
}

// noLeak fails t if a segment that is not in before remains in /dev/shm
// and was created by one of pids (other engineers' tests create segments
// concurrently; theirs are not ours to judge), or if one of names exists.
func noLeak(t *testing.T, before map[string]bool, pids map[int]bool, names ...string) {
	t.Helper()
	for _, n := range names {
		if n == "" || strings.HasPrefix(n, "fd:") {
			continue
		}
		p := filepath.Join("/dev/shm", n)
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("segment %s left in /dev/shm", p)
		}
	}
	// Give a dying rank's unlink a moment: the launcher has reaped it, so
	// nothing should be pending, but a stale segment is judged twice.
	for i := 0; i < 2; i++ {
		var left []string
		for p := range shmSnapshot() {
			if !before[p] && pids[segmentCreator(p)] {
				left = append(left, p)
			}
		}
		if len(left) == 0 {
			return
		}
		if i == 1 {
			t.Errorf("segments of this test left in /dev/shm: %v", left)
			// Reported; removed so that the next tests start clean.
			for _, p := range left {
				os.Remove(p)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// knownBug skips a test that fails because of a bug reported in another
// package, unless SHMCOLL_KNOWN_BUGS=1: the test stays the reproduction
// and turns into a plain test once the bug is fixed (remove the call).
func knownBug(t *testing.T, bug string) {
	t.Helper()
	if os.Getenv("SHMCOLL_KNOWN_BUGS") != "1" {
		t.Skip("known bug (SHMCOLL_KNOWN_BUGS=1 runs this test): " + bug)
	}
}
