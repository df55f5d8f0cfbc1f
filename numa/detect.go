package numa

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strconv"
	"sync"

	"github.com/klauspost/cpuid/v2"
)

// EnvTopology names the environment variable that replaces the detected
// topology with a fake one (see [ParseFake] for the grammar).
const EnvTopology = "SHMCOLL_TOPOLOGY"

// Detect returns the topology of this machine, or the fake topology that
// SHMCOLL_TOPOLOGY specifies (a malformed specification is an error, never
// silently ignored).
//
// The real topology comes from sysfs (/sys/devices/system/cpu and
// /sys/devices/system/node); cache sizes come from cpuid, with sysfs filling
// what cpuid does not report. Without sysfs (systems other than Linux) the
// result is one package and one NUMA node holding runtime.NumCPU() cores.
//
// Each call reads sysfs afresh; [Default] caches the result.
func Detect() (*Topology, error) {
	if spec := os.Getenv(EnvTopology); spec != "" {
		t, err := ParseFake(spec)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvTopology, err)
		}
		return t, nil
	}
	return detectHost()
}

// detectHost reads the host topology, ignoring SHMCOLL_TOPOLOGY.
func detectHost() (*Topology, error) {
	t, err := readSysfs(os.DirFS("/sys"))
	if errors.Is(err, fs.ErrNotExist) {
		t = flatTopology(runtime.NumCPU())
	} else if err != nil {
		return nil, err
	}
	t.Cache = mergeCache(cpuidCache(), t.Cache)
	return t, nil
}

// flatTopology is one package, one node and n single-threaded cores.
func flatTopology(n int) *Topology {
	t := &Topology{Nodes: []Node{{ID: 0}}}
	for i := range n {
		t.CPUs = append(t.CPUs, CPU{ID: i, Core: i})
		t.Nodes[0].CPUs = append(t.Nodes[0].CPUs, i)
	}
	t.finish()
	return t
}

// Default returns the topology [Detect] returns, detected once per process.
func Default() (*Topology, error) { return defaultTopology() }

var defaultTopology = sync.OnceValues(Detect)

// host is the real topology of this machine, detected once, ignoring
// SHMCOLL_TOPOLOGY, and restricted to the CPUs the process may use: the
// target of the fake-to-host mapping.
var host = sync.OnceValues(func() (*Topology, error) {
	t, err := detectHost()
	if err != nil {
		return nil, err
	}
	allowed, err := AllowedCPUs()
	if err != nil {
		return t, nil
	}
	var known []int
	for _, c := range allowed {
		if _, ok := t.cpu(c); ok {
			known = append(known, c)
		}
	}
	if r, err := t.Restrict(known); err == nil {
		return r, nil
	}
	return t, nil
})

func cpuidCache() Cache {
	c := cpuid.CPU
	pos := func(n int) int { return max(n, 0) }
	return Cache{L1D: pos(c.Cache.L1D), L2: pos(c.Cache.L2), L3: pos(c.Cache.L3), Line: pos(c.CacheLine)}
}

// mergeCache takes a's sizes and fills the unknown ones from b.
func mergeCache(a, b Cache) Cache {
	pick := func(x, y int) int {
		if x > 0 {
			return x
		}
		return y
	}
	return Cache{L1D: pick(a.L1D, b.L1D), L2: pick(a.L2, b.L2), L3: pick(a.L3, b.L3), Line: pick(a.Line, b.Line)}
}

// hostCache returns the host's cache sizes (for fake topologies).
func hostCache() Cache {
	if h, err := host(); err == nil {
		return h.Cache
	}
	return cpuidCache()
}

// HostCPU returns the host CPU that CPU cpu of t runs on: cpu itself for a
// detected topology; for a fake one, the host CPUs this process may use
// ([AllowedCPUs]) taken modulo their count (fake CPU i runs on the
// (i mod n)-th of them).
func (t *Topology) HostCPU(cpu int) (int, error) {
	if _, ok := t.cpu(cpu); !ok {
		return -1, fmt.Errorf("%w %d (topology has %d CPUs)", ErrUnknownCPU, cpu, len(t.CPUs))
	}
	if !t.Fake {
		return cpu, nil
	}
	h, err := host()
	if err != nil {
		return -1, err
	}
	return h.CPUs[cpu%len(h.CPUs)].ID, nil
}

// HostNode returns the host NUMA node that node of t maps to: node itself
// for a detected topology; for a fake one, the host's nodes taken modulo
// their count.
func (t *Topology) HostNode(node int) (int, error) {
	i := t.nodeIndex(node)
	if i < 0 {
		return -1, fmt.Errorf("%w %d (topology has %d nodes)", ErrUnknownNode, node, len(t.Nodes))
	}
	if !t.Fake {
		return node, nil
	}
	h, err := host()
	if err != nil {
		return -1, err
	}
	return h.Nodes[i%len(h.Nodes)].ID, nil
}

func (t *Topology) nodeIndex(node int) int {
	for i, n := range t.Nodes {
		if n.ID == node {
			return i
		}
	}
	return -1
}

