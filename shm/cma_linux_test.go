package shm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// cmaChild runs the cross-memory roles of a child rank. "cma" prints
// "cma on" and runs cmaExchange of SHMCOLL_TEST_CMA_BYTES, or prints "cma
// off: " and the reason, having checked that ReadPeer refuses. "cmaserve"
// serves BenchmarkCrossMemory (see there).
func cmaChild(role string, e *Endpoint) error {
	if role == "cmaserve" {
		return cmaServe(e)
	}
	if err := e.CrossMemory(); err != nil {
		var b [8]byte
		if rerr := e.ReadPeer((e.Rank()+1)%e.Size(), AddrOf(b[:]), b[:]); !errors.Is(rerr, ErrNoCrossMemory) {
			return fmt.Errorf("cross-memory attach off (%v), but ReadPeer says %v", err, rerr)
		}
		fmt.Println("cma off:", err)
		return nil
	}
	fmt.Println("cma on")
	return cmaExchange(e, envInt("SHMCOLL_TEST_CMA_BYTES"))
}

// cmaTestSetup applies a child's cross-memory settings before it joins:
// SHMCOLL_TEST_CMA_FAIL=1 makes its probe of a peer fail, and
// SHMCOLL_TEST_NODUMP=1 makes the process not dumpable, which the kernel's
// ptrace check holds against peers without CAP_SYS_PTRACE.
func cmaTestSetup(opt *Options) {
	opt.cmaFailProbe = os.Getenv("SHMCOLL_TEST_CMA_FAIL") == "1"
	if os.Getenv("SHMCOLL_TEST_CMA_DIE") == "1" {
		opt.cmaBeforeResult = func() { os.Exit(3) }
	}
	if os.Getenv("SHMCOLL_TEST_NODUMP") == "1" {
		if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
			panic(err)
		}
	}
}

// cmaRanks runs size ranks of role "cma", rank r with env[r] beside the
// common variables and its command line prefixed by wrap (a program that
// runs the rank, or none), and returns their outputs; every rank must exit
// with status 0.
func cmaRanks(t *testing.T, size int, env func(r int) []string, wrap ...string) []string {
	t.Helper()
	name := testName()
	var ps []rankProc
	for r := range size {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		if len(wrap) > 0 {
			cmd = exec.Command(wrap[0], append(wrap[1:], os.Args[0], "-test.run=^$")...)
		}
		cmd.Env = append(os.Environ(), envRole+"=cma", fmt.Sprintf("%s=%d", EnvRank, r), fmt.Sprintf("%s=%d", EnvSize, size),
			EnvArena+"="+name, "SHMCOLL_TEST_SLOT=65536", "SHMCOLL_TEST_CMA_BYTES=6295107")
		cmd.Env = append(cmd.Env, env(r)...)
		out := new(syncBuffer)
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, rankProc{cmd, out})
	}
	t.Cleanup(func() {
		for _, p := range ps {
			if p.cmd.ProcessState == nil {
				p.cmd.Process.Kill()
				p.cmd.Wait()
			}
		}
	})
	outs := make([]string, size)
	for r, p := range ps {
		err := p.cmd.Wait()
		outs[r] = p.out.String()
		if err != nil || !strings.HasSuffix(outs[r], "ok\n") {
			t.Errorf("rank %d: %v: %s", r, err, outs[r])
		}
	}
	return outs
}

// TestCrossMemoryProcesses: three processes read each other's heap
// buffers of 6 MiB and more with process_vm_readv and write them with
// process_vm_writev, every byte checked (cmaExchange).
func TestCrossMemoryProcesses(t *testing.T) {
	skipUnlessPtrace(t)
	for r, out := range cmaRanks(t, 3, func(int) []string { return []string{EnvCMA + "="} }) {
		if !strings.HasPrefix(out, "cma on\n") {
			t.Errorf("rank %d: %s; want cross-memory attach on", r, out)
		}
	}
}

