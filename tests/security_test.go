package tests

// Security: segments are created 0600 and exclusively, never through a
// symbolic link; another uid can neither attach to our arenas nor make us
// attach to one it planted; and a hostile peer that scribbles over the
// arena (descriptors, counters, abort records, states, slots, the header)
// cannot make a rank panic, hang, or read or write outside the mapping.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shmcoll/shmcoll/collectives"
	"github.com/shmcoll/shmcoll/shm"
	"github.com/shmcoll/shmcoll/tests/internal/callmix"
	"golang.org/x/sys/unix"
)

// waitSegment waits until the segment at path has its header (magic
// written last by the creator) and returns its size.
func waitSegment(t *testing.T, path string) int64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(path)
		if err == nil && len(b) >= 4096 && binary.NativeEndian.Uint64(b) != 0 {
			return int64(len(b))
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("%s did not appear", path)
	return 0
}

func TestSecuritySegmentCreation(t *testing.T) {
	name := shm.NewName()
	path, _ := shm.SegmentPath(name)
	var wg sync.WaitGroup
	var c0 *collectives.Comm
	var err0 error
	wg.Go(func() { c0, err0 = collectives.Join(bg, name, 0, 2, collectives.Options{SlotBytes: 4096}) })
	waitSegment(t, path)
	st, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	sys := st.Sys().(*syscall.Stat_t)
	if !st.Mode().IsRegular() || st.Mode().Perm() != 0o600 || int(sys.Uid) != os.Getuid() {
		t.Errorf("segment %s: mode %v uid %d, want a regular file 0600 of uid %d", path, st.Mode(), sys.Uid, os.Getuid())
	}
	// Exclusive: a second creator of the name is refused and changes nothing.
	before, _ := os.ReadFile(path)
	if err := joinErr(name, 0, 2, collectives.Options{SlotBytes: 4096}); !errors.Is(err, shm.ErrExists) {
		t.Errorf("second creator: %v, want ErrExists", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before[:4096], after[:4096]) {
		t.Error("the second creator changed the header")
	}
	c1, err := collectives.Join(bg, name, 1, 2, collectives.Options{SlotBytes: 4096})
	wg.Wait()
	if err != nil || err0 != nil {
		t.Fatal(err, err0)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("segment still in /dev/shm after all ranks joined: %v", err)
	}
	checkHealthy(t, "after the refused creator", []*collectives.Comm{c0, c1}, 1)
	c0.Close()
	c1.Close()

	// A launcher's memfd arena is 0600 too (a memfd starts 0777).
	f, err := shm.CreateFD(2, shm.Options{SlotBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("memfd arena: mode %v (%v), want 0600", st.Mode(), err)
	}
}

func TestSecuritySymlink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	content := []byte("precious data\n")
	if err := os.WriteFile(victim, content, 0o644); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(dir, "created-through-link")
	for _, target := range []string{victim, dangling} {
		name := shm.NewName()
		path, _ := shm.SegmentPath(name)
		if err := os.Symlink(target, path); err != nil {
			t.Fatal(err)
		}
		err0 := joinErr(name, 0, 2, collectives.Options{SlotBytes: 4096})
		ep, err1 := shm.Join(bg, name, 1, 2, shm.Options{SlotBytes: 4096, JoinTimeout: 300 * time.Millisecond})
		if err1 == nil {
			ep.Close()
		}
		if !errors.Is(err0, shm.ErrExists) {
			t.Errorf("link to %s: creator: %v, want ErrExists", target, err0)
		}
		if !errors.Is(err1, shm.ErrBadHeader) || !strings.Contains(err1.Error(), "symbolic link") {
			t.Errorf("link to %s: joiner: %v, want ErrBadHeader: symbolic link", target, err1)
		}
		if l, err := os.Readlink(path); err != nil || l != target {
			t.Errorf("the link was changed: %q %v", l, err)
		}
		os.Remove(path)
	}
	if b, err := os.ReadFile(victim); err != nil || !bytes.Equal(b, content) {
		t.Errorf("the link's target was written: %q %v", b, err)
	}
	if _, err := os.Lstat(dangling); !os.IsNotExist(err) {
		t.Errorf("a file was created through the dangling link: %v", err)
	}
	// shm.Cleanup does not follow links either.
	name := shm.NewName()
	path, _ := shm.SegmentPath(name)
	if err := os.Symlink(victim, path); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(path)
	if _, err := shm.Cleanup(); err != nil {
		t.Logf("Cleanup: %v", err)
	}
	if b, err := os.ReadFile(victim); err != nil || !bytes.Equal(b, content) {
		t.Errorf("Cleanup touched the link's target: %q %v", b, err)
	}
}

// otherUser returns the uid and gid of a second user (made with useradd if
// absent), or skips.
func otherUser(t *testing.T) (int, int) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root to run a process as another user")
	}
	const name = "shmcolltest"
	u, err := user.Lookup(name)
	if err != nil {
		out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name).CombinedOutput()
		if err != nil {
			t.Skipf("cannot create a second user: %v: %s", err, out)
		}
		if u, err = user.Lookup(name); err != nil {
			t.Skipf("user %s: %v", name, err)
		}
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return uid, gid
}

