package numa

import (
	"errors"
	"os"
	"slices"
	"testing"
)

func TestParseFakeShapes(t *testing.T) {
	for _, tc := range []struct {
		spec                          string
		cpus, cores, pkgs, nodes, smt int
	}{
		{"1x1", 1, 1, 1, 1, 1},
		{"2x4", 8, 8, 2, 2, 1},
		{"2x4x2", 16, 8, 2, 2, 2},
		{"2x8x2/2", 32, 16, 2, 4, 2},
		{" 4x3 ", 12, 12, 4, 4, 1},
		{"1x16/4", 16, 16, 1, 4, 1},
	} {
		top, err := ParseFake(tc.spec)
		if err != nil {
			t.Fatalf("ParseFake(%q): %v", tc.spec, err)
		}
		if got := [5]int{len(top.CPUs), top.Cores, top.Packages, len(top.Nodes), top.ThreadsPerCore()}; got != [5]int{tc.cpus, tc.cores, tc.pkgs, tc.nodes, tc.smt} {
			t.Errorf("ParseFake(%q): cpus, cores, packages, nodes, smt = %v, want %v", tc.spec, got,
				[5]int{tc.cpus, tc.cores, tc.pkgs, tc.nodes, tc.smt})
		}
		if !top.Fake || top.Spec != tc.spec {
			t.Errorf("ParseFake(%q): Fake=%v Spec=%q", tc.spec, top.Fake, top.Spec)
		}
		checkConsistent(t, top)
	}
}

// checkConsistent verifies the invariants every Topology must satisfy.
func checkConsistent(t *testing.T, top *Topology) {
	t.Helper()
	seen := map[int]bool{}
	for i, c := range top.CPUs {
		if i > 0 && c.ID <= top.CPUs[i-1].ID {
			t.Fatalf("CPUs not ascending at %d: %v", i, top.CPUs)
		}
		if c.Package < 0 || c.Package >= top.Packages || c.Core < 0 || c.Core >= top.Cores || c.Thread < 0 {
			t.Fatalf("CPU %+v out of range (packages %d, cores %d)", c, top.Packages, top.Cores)
		}
		if top.NodeOfCPU(c.ID) != c.Node || top.PackageOfCPU(c.ID) != c.Package {
			t.Fatalf("lookups disagree for %+v", c)
		}
		if !slices.Contains(top.CPUsOfNode(c.Node), c.ID) {
			t.Fatalf("node %d does not list cpu %d", c.Node, c.ID)
		}
		seen[c.ID] = true
	}
	n := 0
	for _, node := range top.Nodes {
		n += len(node.CPUs)
	}
	if n != len(top.CPUs) {
		t.Fatalf("nodes list %d CPUs, topology has %d", n, len(top.CPUs))
	}
	// Every core has exactly one thread 0 and lies in one package.
	pkgOfCore := map[int]int{}
	first := map[int]int{}
	for _, c := range top.CPUs {
		if p, ok := pkgOfCore[c.Core]; ok && p != c.Package {
			t.Fatalf("core %d spans packages %d and %d", c.Core, p, c.Package)
		}
		pkgOfCore[c.Core] = c.Package
		if c.Thread == 0 {
			first[c.Core]++
		}
	}
	for core := range top.Cores {
		if first[core] != 1 {
			t.Fatalf("core %d has %d first threads", core, first[core])
		}
	}
	if top.NodeOfCPU(-1) != -1 || top.PackageOfCPU(1<<20) != -1 {
		t.Fatalf("unknown CPUs must map to -1")
	}
}