// TestCrossMemoryAgreement: when one rank cannot read one peer, or one
// rank turns it off, it is off on every rank, with the same reason.
func TestCrossMemoryAgreement(t *testing.T) {
	skipUnlessPtrace(t)
	for _, c := range []struct {
		name, env, reason string
	}{
		{"probe-fails", "SHMCOLL_TEST_CMA_FAIL=1", "cma off: shm: cross-memory attach is off: rank 2 cannot read rank 0 (pid "},
		{"env-off", EnvCMA + "=off", "cma off: shm: cross-memory attach is off: turned off by SHMCOLL_CMA=off on rank 2\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			outs := cmaRanks(t, 4, func(r int) []string {
				if r == 2 {
					return []string{c.env}
				}
				return []string{EnvCMA + "="}
			})
			for r, out := range outs {
				if !strings.HasPrefix(out, c.reason) || strings.SplitN(out, "\n", 2)[0] != strings.SplitN(outs[0], "\n", 2)[0] {
					t.Errorf("rank %d: %s; want %q, the same on every rank", r, out, c.reason)
				}
			}
		})
	}
}

// TestCrossMemoryRefused: the kernel refuses process_vm_readv from peers
// without CAP_SYS_PTRACE into a process that is not dumpable; with rank 1
// such a process, the join's test finds it and cross-memory attach is off
// on every rank. Ranks started by root run under setpriv without
// CAP_SYS_PTRACE.
func TestCrossMemoryRefused(t *testing.T) {
	var wrap []string
	if hasCap(unix.CAP_SYS_PTRACE) {
		setpriv, err := exec.LookPath("setpriv")
		if err != nil {
			t.Skip("CAP_SYS_PTRACE, and no setpriv to start ranks without it")
		}
		wrap = []string{setpriv, "--bounding-set=-sys_ptrace"}
	}
	outs := cmaRanks(t, 3, func(r int) []string {
		if r == 1 {
			return []string{EnvCMA + "=", "SHMCOLL_TEST_NODUMP=1"}
		}
		return []string{EnvCMA + "="}
	}, wrap...)
	want := "cma off: shm: cross-memory attach is off: rank 0 cannot read rank 1 (pid "
	for r, out := range outs {
		if !strings.HasPrefix(out, want) || !strings.Contains(out, "operation not permitted\n") {
			t.Errorf("rank %d: %s; want %q ... operation not permitted", r, out, want)
		}
	}
}

// TestCrossMemoryPeerDies: a rank that dies during the join's test, before
// it published its result, fails the join of every other rank with
// ErrPeerDead naming it (no rank hangs), and nothing is left in /dev/shm.
func TestCrossMemoryPeerDies(t *testing.T) {
	name := testName()
	var ps []rankProc
	for r := range 3 {
		ps = append(ps, startRanks(t, "cma", name, 1, fmt.Sprintf("%s=%d", EnvRank, r), EnvSize+"=3", EnvCMA+"=",
			fmt.Sprint("SHMCOLL_TEST_CMA_DIE=", map[bool]int{true: 1}[r == 2]))...)
	}
	for r, p := range ps {
		err := p.cmd.Wait()
		ee, ok := err.(*exec.ExitError)
		switch {
		case r == 2 && (!ok || ee.ExitCode() != 3):
			t.Errorf("rank 2: %v: %s; want exit status 3", err, p.out)
		case r != 2 && (!ok || ee.ExitCode() != 2 || !strings.Contains(p.out.String(), "rank 2 (pid ")):
			t.Errorf("rank %d: %v: %s; want the join to fail naming dead rank 2", r, err, p.out)
		}
	}
}

// skipUnlessPtrace skips a test that needs the ranks to read each other
// where Yama's ptrace_scope (2: only with CAP_SYS_PTRACE, 3: never) does
// not let this process's children do it.
func skipUnlessPtrace(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope")
	if err != nil {
		return
	}
	switch s := strings.TrimSpace(string(b)); {
	case s == "3", s == "2" && !hasCap(unix.CAP_SYS_PTRACE):
		t.Skipf("Yama's ptrace_scope is %s: the ranks may not read each other", s)
	}
}

// hasCap reports whether this process has capability c in its effective
// set.
func hasCap(c int) bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && m&(1<<c) != 0
		}
	}
	return false
}