// asUser runs the rank program with args as uid:gid and returns its output.
func asUser(t *testing.T, uid, gid int, args ...string) string {
	t.Helper()
	bin := tool(t, "tests/internal/faultrank")
	// The other user must be able to run the program.
	os.Chmod(filepath.Dir(bin), 0o755)
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, _ := cmd.CombinedOutput()
	return string(out)
}

func TestSecurityOtherUID(t *testing.T) {
	uid, gid := otherUser(t)
	// Our arena, waiting for its second rank: the other user can neither
	// open the segment nor join it by name.
	name := shm.NewName()
	path, _ := shm.SegmentPath(name)
	var wg sync.WaitGroup
	var c0 *collectives.Comm
	var err0 error
	wg.Go(func() { c0, err0 = collectives.Join(bg, name, 0, 2, collectives.Options{SlotBytes: 4096}) })
	waitSegment(t, path)
	out := asUser(t, uid, gid, "-mode", "attach", "-path", path)
	if !strings.Contains(out, "ATTACH open err=open "+path+": permission denied") {
		t.Errorf("uid %d opened our segment: %s", uid, out)
	}
	if !strings.Contains(out, "ATTACH join err=") || strings.Contains(out, "ATTACH join err=<nil>") || !strings.Contains(out, "not of uid "+strconv.Itoa(uid)) {
		t.Errorf("uid %d joined our arena: %s", uid, out)
	}
	c1, err := collectives.Join(bg, name, 1, 2, collectives.Options{SlotBytes: 4096})
	wg.Wait()
	if err != nil || err0 != nil {
		t.Fatal(err, err0)
	}
	checkHealthy(t, "the arena the other user tried", []*collectives.Comm{c0, c1}, 1)
	c0.Close()
	c1.Close()

	// A segment the other user planted under our arena's name, with a valid
	// header: our ranks refuse it and leave it alone.
	good := realSegment(t, 4096)
	sf, err := os.CreateTemp("", "shmcoll-plant-")
	if err != nil {
		t.Fatal(err)
	}
	src := sf.Name()
	defer os.Remove(src)
	sf.Write(good)
	sf.Close()
	os.Chmod(src, 0o644) // the other user reads it
	name = shm.NewName()
	path, _ = shm.SegmentPath(name)
	if out := asUser(t, uid, gid, "-mode", "plant", "-path", path, "-from", src); !strings.Contains(out, "PLANTED") {
		t.Fatalf("the other user could not plant a file: %s", out)
	}
	defer os.Remove(path)
	ep, err := shm.Join(bg, name, 1, 2, shm.Options{SlotBytes: 4096, JoinTimeout: 300 * time.Millisecond})
	if err == nil {
		ep.Close()
	}
	if !errors.Is(err, shm.ErrBadHeader) || !strings.Contains(err.Error(), fmt.Sprintf("owned by uid %d", uid)) {
		t.Errorf("joining a planted segment: %v, want ErrBadHeader: owned by uid %d", err, uid)
	}
	if err := joinErr(name, 0, 2, collectives.Options{SlotBytes: 4096}); !errors.Is(err, shm.ErrExists) {
		t.Errorf("creating over a planted segment: %v, want ErrExists", err)
	}
	if b, err := os.ReadFile(path); err != nil || !bytes.Equal(b, good) {
		t.Errorf("the planted file was changed: %v", err)
	}
}

