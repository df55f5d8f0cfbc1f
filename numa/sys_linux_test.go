package numa

import (
	"errors"
	"os"
	"runtime"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// mapAnon returns n bytes of fresh anonymous memory, unmapped at cleanup.
func mapAnon(t *testing.T, n int) []byte {
	t.Helper()
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	return b
}

// mapShared returns n bytes of a fresh shared memfd mapping (the kind of
// memory the arena uses).
func mapShared(t *testing.T, n int) []byte {
	t.Helper()
	fd, err := unix.MemfdCreate("numa-test", unix.MFD_CLOEXEC)
	if err != nil {
		t.Skipf("memfd_create: %v", err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, int64(n)); err != nil {
		t.Fatal(err)
	}
	b, err := unix.Mmap(fd, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	return b
}

func TestDetectHost(t *testing.T) {
	top, err := detectHost()
	if err != nil {
		t.Fatal(err)
	}
	t.Log(top)
	checkConsistent(t, top)
	if top.Fake {
		t.Fatal("host topology marked fake")
	}
	online, err := readList(os.DirFS("/sys"), "devices/system/cpu/online")
	if err != nil {
		t.Fatal(err)
	}
	var ids []int
	for _, c := range top.CPUs {
		ids = append(ids, c.ID)
	}
	if !slices.Equal(ids, online) {
		t.Errorf("CPUs %v, /sys/devices/system/cpu/online lists %v", ids, online)
	}
	if len(top.CPUs) < runtime.NumCPU() { // NumCPU counts the CPUs the process may use
		t.Errorf("%d CPUs, runtime.NumCPU() = %d", len(top.CPUs), runtime.NumCPU())
	}
	allowed, err := AllowedCPUs()
	if err != nil || len(allowed) == 0 {
		t.Fatalf("AllowedCPUs = %v, %v", allowed, err)
	}
	for _, c := range allowed {
		if top.NodeOfCPU(c) < 0 {
			t.Errorf("allowed CPU %d is not in the topology", c)
		}
	}
	if top.Cache.L1D <= 0 || top.Cache.L2 <= 0 || top.Cache.Line <= 0 {
		t.Errorf("cache sizes unknown: %+v", top.Cache)
	}
	// cpuid and sysfs must agree where both report a size.
	sys, err := readSysfsCache(os.DirFS("/sys"), "devices/system/cpu/cpu0/cache")
	if err != nil {
		t.Fatal(err)
	}
	id := cpuidCache()
	for _, p := range [][3]any{{"L1D", id.L1D, sys.L1D}, {"L2", id.L2, sys.L2}, {"L3", id.L3, sys.L3}} {
		if a, b := p[1].(int), p[2].(int); a > 0 && b > 0 && a != b {
			t.Errorf("%s: cpuid says %d, sysfs says %d", p[0], a, b)
		}
	}
}

func TestDetectEnv(t *testing.T) {
	t.Setenv(EnvTopology, "2x4x2")
	top, err := Detect()
	if err != nil {
		t.Fatal(err)
	}
	if !top.Fake || len(top.CPUs) != 16 || top.Packages != 2 {
		t.Errorf("Detect with %s=2x4x2: %v", EnvTopology, top)
	}
	t.Setenv(EnvTopology, "2y4")
	if _, err := Detect(); !errors.Is(err, ErrBadTopology) {
		t.Errorf("Detect with a bad spec: err = %v, want ErrBadTopology", err)
	}
}

// pinned runs f on a fresh goroutine (so a locked thread dies with it).
func onFreshThread(t *testing.T, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}

func TestPinThread(t *testing.T) {
	h, err := host()
	if err != nil {
		t.Fatal(err)
	}
	allowed, err := Affinity(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range h.CPUs {
		if !slices.Contains(allowed, c.ID) {
			continue // excluded by a cpuset
		}
		onFreshThread(t, func() {
			if err := h.PinThread(c.ID); err != nil {
				t.Errorf("PinThread(%d): %v", c.ID, err)
				return
			}
			got, err := Affinity(0)
			if err != nil || !slices.Equal(got, []int{c.ID}) {
				t.Errorf("after PinThread(%d): affinity %v, %v", c.ID, got, err)
			}
			if err := UnpinThread(); err != nil {
				t.Error(err)
			}
			got, err = Affinity(0)
			if err != nil || len(got) != initialAffinity.Count() {
				t.Errorf("after UnpinThread: affinity %v, %v, want %d CPUs", got, err, initialAffinity.Count())
			}
		})
	}
	// A set: every allowed CPU.
	onFreshThread(t, func() {
		if err := h.PinThreadSet(allowed); err != nil {
			t.Errorf("PinThreadSet(%v): %v", allowed, err)
			return
		}
		defer UnpinThread()
		if got, _ := Affinity(0); !slices.Equal(got, allowed) {
			t.Errorf("after PinThreadSet(%v): %v", allowed, got)
		}
	})
	if err := h.PinThread(1 << 20); !errors.Is(err, ErrUnknownCPU) {
		t.Errorf("PinThread(1<<20) = %v, want ErrUnknownCPU", err)
	}
}

func TestPinThreadFake(t *testing.T) {
	fake, err := ParseFake("2x4x2")
	if err != nil {
		t.Fatal(err)
	}
	h, err := host()
	if err != nil {
		t.Fatal(err)
	}
	plan, err := fake.Plan(16, Spread)
	if err != nil {
		t.Fatal(err)
	}
	allowed, _ := Affinity(os.Getpid())
	for rank, cpu := range plan {
		want := h.CPUs[cpu%len(h.CPUs)].ID
		if got, err := fake.HostCPU(cpu); err != nil || got != want {
			t.Fatalf("HostCPU(%d) = %d, %v, want %d", cpu, got, err, want)
		}
		if !slices.Contains(allowed, want) {
			continue
		}
		onFreshThread(t, func() {
			if err := fake.PinThread(cpu); err != nil {
				t.Errorf("rank %d: PinThread(fake cpu %d): %v", rank, cpu, err)
				return
			}
			defer UnpinThread()
			if got, _ := Affinity(0); !slices.Equal(got, []int{want}) {
				t.Errorf("rank %d fake cpu %d: affinity %v, want [%d]", rank, cpu, got, want)
			}
		})
	}
}

func TestBindMemoryNode0(t *testing.T) {
	page := os.Getpagesize()
	for name, b := range map[string][]byte{"anon": mapAnon(t, 8*page), "shared": mapShared(t, 8*page)} {
		t.Run(name, func(t *testing.T) {
			if mode, nodes, err := MemoryPolicy(b); err != nil || mode != DefaultMode || len(nodes) != 0 {
				t.Fatalf("fresh mapping: policy %v %v, %v; want default, no nodes", mode, nodes, err)
			}
			slot := b[2*page : 5*page]
			if err := BindMemory(slot, 0); err != nil {
				t.Fatal(err)
			}
			mode, nodes, err := MemoryPolicy(slot)
			if err != nil || mode != Preferred || !slices.Equal(nodes, []int{0}) {
				t.Fatalf("after BindMemory(slot, 0): policy %v %v, %v; want preferred [0]", mode, nodes, err)
			}
			// Pages outside the slot keep the default policy.
			for _, outside := range [][]byte{b[page : 2*page], b[5*page:]} {
				if mode, _, err := MemoryPolicy(outside); err != nil || mode != DefaultMode {
					t.Errorf("page outside the slot: policy %v, %v", mode, err)
				}
			}
			slot[100] = 42
			if node, err := MemoryNode(slot); err != nil || node != 0 {
				t.Fatalf("MemoryNode = %d, %v, want 0", node, err)
			}
			if slot[100] != 42 || slot[0] != 0 {
				t.Fatalf("MemoryNode changed the contents")
			}
			if err := SetMemoryPolicy(slot, Bind, 0); err != nil {
				t.Fatal(err)
			}
			if mode, nodes, _ := MemoryPolicy(slot[page:]); mode != Bind || !slices.Equal(nodes, []int{0}) {
				t.Errorf("after SetMemoryPolicy(Bind, 0): %v %v", mode, nodes)
			}
			if err := SetMemoryPolicy(slot, Interleave, 0); err != nil {
				t.Fatal(err)
			}
			if mode, nodes, _ := MemoryPolicy(slot); mode != Interleave || !slices.Equal(nodes, []int{0}) {
				t.Errorf("after SetMemoryPolicy(Interleave, 0): %v %v", mode, nodes)
			}
			if err := SetMemoryPolicy(slot, Local); err != nil {
				t.Fatal(err)
			}
			if mode, _, _ := MemoryPolicy(slot); mode != Local {
				t.Errorf("after SetMemoryPolicy(Local): %v", mode)
			}
			if err := SetMemoryPolicy(slot, DefaultMode); err != nil {
				t.Fatal(err)
			}
			if mode, _, _ := MemoryPolicy(slot); mode != DefaultMode {
				t.Errorf("after SetMemoryPolicy(DefaultMode): %v", mode)
			}
		})
	}
}

func TestBindMemoryUnaligned(t *testing.T) {
	page := os.Getpagesize()
	b := mapAnon(t, 4*page)
	// A range that starts and ends inside pages 1 and 2 binds all of both.
	if err := BindMemory(b[page+10:2*page+20], 0); err != nil {
		t.Fatal(err)
	}
	for _, p := range []int{1, 2} {
		if mode, _, _ := MemoryPolicy(b[p*page:]); mode != Preferred {
			t.Errorf("page %d: policy %v, want preferred", p, mode)
		}
	}
	for _, p := range []int{0, 3} {
		if mode, _, _ := MemoryPolicy(b[p*page:]); mode != DefaultMode {
			t.Errorf("page %d: policy %v, want default", p, mode)
		}
	}
}

func TestMemoryPolicyErrors(t *testing.T) {
	b := mapAnon(t, os.Getpagesize())
	for _, tc := range []struct {
		mode  Mode
		nodes []int
	}{
		{Preferred, nil}, {Preferred, []int{0, 1}}, {Bind, nil}, {Local, []int{0}},
		{DefaultMode, []int{0}}, {Mode(99), []int{0}}, {Bind, []int{-1}}, {Bind, []int{maskBits}},
	} {
		if err := SetMemoryPolicy(b, tc.mode, tc.nodes...); err == nil {
			t.Errorf("SetMemoryPolicy(%v, %v) succeeded", tc.mode, tc.nodes)
		}
	}
	h, _ := host()
	missing := h.Nodes[len(h.Nodes)-1].ID + 1
	if err := h.BindMemory(b, missing); !errors.Is(err, ErrUnknownNode) {
		t.Errorf("BindMemory to node %d: %v, want ErrUnknownNode", missing, err)
	}
	if err := SetMemoryPolicy(b, Bind, missing); err == nil {
		t.Errorf("SetMemoryPolicy(Bind, %d) on a machine without that node succeeded", missing)
	}
	if _, err := MemoryNode(nil); err == nil {
		t.Error("MemoryNode(nil) succeeded")
	}
	if err := SetMemoryPolicy(nil, Bind, 0); err != nil {
		t.Errorf("SetMemoryPolicy on an empty slice: %v", err)
	}
}

// TestPlacementFollowsPlan binds one slot per rank to the node of the rank's
// planned CPU and reads every slot's policy and node back.
func TestPlacementFollowsPlan(t *testing.T) {
	h, err := host()
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range []string{"", "2x4", "2x8x2/2"} {
		top := h
		if spec != "" {
			if top, err = ParseFake(spec); err != nil {
				t.Fatal(err)
			}
		}
		for _, policy := range []Policy{Compact, Spread} {
			n := len(top.CPUs)
			plan, err := top.Plan(n, policy)
			if err != nil {
				t.Fatal(err)
			}
			page := os.Getpagesize()
			arena := mapShared(t, n*page)
			for rank, cpu := range plan {
				slot := arena[rank*page : (rank+1)*page]
				node := top.NodeOfCPU(cpu)
				if err := top.BindMemory(slot, node); err != nil {
					t.Fatalf("%q %v rank %d: BindMemory(node %d): %v", spec, policy, rank, node, err)
				}
			}
			for rank, cpu := range plan {
				slot := arena[rank*page : (rank+1)*page]
				want, _ := top.HostNode(top.NodeOfCPU(cpu))
				mode, nodes, err := MemoryPolicy(slot)
				if err != nil || mode != Preferred || !slices.Equal(nodes, []int{want}) {
					t.Errorf("%q %v rank %d: policy %v %v, %v; want preferred [%d]", spec, policy, rank, mode, nodes, err, want)
				}
				if got, err := MemoryNode(slot); err != nil || got != want {
					t.Errorf("%q %v rank %d: node %d, %v; want %d", spec, policy, rank, got, err, want)
				}
			}
		}
	}
	if len(h.Nodes) < 2 {
		t.Logf("host has %d NUMA node(s): placement on distinct nodes was not exercised", len(h.Nodes))
	}
}

func TestHomeNodeHost(t *testing.T) {
	if os.Getenv(EnvCPU) != "" || os.Getenv(EnvTopology) != "" {
		t.Skipf("%s or %s set: the default topology is not the host's", EnvCPU, EnvTopology)
	}
	h, err := detectHost()
	if err != nil {
		t.Fatal(err)
	}
	allowed, _ := AllowedCPUs()
	want := h.NodeOfCPU(allowed[0])
	for _, c := range allowed {
		if h.NodeOfCPU(c) != want {
			want = -1
		}
	}
	if got := HomeNode(); got != want {
		t.Errorf("HomeNode() = %d, want %d (allowed CPUs %v)", got, want, allowed)
	}
}
