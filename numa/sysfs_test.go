package numa

import (
	"errors"
	"io/fs"
	"os"
	"slices"
	"testing"
)

func TestSysfsTwoSocketsSMT(t *testing.T) {
	top, err := readSysfs(os.DirFS("testdata/sys-2s-smt"))
	if err != nil {
		t.Fatal(err)
	}
	checkConsistent(t, top)
	if len(top.CPUs) != 16 || top.Cores != 8 || top.Packages != 2 || top.ThreadsPerCore() != 2 || len(top.Nodes) != 5 {
		t.Fatalf("got %v, want 16 CPUs (cpu16 is offline), 8 cores, 2 packages, SMT 2, 5 nodes", top)
	}
	for id := range 16 {
		core := id % 8
		want := CPU{ID: id, Package: core / 4, Node: core / 2, Core: core, Thread: id / 8}
		if c, err := top.CPU(id); err != nil || c != want {
			t.Errorf("CPU(%d) = %+v, %v, want %+v", id, c, err, want)
		}
	}
	if _, err := top.CPU(16); !errors.Is(err, ErrUnknownCPU) {
		t.Errorf("offline cpu16: %v, want ErrUnknownCPU", err)
	}
	wantNodes := []Node{
		{0, []int{0, 1, 8, 9}}, {1, []int{2, 3, 10, 11}}, {2, []int{4, 5, 12, 13}},
		{3, []int{6, 7, 14, 15}}, {4, nil},
	}
	for i, n := range top.Nodes {
		if n.ID != wantNodes[i].ID || !slices.Equal(n.CPUs, wantNodes[i].CPUs) {
			t.Errorf("node %d = %+v, want %+v", i, n, wantNodes[i])
		}
	}
	if want := (Cache{L1D: 48 << 10, L2: 1 << 20, L3: 32 << 20, Line: 64}); top.Cache != want {
		t.Errorf("cache %+v, want %+v", top.Cache, want)
	}
	// The plans of this tree equal those of the fake topology with the same shape.
	fake, err := ParseFake("2x4x2/2")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(fake.CPUs, top.CPUs) {
		t.Errorf("fake 2x4x2/2 CPUs %+v\ndiffer from the sysfs tree's %+v", fake.CPUs, top.CPUs)
	}
	compact, _ := top.Plan(16, Compact)
	if want := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}; !slices.Equal(compact, want) {
		t.Errorf("compact plan %v, want %v", compact, want)
	}
	spread, _ := top.Plan(6, Spread)
	if want := []int{0, 4, 1, 5, 2, 6}; !slices.Equal(spread, want) {
		t.Errorf("spread plan %v, want %v", spread, want)
	}
}

func TestSysfsFlatARM(t *testing.T) {
	top, err := readSysfs(os.DirFS("testdata/sys-arm-flat"))
	if err != nil {
		t.Fatal(err)
	}
	checkConsistent(t, top)
	if len(top.CPUs) != 4 || top.Cores != 4 || top.Packages != 1 || len(top.Nodes) != 1 || top.Nodes[0].ID != 0 {
		t.Fatalf("got %v, want 4 single-thread cores in one package and node 0", top)
	}
	if top.Cache != (Cache{}) {
		t.Errorf("cache %+v, want unknown", top.Cache)
	}
}

func TestSysfsErrors(t *testing.T) {
	for _, dir := range []string{"sys-bad-list", "sys-bad-sibling", "sys-bad-package"} {
		if top, err := readSysfs(os.DirFS("testdata/" + dir)); !errors.Is(err, ErrBadTopology) {
			t.Errorf("%s: %v, %v; want ErrBadTopology", dir, top, err)
		}
	}
	if _, err := readSysfs(os.DirFS("testdata/does-not-exist")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing tree: %v, want fs.ErrNotExist", err)
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int{"48K": 48 << 10, "32M": 32 << 20, "1G": 1 << 30, "512": 512} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v, want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "K", "-1K", "1.5M"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("parseSize(%q) succeeded", bad)
		}
	}
}
