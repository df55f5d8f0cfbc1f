package numa

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Sentinel errors. Errors returned by this package wrap one of them where it
// applies, so callers can test with errors.Is.
var (
	// ErrNotSupported is wrapped by every operation that the running system
	// cannot perform (affinity and memory policy outside Linux, mbind on a
	// kernel without NUMA support).
	ErrNotSupported = errors.New("numa: not supported on this system")
	// ErrBadTopology is wrapped by errors about a fake topology
	// specification or an unreadable sysfs tree.
	ErrBadTopology = errors.New("numa: bad topology")
	// ErrUnknownCPU is wrapped when a CPU number is not part of the topology.
	ErrUnknownCPU = errors.New("numa: unknown cpu")
	// ErrUnknownNode is wrapped when a NUMA node number is not part of the topology.
	ErrUnknownNode = errors.New("numa: unknown node")
)

// CPU is one logical CPU (hardware thread) of a [Topology].
type CPU struct {
	ID      int // the OS CPU number, as sched_setaffinity takes it
	Package int // dense package (socket) index, 0..Packages-1, ordered by physical id
	Node    int // the NUMA node id (the N of /sys/devices/system/node/nodeN)
	Core    int // dense physical-core index, 0..Cores-1, package-major
	Thread  int // SMT index within the core: 0 for the first hardware thread
}

// Node is one NUMA node with the CPUs it holds (ascending OS CPU numbers).
type Node struct {
	ID   int
	CPUs []int
}

// Cache holds cache sizes in bytes (0 when unknown).
type Cache struct {
	L1D  int // level-1 data cache of one core
	L2   int // level-2 cache of one core (or cluster)
	L3   int // last-level cache (per package, or per CCX on AMD)
	Line int // cache line size
}

// Topology is what the machine looks like: packages (sockets), NUMA nodes,
// physical cores and their SMT siblings, and cache sizes. A Topology is
// immutable after construction and safe for concurrent use.
type Topology struct {
	// CPUs lists the online CPUs in ascending ID order.
	CPUs []CPU
	// Nodes lists the NUMA nodes in ascending ID order. A node may hold no
	// CPUs (memory-only nodes such as CXL memory).
	Nodes []Node
	// Packages is the number of packages (sockets).
	Packages int
	// Cores is the number of physical cores.
	Cores int
	// Cache holds the cache sizes.
	Cache Cache
	// Fake is true for a topology made by [ParseFake] (SHMCOLL_TOPOLOGY):
	// its CPU and node numbers are not the host's, and the operations that
	// touch the host ([Topology.PinThread], [Topology.BindMemory]) map them
	// onto the host modulo the host's CPU and node counts.
	Fake bool
	// Spec is the specification a fake topology was parsed from.
	Spec string

	index map[int]int // CPU ID -> index in CPUs
}

// finish builds the lookup index and the derived counts; cpus must be sorted
// by ID and carry dense Package and Core indexes.
func (t *Topology) finish() {
	t.index = make(map[int]int, len(t.CPUs))
	t.Packages, t.Cores = 0, 0
	for i, c := range t.CPUs {
		t.index[c.ID] = i
		t.Packages = max(t.Packages, c.Package+1)
		t.Cores = max(t.Cores, c.Core+1)
	}
}

// cpu returns the CPU with the given OS number.
func (t *Topology) cpu(id int) (CPU, bool) {
	i, ok := t.index[id]
	if !ok {
		return CPU{}, false
	}
	return t.CPUs[i], true
}

// CPU returns the description of the CPU with OS number id.
func (t *Topology) CPU(id int) (CPU, error) {
	c, ok := t.cpu(id)
	if !ok {
		return CPU{}, fmt.Errorf("%w %d (topology has %d CPUs)", ErrUnknownCPU, id, len(t.CPUs))
	}
	return c, nil
}

// NodeOfCPU returns the NUMA node of the CPU, or -1 if the CPU is not part of
// the topology.
func (t *Topology) NodeOfCPU(cpu int) int {
	c, ok := t.cpu(cpu)
	if !ok {
		return -1
	}
	return c.Node
}

// PackageOfCPU returns the dense package index of the CPU, or -1 if the CPU
// is not part of the topology.
func (t *Topology) PackageOfCPU(cpu int) int {
	c, ok := t.cpu(cpu)
	if !ok {
		return -1
	}
	return c.Package
}

