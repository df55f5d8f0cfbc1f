// Package numa describes the machine (packages, NUMA nodes, physical cores,
// SMT siblings, cache sizes), plans where ranks run, pins threads and places
// memory.
//
// # Topology
//
// [Detect] reads the topology from sysfs (/sys/devices/system/cpu and
// /sys/devices/system/node) and the cache sizes from cpuid; [Default] caches
// it per process. Setting SHMCOLL_TOPOLOGY replaces it with a fake topology
// ([ParseFake]: "2x4" is 2 sockets of 4 cores, "2x4x2" adds 2-way SMT,
// "2x8x2/2" splits each socket into 2 NUMA nodes), so multi-socket code
// paths run on a small machine.
//
// # Plans
//
// [Topology.Plan] maps ranks to CPUs: [Compact] fills a package before the
// next, [Spread] deals ranks round-robin across packages; both use every
// physical core before any SMT sibling, and wrap around when ranks outnumber
// CPUs.
//
// # Pinning and placement (Linux)
//
// [PinThread] locks the calling goroutine to its OS thread and sets that
// thread's affinity; the caller keeps the goroutine locked while the pinning
// should hold. [BindMemory] sets a NUMA memory policy (mbind) on the pages of
// a mapped region; [MemoryPolicy] and [MemoryNode] read placement back
// (get_mempolicy). On a fake topology, CPU and node numbers are mapped onto
// the host modulo the host's counts ([Topology.HostCPU],
// [Topology.HostNode]), so the calls still succeed and still do something
// real. Outside Linux these operations return errors wrapping
// [ErrNotSupported].
package numa