// PinThread pins the calling goroutine's OS thread to CPU cpu of t (mapped
// onto the host by [Topology.HostCPU]). See the package function [PinThread].
func (t *Topology) PinThread(cpu int) error {
	h, err := t.HostCPU(cpu)
	if err != nil {
		return err
	}
	return pinThread([]int{h})
}

// PinThreadSet pins the calling goroutine's OS thread to a set of CPUs of t
// (for instance all CPUs of a package, [Topology.CPUsOfPackage]).
func (t *Topology) PinThreadSet(cpus []int) error {
	if len(cpus) == 0 {
		return fmt.Errorf("numa: pin to an empty CPU set")
	}
	hs := make([]int, len(cpus))
	for i, c := range cpus {
		h, err := t.HostCPU(c)
		if err != nil {
			return err
		}
		hs[i] = h
	}
	return pinThread(hs)
}

// BindMemory places the pages of b on NUMA node node of t (mapped onto the
// host by [Topology.HostNode]). See the package function [BindMemory].
func (t *Topology) BindMemory(b []byte, node int) error {
	h, err := t.HostNode(node)
	if err != nil {
		return err
	}
	return SetMemoryPolicy(b, Preferred, h)
}

// PinThread locks the calling goroutine to its OS thread
// (runtime.LockOSThread) and restricts that thread to CPU cpu of the [Default]
// topology (on a fake topology, the host CPU [Topology.HostCPU] maps it to).
//
// The goroutine stays locked on success: the pinning holds for as long as the
// caller keeps it locked, and other goroutines are not affected. Call
// [UnpinThread] to restore the process's original affinity and unlock. Go
// creates new runtime threads from a template thread, so pinning a locked
// thread does not leak into other threads. On error the thread is left as
// it was and not locked.
func PinThread(cpu int) error {
	t, err := Default()
	if err != nil {
		return err
	}
	return t.PinThread(cpu)
}

// BindMemory asks the kernel to place the pages of b on NUMA node node of
// the [Default] topology (on a fake topology, the host node [Topology.HostNode]
// maps it to), and moves the pages already present that this process alone
// maps.
//
// The policy is MPOL_PREFERRED: when node is full the kernel takes memory
// from another node rather than failing a page fault (which would be a
// SIGBUS on shared memory). It applies to the whole pages that b touches, so
// b should be page-aligned memory from mmap (an arena slot), not Go heap
// memory. For shared memory the policy belongs to the shared object and
// holds for every process that maps it. See [SetMemoryPolicy] for other modes
// and [MemoryPolicy] and [MemoryNode] to read the result back.
//
// Where the kernel has no NUMA support, or a seccomp filter refuses the call
// (as Docker's default profile does without CAP_SYS_NICE), the error wraps
// [ErrNotSupported]: callers that only optimise placement can ignore it.
func BindMemory(b []byte, node int) error {
	t, err := Default()
	if err != nil {
		return err
	}
	return t.BindMemory(b, node)
}

// Mode is a Linux memory policy mode (MPOL_*).
type Mode int

// Memory policy modes, with the values of the Linux MPOL_* constants.
const (
	DefaultMode Mode = 0 // MPOL_DEFAULT: the thread's policy (usually local allocation)
	Preferred   Mode = 1 // MPOL_PREFERRED: one node, falling back to others when full
	Bind        Mode = 2 // MPOL_BIND: only the given nodes
	Interleave  Mode = 3 // MPOL_INTERLEAVE: pages round-robin over the nodes
	Local       Mode = 4 // MPOL_LOCAL: the node of the CPU that faults the page
)

// String returns the mode's name.
func (m Mode) String() string {
	switch m {
	case DefaultMode:
		return "default"
	case Preferred:
		return "preferred"
	case Bind:
		return "bind"
	case Interleave:
		return "interleave"
	case Local:
		return "local"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// EnvCPU names the variable a launcher (launch, shmrun) sets to the CPU it
// bound the process to, in the numbering of [Default].
const EnvCPU = "SHMCOLL_CPU"

// HomeNode returns the NUMA node of [Default] that this process runs on:
// the node of the CPU in SHMCOLL_CPU when a launcher set it; otherwise, on a
// detected topology, the node that holds every CPU the process may use
// ([AllowedCPUs]). It returns -1 when the process spans several nodes or
// nothing is known. Use it to place a rank's own memory, for instance as
// shm.Options.NodeOf.
func HomeNode() int {
	t, err := Default()
	if err != nil {
		return -1
	}
	allowed, _ := AllowedCPUs()
	return t.homeNode(os.Getenv(EnvCPU), allowed)
}

func (t *Topology) homeNode(envCPU string, allowed []int) int {
	if envCPU != "" {
		cpu, err := strconv.Atoi(envCPU)
		if err != nil {
			return -1
		}
		return t.NodeOfCPU(cpu)
	}
	if t.Fake || len(allowed) == 0 {
		return -1 // host CPU numbers say nothing about fake nodes
	}
	node := t.NodeOfCPU(allowed[0])
	for _, c := range allowed[1:] {
		if t.NodeOfCPU(c) != node {
			return -1
		}
	}
	return node
}