func TestParseFakeNumbering(t *testing.T) {
	top, err := ParseFake("2x2x2/2")
	if err != nil {
		t.Fatal(err)
	}
	want := []CPU{
		{ID: 0, Package: 0, Node: 0, Core: 0, Thread: 0},
		{ID: 1, Package: 0, Node: 1, Core: 1, Thread: 0},
		{ID: 2, Package: 1, Node: 2, Core: 2, Thread: 0},
		{ID: 3, Package: 1, Node: 3, Core: 3, Thread: 0},
		{ID: 4, Package: 0, Node: 0, Core: 0, Thread: 1},
		{ID: 5, Package: 0, Node: 1, Core: 1, Thread: 1},
		{ID: 6, Package: 1, Node: 2, Core: 2, Thread: 1},
		{ID: 7, Package: 1, Node: 3, Core: 3, Thread: 1},
	}
	if !slices.Equal(top.CPUs, want) {
		t.Fatalf("CPUs = %+v\nwant %+v", top.CPUs, want)
	}
	if got := top.Siblings(5); !slices.Equal(got, []int{1, 5}) {
		t.Errorf("Siblings(5) = %v, want [1 5]", got)
	}
	if got := top.Siblings(8); got != nil {
		t.Errorf("Siblings(8) = %v, want nil", got)
	}
	if got := top.CPUsOfNode(2); !slices.Equal(got, []int{2, 6}) {
		t.Errorf("CPUsOfNode(2) = %v, want [2 6]", got)
	}
	if got := top.CPUsOfPackage(1); !slices.Equal(got, []int{2, 3, 6, 7}) {
		t.Errorf("CPUsOfPackage(1) = %v, want [2 3 6 7]", got)
	}
}

func TestParseFakeErrors(t *testing.T) {
	for _, spec := range []string{
		"", "2", "x4", "2x", "2x4x", "2x4x2x2", "0x4", "2x0", "2x4x0", "-2x4", "+2x4",
		"2x4/0", "2x4/3", "2x4/", "2 x4", "ax4", "2x4.5", "99999999999999999999x1",
		"64x64x2", "2x4/2/2", "2X4",
	} {
		top, err := ParseFake(spec)
		if err == nil {
			t.Errorf("ParseFake(%q) = %v, want an error", spec, top)
			continue
		}
		if !errors.Is(err, ErrBadTopology) {
			t.Errorf("ParseFake(%q) error %v does not wrap ErrBadTopology", spec, err)
		}
	}
}

func TestPlan(t *testing.T) {
	for _, tc := range []struct {
		spec   string
		n      int
		policy Policy
		want   []int
	}{
		// 2 sockets of 4 cores: CPUs 0-3 socket 0, 4-7 socket 1.
		{"2x4", 8, Compact, []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{"2x4", 8, Spread, []int{0, 4, 1, 5, 2, 6, 3, 7}},
		{"2x4", 3, Spread, []int{0, 4, 1}},
		{"2x4", 11, Compact, []int{0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2}},
		{"2x4", 3, None, []int{-1, -1, -1}},
		// With SMT, siblings (i and i+8) are used only after every core.
		{"2x4x2", 10, Compact, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{"2x4x2", 10, Spread, []int{0, 4, 1, 5, 2, 6, 3, 7, 8, 12}},
		{"2x4x2", 17, Compact, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0}},
		{"1x2", 5, Spread, []int{0, 1, 0, 1, 0}},
		{"3x2", 6, Spread, []int{0, 2, 4, 1, 3, 5}},
	} {
		top, err := ParseFake(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		got, err := top.Plan(tc.n, tc.policy)
		if err != nil {
			t.Fatalf("%s Plan(%d, %v): %v", tc.spec, tc.n, tc.policy, err)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s Plan(%d, %v) = %v, want %v", tc.spec, tc.n, tc.policy, got, tc.want)
		}
	}
}

func TestPlanErrors(t *testing.T) {
	top, err := ParseFake("2x4")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, -1} {
		if _, err := top.Plan(n, Compact); err == nil {
			t.Errorf("Plan(%d) succeeded", n)
		}
	}
	if _, err := top.Plan(2, Policy(42)); err == nil {
		t.Errorf("Plan with an unknown policy succeeded")
	}
}

func TestParsePolicy(t *testing.T) {
	for _, p := range []Policy{None, Compact, Spread} {
		got, err := ParsePolicy(p.String())
		if err != nil || got != p {
			t.Errorf("ParsePolicy(%q) = %v, %v", p.String(), got, err)
		}
	}
	if _, err := ParsePolicy("scatter"); err == nil {
		t.Errorf("ParsePolicy(scatter) succeeded")
	}
}

func TestCPUList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		out  string
	}{
		{"", nil, ""},
		{"0", []int{0}, "0"},
		{"0-3", []int{0, 1, 2, 3}, "0-3"},
		{"0-1,4,6-7\n", []int{0, 1, 4, 6, 7}, "0-1,4,6-7"},
		{"8-9,0-1,1", []int{0, 1, 8, 9}, "0-1,8-9"},
	} {
		got, err := ParseCPUList(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseCPUList(%q) = %v, %v, want %v", tc.in, got, err, tc.want)
		}
		if s := FormatCPUList(got); s != tc.out {
			t.Errorf("FormatCPUList(%v) = %q, want %q", got, s, tc.out)
		}
	}
	for _, bad := range []string{"a", "1-", "-1", "3-1", "1,,2", "0-99999999"} {
		if got, err := ParseCPUList(bad); err == nil {
			t.Errorf("ParseCPUList(%q) = %v, want an error", bad, got)
		}
	}
}