// Arena layout (shm/doc.go) for the scribbler.
const (
	lHeader      = 4096
	lCtrl        = 2048
	lAbortWord   = 256
	lAbortRecord = 16
	lDescriptor  = 384
	lCounters    = 1024
	lLine        = 128
)

// hostileArena joins p goroutine ranks to a named arena and maps the
// segment a second time, as a hostile process with write access would:
// the returned memory is the arena the ranks use.
func hostileArena(t *testing.T, p, slot int) ([]*collectives.Comm, []byte) {
	t.Helper()
	name := shm.NewName()
	path, _ := shm.SegmentPath(name)
	comms := make([]*collectives.Comm, p)
	errs := make([]error, p)
	opt := collectives.Options{SlotBytes: slot, Timeout: 500 * time.Millisecond}
	var wg sync.WaitGroup
	for r := range p - 1 {
		wg.Go(func() { comms[r], errs[r] = collectives.Join(bg, name, r, p, opt) })
	}
	size := waitSegment(t, path)
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_NOFOLLOW, 0)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	unix.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	comms[p-1], errs[p-1] = collectives.Join(bg, name, p-1, p, opt)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range comms {
			c.Close()
		}
	})
	return comms, mem
}

// region is a byte range of the arena a scribbler overwrites.
type region struct{ lo, hi int }

func TestSecurityHostilePeer(t *testing.T) {
	const p, slot = 3, 16 << 10
	slotsOff := (lHeader + p*lCtrl + 4095) / 4096 * 4096
	ctrl := func(q int) int { return lHeader + q*lCtrl }
	lines := func(q int, lo, hi int) []region {
		var rs []region
		for c := range 8 {
			b := ctrl(q) + lCounters + c*lLine
			rs = append(rs, region{b + lo, b + hi})
		}
		return rs
	}
	cases := []struct {
		name    string
		regions []region
		// wrong: results may be wrong (the hostile peer wrote data or
		// counters, which shared memory cannot protect); never a panic,
		// a hang or an access outside the mapping.
		wrong bool
	}{
		// The counter's line: the call descriptor's hash (bytes 8-16),
		// then the tiny payload (16-56), data like a slot's.
		{"call descriptors of rank 1", lines(1, 8, 16), false},
		{"call descriptors of every rank", append(append(lines(0, 8, 16), lines(1, 8, 16)...), lines(2, 8, 16)...), false},
		{"full call descriptors and store advice", []region{{ctrl(0) + lDescriptor + 256, ctrl(0) + lDescriptor + 384}, {ctrl(1) + lDescriptor + 256, ctrl(1) + lDescriptor + 384}}, false},
		{"tiny payloads of every rank", append(append(lines(0, 16, 56), lines(1, 16, 56)...), lines(2, 16, 56)...), true},
		// A split whose entries disagree fails on the rank that reads a
		// bad name, and the others' joins, which watch the parent, with
		// it; only valid but different names wait for the join timeout.
		{"split entries", []region{{ctrl(0) + lDescriptor, ctrl(0) + lDescriptor + 256}, {ctrl(2) + lDescriptor, ctrl(2) + lDescriptor + 256}}, false},
		{"abort records", []region{{ctrl(0) + lAbortRecord, ctrl(0) + lDescriptor}, {ctrl(1) + lAbortRecord, ctrl(1) + lDescriptor}}, false},
		{"abort word", []region{{lAbortWord, lAbortWord + 8}}, false},
		{"states and pids", []region{{ctrl(1), ctrl(1) + 16}, {ctrl(2), ctrl(2) + 16}}, false},
		{"sleeper counts", append(lines(0, 56, 64), lines(2, 56, 64)...), false},
		{"header", []region{{0, lAbortWord}, {lAbortWord + 8, lHeader}}, false},
		{"counters of rank 1", lines(1, 0, 8), true},
		{"slot of rank 2", []region{{slotsOff + 2*slot, slotsOff + 3*slot}}, true},
	}
	calls := 60
	if longMode() {
		calls = 2000
	}
	// Each case runs in a child process (this test binary): a rank that
	// dies of a fault fails its case, not the whole test binary.
	if v := os.Getenv(envHostileCase); v != "" {
		ci, _ := strconv.Atoi(v)
		cases = cases[ci : ci+1]
		hostileCase(t, ci, cases[0].name, cases[0].regions, cases[0].wrong, p, slot, calls)
		return
	}
	for ci, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if bug := hostileBugs[tc.name]; bug != "" {
				knownBug(t, bug)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestSecurityHostilePeer$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), envHostileCase+"="+strconv.Itoa(ci))
			out, err := cmd.CombinedOutput()
			for _, l := range strings.Split(string(out), "\n") {
				if strings.Contains(l, "outcomes:") {
					t.Log(strings.TrimSpace(l))
				}
			}
			if err != nil {
				o := string(out)
				if len(o) > 6000 {
					o = o[:6000] + "\n..."
				}
				t.Errorf("child: %v\n%s", err, o)
			}
		})
	}
}