// CPUsOfPackage returns the CPUs of package p (a dense index), ascending.
func (t *Topology) CPUsOfPackage(p int) []int {
	var ids []int
	for _, c := range t.CPUs {
		if c.Package == p {
			ids = append(ids, c.ID)
		}
	}
	return ids
}

// CPUsOfNode returns the CPUs of the NUMA node, ascending (nil for an
// unknown node).
func (t *Topology) CPUsOfNode(node int) []int {
	for _, n := range t.Nodes {
		if n.ID == node {
			return slices.Clone(n.CPUs)
		}
	}
	return nil
}

// Siblings returns the CPUs of the physical core that holds cpu (cpu
// included), in SMT order; nil for an unknown CPU.
func (t *Topology) Siblings(cpu int) []int {
	c, ok := t.cpu(cpu)
	if !ok {
		return nil
	}
	var ids []int
	for _, o := range t.CPUs {
		if o.Core == c.Core {
			ids = append(ids, o.ID)
		}
	}
	slices.SortFunc(ids, func(a, b int) int { return t.CPUs[t.index[a]].Thread - t.CPUs[t.index[b]].Thread })
	return ids
}

// ThreadsPerCore returns the largest number of hardware threads of one core.
func (t *Topology) ThreadsPerCore() int {
	n := 0
	for _, c := range t.CPUs {
		n = max(n, c.Thread+1)
	}
	return n
}

// String summarises the topology on one line.
func (t *Topology) String() string {
	var b strings.Builder
	if t.Fake {
		fmt.Fprintf(&b, "fake %q: ", t.Spec)
	}
	fmt.Fprintf(&b, "%d package(s), %d NUMA node(s), %d core(s), %d CPU(s), %d thread(s)/core",
		t.Packages, len(t.Nodes), t.Cores, len(t.CPUs), t.ThreadsPerCore())
	if t.Cache.L1D > 0 || t.Cache.L2 > 0 || t.Cache.L3 > 0 {
		fmt.Fprintf(&b, ", L1d %s, L2 %s, L3 %s", sizeString(t.Cache.L1D), sizeString(t.Cache.L2), sizeString(t.Cache.L3))
	}
	return b.String()
}

