package numa

import (
	"fmt"
	"strconv"
	"strings"
)

// maxFakeCPUs bounds the size of a fake topology.
const maxFakeCPUs = 4096

// ParseFake builds a fake topology from a specification of the form
//
//	SxC[xT][/N]
//
// S packages (sockets) of C physical cores each, T hardware threads per core
// (default 1), and N NUMA nodes per package (default 1; N must divide C, and
// the cores of a package are split into N equal consecutive groups). Every
// number is a positive decimal integer, and S*C*T is at most 4096. Examples:
//
//	"2x4"     2 sockets of 4 cores, one NUMA node each: 8 CPUs, nodes 0 and 1
//	"2x4x2"   the same with 2-way SMT: 16 CPUs
//	"2x8x2/2" 2 sockets of 8 SMT cores, each split into 2 NUMA nodes (SNC, NPS2)
//	"1x16"    one socket of 16 cores
//
// CPUs are numbered as Linux numbers them on x86 servers: the first threads of
// all cores first (socket 0's cores, then socket 1's), then the second threads
// in the same order, so CPU i and CPU i+S*C are SMT siblings. NUMA node ids run
// package-major: package s holds nodes s*N..s*N+N-1.
//
// Cache sizes are the host's. The result has Fake set.
func ParseFake(spec string) (*Topology, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: fake topology %q: %s (want SxC[xT][/N], e.g. 2x4, 2x4x2 or 2x8x2/2)",
			ErrBadTopology, spec, fmt.Sprintf(format, args...))
	}
	s := strings.TrimSpace(spec)
	nodesPer := 1
	if before, after, ok := strings.Cut(s, "/"); ok {
		n, err := positive(after)
		if err != nil {
			return nil, bad("NUMA nodes per package: %v", err)
		}
		s, nodesPer = before, n
	}
	fields := strings.Split(s, "x")
	if len(fields) < 2 || len(fields) > 3 {
		return nil, bad("need 2 or 3 numbers separated by x")
	}
	var dims [3]int
	dims[2] = 1
	names := [3]string{"packages", "cores per package", "threads per core"}
	for i, f := range fields {
		n, err := positive(f)
		if err != nil {
			return nil, bad("%s: %v", names[i], err)
		}
		dims[i] = n
	}
	sockets, cores, threads := dims[0], dims[1], dims[2]
	if sockets > maxFakeCPUs || cores > maxFakeCPUs || threads > maxFakeCPUs ||
		sockets*cores*threads > maxFakeCPUs {
		return nil, bad("more than %d CPUs", maxFakeCPUs)
	}
	if cores%nodesPer != 0 {
		return nil, bad("%d NUMA nodes do not divide %d cores per package", nodesPer, cores)
	}
	coresPerNode := cores / nodesPer
	t := &Topology{Fake: true, Spec: spec, Cache: hostCache()}
	t.CPUs = make([]CPU, 0, sockets*cores*threads)
	for th := range threads {
		for so := range sockets {
			for c := range cores {
				t.CPUs = append(t.CPUs, CPU{
					ID:      th*sockets*cores + so*cores + c,
					Package: so,
					Node:    so*nodesPer + c/coresPerNode,
					Core:    so*cores + c,
					Thread:  th,
				})
			}
		}
	}
	t.Nodes = make([]Node, sockets*nodesPer)
	for i := range t.Nodes {
		t.Nodes[i].ID = i
	}
	for _, c := range t.CPUs { // ascending IDs: node CPU lists come out sorted
		t.Nodes[c.Node].CPUs = append(t.Nodes[c.Node].CPUs, c.ID)
	}
	t.finish()
	return t, nil
}

// positive parses a positive decimal integer without sign or spaces.
func positive(s string) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("empty number")
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, fmt.Errorf("%q is not a positive integer", s)
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%q is too large", s)
	}
	if n == 0 {
		return 0, fmt.Errorf("%q must be at least 1", s)
	}
	return n, nil
}
