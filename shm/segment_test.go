//go:build linux

package shm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shmcoll/shmcoll/numa"
	"golang.org/x/sys/unix"
)

func TestValidName(t *testing.T) {
	for _, n := range []string{"a", "job-1", "A_b-C", strings.Repeat("x", 64), "0123456789abcdef", segmentPrefix() + "abc"} {
		if err := ValidName(n); err != nil {
			t.Errorf("%q: %v", n, err)
		}
	}
	full, _ := SegmentPath(segmentPrefix() + "abc")
	short, _ := SegmentPath("abc")
	if full != short || full != shmDir()+"/"+segmentPrefix()+"abc" {
		t.Errorf("paths %q %q", full, short)
	}
	for _, n := range []string{"", "-a", "a/b", "../x", "a.b", "a b", "é", strings.Repeat("x", 65), "a\x00",
		"shmcoll.", segmentPrefix(), "shmcoll.99999.abc", segmentPrefix() + "a.b", segmentPrefix() + "../x"} {
		if err := ValidName(n); !errors.Is(err, ErrBadName) {
			t.Errorf("%q: %v", n, err)
		}
		if _, err := Join(context.Background(), n, 0, 1, Options{}); !errors.Is(err, ErrBadName) {
			t.Errorf("Join %q: %v", n, err)
		}
	}
	if err := ValidName(NewName()); err != nil {
		t.Error(err)
	}
}