func sizeString(n int) string {
	switch {
	case n <= 0:
		return "?"
	case n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// Policy says how [Topology.Plan] places ranks on CPUs.
type Policy int

const (
	// None places no rank: every entry of the plan is -1 (do not pin).
	None Policy = iota
	// Compact fills one package before the next: rank i goes to the i-th
	// physical core in package-major order.
	Compact
	// Spread deals ranks round-robin across packages: rank i goes to
	// package i mod Packages.
	Spread
)

// String returns the name ParsePolicy accepts.
func (p Policy) String() string {
	switch p {
	case None:
		return "none"
	case Compact:
		return "compact"
	case Spread:
		return "spread"
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

// ParsePolicy parses "none", "compact" or "spread".
func ParsePolicy(s string) (Policy, error) {
	for _, p := range []Policy{None, Compact, Spread} {
		if s == p.String() {
			return p, nil
		}
	}
	return None, fmt.Errorf("numa: unknown placement policy %q (want none, compact or spread)", s)
}

// Plan maps n ranks to CPUs: the returned slice holds the OS CPU number of
// each rank (-1 for every rank under [None]).
//
// Both [Compact] and [Spread] give each rank its own physical core while
// there are enough: the first hardware thread of every core is used before
// any SMT sibling, so SMT siblings are only shared once the ranks outnumber
// the cores. With more ranks than CPUs the plan wraps around (rank i gets the
// CPU of rank i mod CPUs), which oversubscribes CPUs evenly.
func (t *Topology) Plan(n int, policy Policy) ([]int, error) {
	if n <= 0 {
		return nil, fmt.Errorf("numa: plan for %d ranks: need at least one rank", n)
	}
	if len(t.CPUs) == 0 {
		return nil, fmt.Errorf("%w: no CPUs", ErrBadTopology)
	}
	plan := make([]int, n)
	if policy == None {
		for i := range plan {
			plan[i] = -1
		}
		return plan, nil
	}
	var order []int
	switch policy {
	case Compact:
		order = t.compactOrder()
	case Spread:
		order = t.spreadOrder()
	default:
		return nil, fmt.Errorf("numa: plan: unknown policy %v", policy)
	}
	for i := range plan {
		plan[i] = order[i%len(order)]
	}
	return plan, nil
}

// byThreadCore returns, for each SMT level, the CPUs of that level indexed
// by dense core index (-1 where a core lacks that thread).
func (t *Topology) byThreadCore() [][]int {
	levels := make([][]int, t.ThreadsPerCore())
	for k := range levels {
		levels[k] = make([]int, t.Cores)
		for i := range levels[k] {
			levels[k][i] = -1
		}
	}
	for _, c := range t.CPUs {
		levels[c.Thread][c.Core] = c.ID
	}
	return levels
}

func (t *Topology) compactOrder() []int {
	order := make([]int, 0, len(t.CPUs))
	for _, level := range t.byThreadCore() {
		for _, id := range level {
			if id >= 0 {
				order = append(order, id)
			}
		}
	}
	return order
}

func (t *Topology) spreadOrder() []int {
	// Cores of each package in dense (package-major) order.
	pkgCores := make([][]int, t.Packages)
	for _, c := range t.CPUs {
		if !slices.Contains(pkgCores[c.Package], c.Core) {
			pkgCores[c.Package] = append(pkgCores[c.Package], c.Core)
		}
	}
	for _, cores := range pkgCores {
		slices.Sort(cores)
	}
	maxCores := 0
	for _, cores := range pkgCores {
		maxCores = max(maxCores, len(cores))
	}
	order := make([]int, 0, len(t.CPUs))
	for _, level := range t.byThreadCore() {
		for j := range maxCores {
			for _, cores := range pkgCores {
				if j < len(cores) {
					if id := level[cores[j]]; id >= 0 {
						order = append(order, id)
					}
				}
			}
		}
	}
	return order
}

// Restrict returns the topology reduced to the given CPUs (for instance the
// CPUs a cpuset lets the process use, [Affinity]). Packages and cores left
// without CPUs disappear and the dense indexes are renumbered, SMT indexes
// within each core too; nodes stay, possibly without CPUs. CPUs not in t are
// an error, and so is an empty set.
func (t *Topology) Restrict(cpus []int) (*Topology, error) {
	keep := make(map[int]bool, len(cpus))
	for _, id := range cpus {
		if _, ok := t.cpu(id); !ok {
			return nil, fmt.Errorf("%w %d (topology has %d CPUs)", ErrUnknownCPU, id, len(t.CPUs))
		}
		keep[id] = true
	}
	if len(keep) == 0 {
		return nil, fmt.Errorf("numa: restrict to no CPU")
	}
	r := &Topology{Cache: t.Cache, Fake: t.Fake, Spec: t.Spec}
	for _, c := range t.CPUs {
		if keep[c.ID] {
			r.CPUs = append(r.CPUs, c)
		}
	}
	// dense maps the surviving values of an index onto 0, 1, ... in order.
	dense := func(get func(CPU) int) map[int]int {
		var vals []int
		for _, c := range r.CPUs {
			vals = append(vals, get(c))
		}
		slices.Sort(vals)
		m := map[int]int{}
		for _, v := range slices.Compact(vals) {
			m[v] = len(m)
		}
		return m
	}
	pkg := dense(func(c CPU) int { return c.Package })
	core := dense(func(c CPU) int { return c.Core })
	// A core's surviving threads keep their order: its k-th survivor by
	// original SMT index becomes thread k.
	byThread := slices.Clone(r.CPUs)
	slices.SortStableFunc(byThread, func(a, b CPU) int { return a.Thread - b.Thread })
	thread, seen := map[int]int{}, map[int]int{}
	for _, c := range byThread {
		thread[c.ID] = seen[c.Core]
		seen[c.Core]++
	}
	for i, c := range r.CPUs {
		r.CPUs[i].Package, r.CPUs[i].Core, r.CPUs[i].Thread = pkg[c.Package], core[c.Core], thread[c.ID]
	}
	for _, n := range t.Nodes {
		var ids []int
		for _, id := range n.CPUs {
			if keep[id] {
				ids = append(ids, id)
			}
		}
		r.Nodes = append(r.Nodes, Node{ID: n.ID, CPUs: ids})
	}
	r.finish()
	return r, nil
}