// TestCrossMemoryBadEnv: a SHMCOLL_CMA or SHMCOLL_HUGEPAGES that is
// neither on nor off on one rank fails the join on every rank, naming it,
// also when a lower rank turned the same setting off.
func TestCrossMemoryBadEnv(t *testing.T) {
	for _, env := range []string{EnvCMA, EnvHugePages} {
		name := testName()
		var ps []rankProc
		for r := range 3 {
			v := []string{"off", "sometimes", ""}[r]
			ps = append(ps, startRanks(t, "cma", name, 1, fmt.Sprintf("%s=%d", EnvRank, r), EnvSize+"=3", env+"="+v)...)
		}
		for r, p := range ps {
			err := p.cmd.Wait()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(p.out.String(), env+" on rank 1 is neither on nor off") {
				t.Errorf("%s: rank %d: %v: %s; want the join to fail naming it", env, r, err, p.out)
			}
		}
	}
}

// cmaServe is rank 1 of BenchmarkCrossMemory: it exposes a heap buffer
// (address in its descriptor) and answers each request k of rank 0
// (counter 0) with a post of k on its own counter 0, having copied the
// requested bytes of its buffer into its slot first if rank 0's
// descriptor asks for the arena path.
func cmaServe(e *Endpoint) error {
	ctx := context.Background()
	buf := make([]byte, e.SlotBytes())
	for i := range buf {
		buf[i] = cmaByte(1, i)
	}
	binary.LittleEndian.PutUint64(e.Descriptor(1), uint64(AddrOf(buf)))
	for k := uint64(1); ; k++ {
		if err := e.Wait(ctx, 0, 0, k); err != nil {
			return err
		}
		if e.Load(0, 0) == stopValue {
			return nil
		}
		d := e.Descriptor(0)
		if binary.LittleEndian.Uint64(d) == 1 {
			copy(e.Slot(1), buf[:binary.LittleEndian.Uint64(d[8:])])
		}
		e.Post(0, k)
	}
}