const envHostileCase = "SHMCOLL_TESTS_HOSTILE_CASE"

// hostileBugs are the cases that crash a rank today (reported); each
// entry skips its case unless SHMCOLL_KNOWN_BUGS=1. None is known now.
var hostileBugs = map[string]string{}

// hostileCase runs p goroutine ranks on a scribbled arena (in a child).
func hostileCase(t *testing.T, ci int, name string, regions []region, wrongOK bool, p, slot, calls int) {
	tc := struct {
		name    string
		regions []region
		wrong   bool
	}{name, regions, wrongOK}
	var total, failed, wrongs atomic.Int64
	{
		{
			comms, mem := hostileArena(t, p, slot)
			stop := make(chan struct{})
			var sw sync.WaitGroup
			sw.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(ci), 1))
				for {
					select {
					case <-stop:
						return
					default:
					}
					rg := tc.regions[rng.IntN(len(tc.regions))]
					off := (rg.lo + rng.IntN(rg.hi-rg.lo)) &^ 7
					if off+8 <= rg.hi && off >= rg.lo {
						v := rng.Uint64()
						if rng.IntN(4) == 0 {
							v = uint64(rng.IntN(8)) // small values: ranks, states, lengths
						}
						binary.NativeEndian.PutUint64(mem[off:], v)
					}
					if rng.IntN(8) == 0 {
						time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
					} else {
						runtime.Gosched()
					}
				}
			})
			outcome := make([]string, p)
			var wg sync.WaitGroup
			for r, c := range comms {
				wg.Go(func() {
					defer func() {
						if x := recover(); x != nil {
							outcome[r] = fmt.Sprintf("PANIC: %v", x)
							c.Abort(fmt.Errorf("rank %d panicked", r))
						}
					}()
					rng := rand.New(rand.NewPCG(uint64(ci), 2))
					for k := range calls {
						// Longer than the join timeout of a Split's arena
						// (20s): a wait that ends is not a hang.
						ctx, cancel := context.WithTimeout(bg, 40*time.Second)
						var err error
						s := callmix.Gen(rng, p, k, 2048)
						if k%9 == 8 {
							var d *collectives.Comm
							if d, err = c.Dup(ctx); err == nil {
								d.Close()
							}
						} else {
							err = callmix.Run(ctx, c, s)
						}
						cancel()
						var ce *callmix.CheckError
						switch {
						case err == nil:
							continue
						case errors.As(err, &ce):
							outcome[r] = "WRONG: " + err.Error()
							c.Abort(err)
						case errors.Is(err, context.DeadlineExceeded):
							outcome[r] = "HANG: " + err.Error()
							c.Abort(err)
						default:
							outcome[r] = "error: " + err.Error()
						}
						return
					}
					outcome[r] = "ok"
				})
			}
			wg.Wait()
			close(stop)
			sw.Wait()
			for r, o := range outcome {
				total.Add(1)
				switch {
				case strings.HasPrefix(o, "PANIC"), strings.HasPrefix(o, "HANG"):
					t.Errorf("rank %d: %s", r, o)
				case strings.HasPrefix(o, "WRONG"):
					wrongs.Add(1)
					if !tc.wrong {
						t.Errorf("rank %d: %s", r, o)
					}
				case strings.HasPrefix(o, "error"):
					failed.Add(1)
				}
			}
			t.Logf("outcomes: %q", outcome)
		}
	}
	t.Logf("%s: %d rank runs: %d ended with an error, %d with a wrong result", tc.name, total.Load(), failed.Load(), wrongs.Load())
}