func TestRestrict(t *testing.T) {
	top, err := ParseFake("2x4x2") // siblings i and i+8; socket 0: cores 0-3
	if err != nil {
		t.Fatal(err)
	}
	// Keep cores 1 and 2 of socket 0 (with core 2 only its second thread)
	// and core 5 of socket 1.
	r, err := top.Restrict([]int{1, 9, 10, 5, 13})
	if err != nil {
		t.Fatal(err)
	}
	checkConsistent(t, r)
	want := []CPU{
		{ID: 1, Package: 0, Node: 0, Core: 0, Thread: 0},
		{ID: 5, Package: 1, Node: 1, Core: 2, Thread: 0},
		{ID: 9, Package: 0, Node: 0, Core: 0, Thread: 1},
		{ID: 10, Package: 0, Node: 0, Core: 1, Thread: 0},
		{ID: 13, Package: 1, Node: 1, Core: 2, Thread: 1},
	}
	if !slices.Equal(r.CPUs, want) {
		t.Fatalf("CPUs %+v\nwant %+v", r.CPUs, want)
	}
	if r.Packages != 2 || r.Cores != 3 || len(r.Nodes) != 2 {
		t.Errorf("restricted: %v", r)
	}
	plan, _ := r.Plan(5, Compact)
	if !slices.Equal(plan, []int{1, 10, 5, 9, 13}) {
		t.Errorf("compact plan %v", plan)
	}
	// Only socket 1: one package, node 0 stays without CPUs.
	r, err = top.Restrict([]int{4, 5})
	if err != nil {
		t.Fatal(err)
	}
	checkConsistent(t, r)
	if r.Packages != 1 || r.Cores != 2 || len(r.CPUsOfNode(0)) != 0 || !slices.Equal(r.CPUsOfNode(1), []int{4, 5}) {
		t.Errorf("socket 1 only: %v %+v", r, r.Nodes)
	}
	if _, err := top.Restrict([]int{16}); !errors.Is(err, ErrUnknownCPU) {
		t.Errorf("Restrict to cpu 16: %v", err)
	}
	if _, err := top.Restrict(nil); err == nil {
		t.Error("Restrict(nil) succeeded")
	}
}

func TestHomeNode(t *testing.T) {
	fake, err := ParseFake("2x4x2/2") // nodes: cores 0-1 node 0, 2-3 node 1, 4-5 node 2, 6-7 node 3
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env     string
		allowed []int
		want    int
	}{
		{"5", nil, 2}, {"14", []int{0}, 3}, {"0", nil, 0}, {"99", nil, -1}, {"x", nil, -1},
		{"", []int{0, 1}, -1}, // a fake topology says nothing about host CPUs
	} {
		if got := fake.homeNode(tc.env, tc.allowed); got != tc.want {
			t.Errorf("fake: homeNode(%q, %v) = %d, want %d", tc.env, tc.allowed, got, tc.want)
		}
	}
	sys, err := readSysfs(os.DirFS("testdata/sys-2s-smt")) // same shape, real numbering
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env     string
		allowed []int
		want    int
	}{
		{"", []int{2, 3, 10, 11}, 1}, {"", []int{4}, 2}, {"", []int{1, 2}, -1}, {"", nil, -1}, {"7", []int{0}, 3},
	} {
		if got := sys.homeNode(tc.env, tc.allowed); got != tc.want {
			t.Errorf("sysfs: homeNode(%q, %v) = %d, want %d", tc.env, tc.allowed, got, tc.want)
		}
	}
}