// BenchmarkCrossMemory compares, between two processes, reading n bytes of
// the peer's private heap buffer by process_vm_readv (impl=cma) with the
// arena's two copies (impl=arena: the peer copies its buffer into its slot,
// the reader copies it out). Both include the request and the answer,
// a counter post each way.
func BenchmarkCrossMemory(b *testing.B) {
	const maxBytes = 16 << 20
	e, cmds := spawn(b, "cmaserve", 2, Options{SlotBytes: maxBytes})
	defer reap(b, e, cmds)
	if err := e.CrossMemory(); err != nil {
		e.Post(0, stopValue)
		b.Skip(err)
	}
	ctx := context.Background()
	dst := make([]byte, maxBytes)
	k := uint64(0)
	d := e.Descriptor(0)
	for _, impl := range []string{"cma", "arena"} {
		for n := 64 << 10; n <= maxBytes; n *= 4 {
			b.Run(fmt.Sprintf("impl=%s/bytes=%d", impl, n), func(b *testing.B) {
				binary.LittleEndian.PutUint64(d, map[string]uint64{"cma": 0, "arena": 1}[impl])
				binary.LittleEndian.PutUint64(d[8:], uint64(n))
				b.SetBytes(int64(n))
				b.ReportAllocs()
				for b.Loop() {
					k++
					e.Post(0, k)
					if err := e.Wait(ctx, 1, 0, k); err != nil {
						b.Fatal(err)
					}
					var err error
					if impl == "cma" {
						err = e.ReadPeer(1, uintptr(binary.LittleEndian.Uint64(e.Descriptor(1))), dst[:n])
					} else {
						copy(dst[:n], e.Slot(1)[:n])
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				if dst[n-1] != cmaByte(1, n-1) {
					b.Fatalf("byte %d is %#x, want %#x", n-1, dst[n-1], cmaByte(1, n-1))
				}
			})
		}
	}
	e.Post(0, stopValue)
}

// TestCrossMemoryAllocs: a ReadPeer from a peer process allocates nothing;
// once the peer has exited, it fails with ErrPeerDead.
func TestCrossMemoryAllocs(t *testing.T) {
	skipUnlessPtrace(t)
	name := testName()
	t.Setenv(EnvCMA, "")
	ps := startRanks(t, "cmaserve", name, 1, EnvRank+"=1", EnvSize+"=2", "SHMCOLL_TEST_SLOT=65536")
	e, err := Join(context.Background(), name, 0, 2, Options{SlotBytes: 65536, JoinTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.CrossMemory(); err != nil {
		t.Fatal(err)
	}
	// Rank 1 publishes its buffer's address before its first answer.
	e.Post(0, 1)
	if err := e.Wait(context.Background(), 1, 0, 1); err != nil {
		t.Fatal(err)
	}
	addr := uintptr(binary.LittleEndian.Uint64(e.Descriptor(1)))
	dst := make([]byte, 65536)
	src := []Remote{{addr, 1000}, {addr + 4096, 60000}}
	if n := testing.AllocsPerRun(100, func() {
		if err := e.ReadPeer(1, addr, dst); err != nil {
			t.Fatal(err)
		}
		if err := e.ReadPeerv(1, dst[:61000], src); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("ReadPeer and ReadPeerv allocate %v times", n)
	}
	for i := range 1000 {
		if dst[i] != cmaByte(1, i) {
			t.Fatalf("byte %d is %#x, want %#x", i, dst[i], cmaByte(1, i))
		}
	}
	if !e.PeerAlive(1) {
		t.Error("PeerAlive(1) is false while rank 1 runs")
	}
	e.Post(0, stopValue)
	if err := ps[0].cmd.Wait(); err != nil {
		t.Fatalf("rank 1: %v: %s", err, ps[0].out)
	}
	if e.PeerAlive(1) {
		t.Error("PeerAlive(1) is true after rank 1 exited")
	}
	err = e.ReadPeer(1, addr, dst)
	if !errors.Is(err, ErrPeerDead) {
		t.Errorf("ReadPeer from an exited peer: %v, want ErrPeerDead", err)
	}
	// The failed copy aborted the arena naming the dead rank, as a wait
	// that found it dead does.
	var ae *AbortError
	if !errors.As(err, &ae) || ae.Peer != 1 {
		t.Errorf("ReadPeer from an exited peer: %v, want an AbortError naming rank 1", err)
	}
}

// TestVMCopyPartial: a copy that runs into an unmapped page goes on after
// the kernel's partial transfer, copies everything before the page, and
// reports the range where it stopped with EFAULT. Several ranges ask for
// more than one system call.
func TestVMCopyPartial(t *testing.T) {
	page := os.Getpagesize()
	m, err := unix.Mmap(-1, 0, 3*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	for i := range m {
		m[i] = cmaByte(0, i)
	}
	if err := unix.Mprotect(m[2*page:], unix.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	base := AddrOf(m)
	// 2*iovBatch+1 ranges of the first two pages, then one into the third.
	var src []Remote
	n := 0
	for off := 0; off < 2*page; {
		l := min(2*page/(2*iovBatch+1)+1, 2*page-off)
		src = append(src, Remote{base + uintptr(off), l})
		off += l
		n += l
	}
	src = append(src, Remote{base + uintptr(2*page), 100})
	dst := make([]byte, n+100)
	stop, err := vmCopy(os.Getpid(), dst, src, false)
	if !errors.Is(err, unix.EFAULT) || stop.Addr != base+uintptr(2*page) {
		t.Fatalf("vmCopy stopped at %#x (the third page is %#x): %v; want EFAULT there", stop.Addr, base+uintptr(2*page), err)
	}
	for i := range n {
		if dst[i] != cmaByte(0, i) {
			t.Fatalf("byte %d is %#x, want %#x", i, dst[i], cmaByte(0, i))
		}
	}
	// Writing stops at the same page.
	if _, err := vmCopy(os.Getpid(), dst, src, true); !errors.Is(err, unix.EFAULT) {
		t.Errorf("writing into the unmapped page: %v, want EFAULT", err)
	}
}