// joinAll joins all ranks of a named arena from goroutines of this process.
func joinAll(t *testing.T, name string, p int, opt Options) []*Endpoint {
	t.Helper()
	eps := make([]*Endpoint, p)
	errs := make([]error, p)
	var wg sync.WaitGroup
	for r := range p {
		wg.Go(func() { eps[r], errs[r] = Join(context.Background(), name, r, p, opt) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return eps
}

func TestJoinNamedInOneProcess(t *testing.T) {
	name := testName()
	eps := joinAll(t, name, 3, Options{SlotBytes: 10000})
	defer closeAll(t, eps)
	if path, _ := SegmentPath(name); fileExists(path) {
		t.Errorf("%s not unlinked after the rendezvous", path)
	}
	if got := eps[0].SlotBytes(); got != roundUp(10000, os.Getpagesize()) {
		t.Errorf("slot %d", got)
	}
	for r, err := range runRanks(eps, func(e *Endpoint) error { return ringExchange(e, 100, 1000) }) {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// TestHeapNamed: each rank's heap is its own part of the arena, reserved,
// shared with the other ranks and sized by the creator for a joiner that
// passes 0; an arena without heaps has empty ones.
func TestHeapNamed(t *testing.T) {
	page := os.Getpagesize()
	eps := make([]*Endpoint, 3)
	errs := make([]error, 3)
	name := testName()
	var wg sync.WaitGroup
	for r := range eps {
		wg.Go(func() {
			opt := Options{SlotBytes: 4096}
			if r == 0 {
				opt.HeapBytes = 3*page + 1
			}
			eps[r], errs[r] = Join(context.Background(), name, r, 3, opt)
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	defer closeAll(t, eps)
	for r, e := range eps {
		if got := len(e.Heap(r)); got != 4*page || e.HeapBytes() != 4*page {
			t.Fatalf("rank %d: heap of %d bytes, want %d", r, got, 4*page)
		}
		h := e.Heap(r)
		for i := range h {
			h[i] = byte(r*7 + i)
		}
	}
	for r, e := range eps {
		for q := range eps {
			h, s := e.Heap(q), e.Slot(q)
			if &h[0] == &s[0] || h[len(h)-1] != byte(q*7+len(h)-1) || h[5] != byte(q*7+5) {
				t.Fatalf("rank %d reads rank %d's heap wrong", r, q)
			}
		}
	}
	none, err := NewLocal(2, Options{SlotBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(t, none)
	if len(none[1].Heap(0)) != 0 {
		t.Fatal("an arena without heaps has a heap")
	}
}

func fileExists(p string) bool { _, err := os.Lstat(p); return err == nil }

func TestJoinFileEnv(t *testing.T) {
	const p = 3
	f, err := CreateFD(p, Options{SlotBytes: 65536})
	if err != nil {
		t.Fatal(err)
	}
	var ps []*exec.Cmd
	var outs []*strings.Builder
	for r := range p {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envRole+"=ring", "SHMCOLL_TEST_ENVJOIN=1",
			fmt.Sprintf("%s=%d", EnvRank, r), fmt.Sprintf("%s=%d", EnvSize, p), EnvArena+"=fd:3",
			"SHMCOLL_TEST_SLOT=0", "SHMCOLL_TEST_ROUNDS=200", "SHMCOLL_TEST_WORDS=1024")
		cmd.ExtraFiles = []*os.File{f}
		out := new(strings.Builder)
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ps, outs = append(ps, cmd), append(outs, out)
	}
	f.Close()
	for r, cmd := range ps {
		if err := cmd.Wait(); err != nil || !strings.HasSuffix(outs[r].String(), "ok\n") {
			t.Errorf("rank %d: %v: %s", r, err, outs[r])
		}
	}
}

func TestReadEnv(t *testing.T) {
	clear := func() {
		for _, k := range []string{EnvRank, EnvSize, EnvArena, "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
			"OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"} {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	clear()
	if _, err := ReadEnv(); !errors.Is(err, ErrNoEnv) {
		t.Errorf("empty: %v", err)
	}
	t.Setenv(EnvRank, "1")
	t.Setenv(EnvSize, "4")
	t.Setenv(EnvArena, "fd:7")
	if j, err := ReadEnv(); err != nil || j != (EnvJoin{Rank: 1, Size: 4, FD: 7, Source: "shmcoll"}) {
		t.Errorf("fd: %+v %v", j, err)
	}
	t.Setenv(EnvArena, "job9")
	if j, err := ReadEnv(); err != nil || j != (EnvJoin{Rank: 1, Size: 4, Name: "job9", FD: -1, Source: "shmcoll"}) {
		t.Errorf("name: %+v %v", j, err)
	}
	t.Setenv(EnvArena, "../etc")
	if _, err := ReadEnv(); !errors.Is(err, ErrBadName) {
		t.Errorf("bad name: %v", err)
	}
	t.Setenv(EnvArena, "job9")
	t.Setenv(EnvRank, "4")
	if _, err := ReadEnv(); !errors.Is(err, ErrBadSize) {
		t.Errorf("rank 4 of 4: %v", err)
	}
	clear()
	t.Setenv("OMPI_COMM_WORLD_LOCAL_RANK", "2")
	t.Setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "3")
	t.Setenv("OMPI_MCA_ess_base_jobid", "912326657")
	if j, err := ReadEnv(); err != nil || j != (EnvJoin{Rank: 2, Size: 3, Name: "ompi-912326657", FD: -1, Source: "openmpi"}) {
		t.Errorf("openmpi: %+v %v", j, err)
	}
	clear()
	t.Setenv("PMI_RANK", "5")
	t.Setenv("PMI_SIZE", "8")
	t.Setenv("MPI_LOCALRANKID", "1")
	t.Setenv("MPI_LOCALNRANKS", "2")
	j, err := ReadEnv()
	if err != nil || j.Rank != 1 || j.Size != 2 || j.Source != "mpich" || !strings.HasPrefix(j.Name, fmt.Sprintf("mpich-%d-", os.Getppid())) || ValidName(j.Name) != nil {
		t.Errorf("mpich: %+v %v", j, err)
	}
}

// writeSegment writes a would-be segment of ours with the given bytes and
// mode, returning its name.
func writeSegment(t *testing.T, data []byte, mode os.FileMode) string {
	t.Helper()
	name := testName()
	path, _ := SegmentPath(name)
	if err := os.WriteFile(path, data, mode); err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, mode)
	t.Cleanup(func() { os.Remove(path) })
	return name
}

// validSegment returns the bytes of a freshly created arena of p ranks.
func validSegment(p, slot int) []byte {
	lay, _ := newLayout(p, sizes{slot: slot})
	b := make([]byte, lay.total)
	lay.writeHeader(b, kindNamed, os.Getpid(), selfStart())
	ne.PutUint64(b[hMagic:], magic)
	return b
}

func TestJoinBadSegments(t *testing.T) {
	ok := validSegment(2, 4096)
	mod := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), ok...)) }
	cases := []struct {
		name string
		data []byte
		mode os.FileMode
		want string
	}{
		{"foreign", mod(func(b []byte) []byte { copy(b, "GARBAGE!"); return b }), 0o600, "not a shmcoll arena"},
		{"version", mod(func(b []byte) []byte { ne.PutUint32(b[hVersion:], 9); return resum(b) }), 0o600, "format version 9"},
		{"checksum", mod(func(b []byte) []byte { b[hSlotBytes]++; return b }), 0o600, "checksum"},
		{"counters", mod(func(b []byte) []byte { ne.PutUint32(b[hNumCounters:], 4); return resum(b) }), 0o600, "counters per rank is 4"},
		{"layout", mod(func(b []byte) []byte { ne.PutUint64(b[hTotal:], 1<<20); return resum(b) }), 0o600, "inconsistent layout"},
		{"ranks", mod(func(b []byte) []byte { ne.PutUint32(b[hRanks:], 0); return resum(b) }), 0o600, "out of range"},
		{"truncated", ok[:len(ok)-1], 0o600, "truncated"},
		{"mode", ok, 0o644, "gives others access"},
		{"p mismatch", validSegment(3, 4096), 0o600, "arena has 3 ranks, caller expects 2"},
		{"slot mismatch", validSegment(2, 8192), 0o600, "slots are 8192 bytes, caller expects 4096"},
		{"heap mismatch", mod(func(b []byte) []byte {
			lay, _ := newLayout(2, sizes{4096, 8192})
			lay.writeHeader(b, kindNamed, os.Getpid(), selfStart())
			return append(b, make([]byte, 2*8192)...)
		}), 0o600, "heaps are 8192 bytes, caller expects 4096"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := writeSegment(t, c.data, c.mode)
			opt := Options{SlotBytes: 4096, JoinTimeout: 5 * time.Second}
			if c.name == "heap mismatch" {
				opt.HeapBytes = 4096
			}
			_, err := Join(context.Background(), name, 1, 2, opt)
			if !errors.Is(err, ErrBadHeader) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want ErrBadHeader with %q", err, c.want)
			}
		})
	}
	t.Run("symlink", func(t *testing.T) {
		name := testName()
		path, _ := SegmentPath(name)
		if err := os.Symlink("/etc/passwd", path); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(path)
		if _, err := Join(context.Background(), name, 1, 2, Options{JoinTimeout: time.Second}); !errors.Is(err, ErrBadHeader) {
			t.Fatalf("got %v", err)
		}
		// The creator refuses to follow it too.
		if _, err := Join(context.Background(), name, 0, 2, Options{JoinTimeout: time.Second}); !errors.Is(err, ErrExists) {
			t.Fatalf("creator: %v", err)
		}
	})
	t.Run("empty", func(t *testing.T) {
		// An empty file may be a segment being created: wait, then time out.
		name := writeSegment(t, nil, 0o600)
		_, err := Join(context.Background(), name, 1, 2, Options{JoinTimeout: 100 * time.Millisecond})
		if !errors.Is(err, ErrJoinTimeout) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("exists", func(t *testing.T) {
		name := writeSegment(t, ok, 0o600) // its "creator" (this process) lives
		if _, err := Join(context.Background(), name, 0, 2, Options{}); !errors.Is(err, ErrExists) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("rank taken", func(t *testing.T) {
		name := testName()
		var wg sync.WaitGroup
		var e0 *Endpoint
		var err0 error
		wg.Go(func() {
			e0, err0 = Join(context.Background(), name, 0, 2, Options{SlotBytes: 4096, JoinTimeout: 2 * time.Second})
		})
		path, _ := SegmentPath(name)
		for !fileExists(path) {
			time.Sleep(time.Millisecond)
		}
		if _, err := Join(context.Background(), name, 0, 2, Options{SlotBytes: 4096}); !errors.Is(err, ErrExists) {
			t.Errorf("second rank 0: %v", err)
		}
		e1, err := Join(context.Background(), name, 1, 2, Options{SlotBytes: 4096})
		wg.Wait()
		if err != nil || err0 != nil {
			t.Fatal(err, err0)
		}
		e0.Close()
		e1.Close()
	})
}

// mountTmpfs mounts a tmpfs of the given size as the segment directory for
// the test, or skips.
func mountTmpfs(t *testing.T, size string) string {
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size+",mode=1777"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	old := shmRoot
	shmRoot = dir
	t.Cleanup(func() {
		shmRoot = old
		unix.Unmount(dir, unix.MNT_DETACH)
	})
	return dir
}

// TestNoSpaceHuge: an arena larger than the free space of /dev/shm is
// refused at creation, before anything is mapped.
func TestNoSpaceHuge(t *testing.T) {
	free := freeBytes()
	if free < 0 || free > 2*MaxSlotBytes {
		t.Skipf("%s has %d bytes free", shmDir(), free)
	}
	name := testName()
	_, err := Join(context.Background(), name, 0, 2, Options{SlotBytes: MaxSlotBytes})
	if !errors.Is(err, ErrNoSpace) || !strings.Contains(err.Error(), "free") {
		t.Fatalf("got %v", err)
	}
	if path, _ := SegmentPath(name); fileExists(path) {
		t.Errorf("%s left behind", path)
	}
}

func TestNoSpace(t *testing.T) {
	dir := mountTmpfs(t, "1m")
	// Larger than the file system: refused at creation.
	_, err := Join(context.Background(), testName(), 0, 2, Options{SlotBytes: 1 << 20})
	if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("too large: %v", err)
	}
	// Fits when rank 0 creates it, but the space is gone when rank 1
	// reserves its slot: rank 1 fails with ErrNoSpace, rank 0 learns that
	// rank 1 left instead of waiting for the join timeout.
	name := testName()
	opt := Options{SlotBytes: 384 << 10, JoinTimeout: time.Minute}
	var wg sync.WaitGroup
	var err0 error
	wg.Go(func() { _, err0 = Join(context.Background(), name, 0, 2, opt) })
	path, _ := SegmentPath(name)
	for !fileExists(path) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	if err := os.WriteFile(filepath.Join(dir, "filler"), make([]byte, 400<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err1 := Join(context.Background(), name, 1, 2, opt)
	wg.Wait()
	if !errors.Is(err1, ErrNoSpace) {
		t.Errorf("rank 1: %v", err1)
	}
	if !errors.Is(err0, ErrPeerDead) {
		t.Errorf("rank 0: %v", err0)
	}
	if fileExists(path) {
		t.Errorf("%s left behind", path)
	}
}

func TestCleanupStale(t *testing.T) {
	// A rank 0 that dies before the others join leaves its segment behind.
	name := testName()
	path, _ := SegmentPath(name)
	ps := startRanks(t, "ring", name, 1, EnvSize+"=2")
	for !fileExists(path) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	ps[0].cmd.Process.Signal(syscall.SIGKILL)
	ps[0].cmd.Wait()
	// A live arena that waits for its second rank must survive Cleanup.
	live := testName()
	livePath, _ := SegmentPath(live)
	var wg sync.WaitGroup
	var e0 *Endpoint
	var err0 error
	wg.Go(func() { e0, err0 = Join(context.Background(), live, 0, 2, Options{SlotBytes: 4096}) })
	for !fileExists(livePath) {
		time.Sleep(time.Millisecond)
	}
	removed, err := Cleanup()
	if err != nil {
		t.Fatal(err)
	}
	// Other jobs' stale segments may go too; ours must, the live one not.
	if !slices.Contains(removed, path) || slices.Contains(removed, livePath) {
		t.Errorf("removed %v, want %s and not %s", removed, path, livePath)
	}
	if !fileExists(livePath) {
		t.Fatal("live segment removed")
	}
	e1, err := Join(context.Background(), live, 1, 2, Options{SlotBytes: 4096})
	wg.Wait()
	if err != nil || err0 != nil {
		t.Fatal(err, err0)
	}
	e0.Close()
	e1.Close()
	// A stale segment under the name rank 0 wants is replaced.
	name = testName()
	path, _ = SegmentPath(name)
	ps = startRanks(t, "ring", name, 1, EnvSize+"=2")
	for !fileExists(path) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	ps[0].cmd.Process.Signal(syscall.SIGKILL)
	ps[0].cmd.Wait()
	eps := joinAll(t, name, 2, Options{SlotBytes: 4096})
	closeAll(t, eps)
}

// TestNodeOf: a slot placed by Options.NodeOf carries that node's policy,
// read back from the kernel, on every rank's mapping; a slot without
// placement keeps the default policy.
func TestNodeOf(t *testing.T) {
	host, err := numa.Default()
	if err != nil || len(host.Nodes) == 0 {
		t.Skipf("no topology: %v", err)
	}
	node := host.Nodes[len(host.Nodes)-1].ID
	opt := Options{SlotBytes: 1 << 16, NodeOf: func(r int) int {
		if r == 0 {
			return node
		}
		return -1
	}}
	eps := joinAll(t, testName(), 2, opt)
	defer closeAll(t, eps)
	for _, e := range eps {
		mode, nodes, err := numa.MemoryPolicy(e.Slot(0))
		if errors.Is(err, numa.ErrNotSupported) {
			t.Skip(err)
		}
		if err != nil {
			t.Fatal(err)
		}
		want, _ := host.HostNode(node)
		if mode != numa.Preferred || len(nodes) != 1 || nodes[0] != want {
			t.Errorf("rank %d sees slot 0 with %v %v, want preferred [%d]", e.Rank(), mode, nodes, want)
		}
		if got, err := numa.MemoryNode(e.Slot(0)); err != nil || got != want {
			t.Errorf("rank %d: slot 0 page on node %d (%v), want %d", e.Rank(), got, err, want)
		}
		if mode, _, err := numa.MemoryPolicy(e.Slot(1)); err != nil || mode != numa.DefaultMode {
			t.Errorf("rank %d: slot 1 policy %v %v", e.Rank(), mode, err)
		}
	}
}

func TestCountCPUList(t *testing.T) {
	for s, want := range map[string]int{"0": 1, "0-1": 2, "0-3,8,10-11": 7, "": 0, "3-1": 0, "a": 0, "0-": 0} {
		if got := countCPUList(s); got != want {
			t.Errorf("%q: %d, want %d", s, got, want)
		}
	}
	if onlineCPUs() < 1 {
		t.Error("no online CPU")
	}
}

// TestCreatorDiesDuringJoin: when rank 0 dies before everyone joined, the
// joined ranks fail with ErrPeerDead naming it and remove the segment.
func TestCreatorDiesDuringJoin(t *testing.T) {
	name := testName()
	path, _ := SegmentPath(name)
	ps := startRanks(t, "ring", name, 1, EnvSize+"=3", "SHMCOLL_TEST_SLOT=4096")
	var wg sync.WaitGroup
	var err1 error
	wg.Go(func() {
		_, err1 = Join(context.Background(), name, 1, 3, Options{SlotBytes: 4096, JoinTimeout: time.Minute})
	})
	for {
		b, err := os.ReadFile(path)
		if err == nil && len(b) > hAttached+4 && ne.Uint32(b[hAttached:]) == 2 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	ps[0].cmd.Process.Signal(syscall.SIGKILL)
	ps[0].cmd.Wait()
	wg.Wait()
	var ae *AbortError
	if !errors.Is(err1, ErrPeerDead) || !errors.As(err1, &ae) || ae.Peer != 0 {
		t.Fatalf("rank 1: %v", err1)
	}
	if fileExists(path) {
		t.Errorf("%s left behind", path)
	}
}

// TestCreateFDSealed: nobody can shrink or grow a memfd arena (a shrink
// would SIGBUS the ranks).
func TestCreateFDSealed(t *testing.T) {
	f, err := CreateFD(2, Options{SlotBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	if err := f.Truncate(st.Size() - 4096); err == nil {
		t.Error("shrinking succeeded")
	}
	if err := f.Truncate(st.Size() + 4096); err == nil {
		t.Error("growing succeeded")
	}
	// The ranks still reserve their slots.
	eps := make([]*Endpoint, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Go(func() {
			var err error
			if eps[r], err = JoinFile(context.Background(), f, r, 2, Options{}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, e := range eps {
		if e != nil {
			e.Close()
		}
	}
}
