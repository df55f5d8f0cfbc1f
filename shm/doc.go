// Package shm is the transport of shmcoll: a shared arena that the ranks of
// one node map, with per-rank control blocks and data slots, and the
// post/wait channel that collectives are built from. It knows no
// algorithm, and moves user data only in the cross-memory copies that a
// collective asks for.
//
// # Model
//
// Ranks are processes ([Join], [JoinEnv], [JoinFile]) or goroutines of one
// process ([NewLocal], [JoinLocal]); each holds an [Endpoint]. A rank sends
// by writing its own data slot ([Endpoint.Slot]), the inline bytes beside a
// counter ([Endpoint.Inline]) or its descriptor ([Endpoint.Descriptor]), and
// then publishing a counter with [Endpoint.Post] (a release store). A peer
// receives with [Endpoint.Wait] (an acquire that returns once the counter
// reached a value) and then reads or reduces straight from the sender's
// slot. Counters only increase and are never reset, so there is no ABA. A
// rank overwrites a range of its slot only when every reader of the old
// contents is done; algorithms ensure that by their structure or by
// acknowledgement counters.
//
// # Waiting
//
// A wait costs one atomic load (and one of the abort word) when the peer has
// already posted, and allocates nothing. Otherwise it spins (PAUSE; YIELD on
// arm64), then yields the CPU (runtime.Gosched for goroutine ranks;
// sched_yield for processes, with a runtime.Gosched every 16th yield only
// when GOMAXPROCS is 1, since with more Ps Gosched wakes an idle thread
// every time), then
// sleeps: a process on a futex whose word is the low half
// of the awaited counter, in the shared mapping (a shared futex, not
// FUTEX_PRIVATE_FLAG); a goroutine rank in the Go scheduler, on a channel
// per counter that the next post closes (no OS thread blocks). Each
// counter's line holds a count of sleepers, so a Post wakes (FUTEX_WAKE, or
// a channel close) only when someone sleeps. A process with GOMAXPROCS 1
// sleeps in a raw system call, at most 1ms at a time with a
// runtime.Gosched between sleeps: in a system call the Go scheduler sees,
// sysmon would take the only P and wake another thread to look for work,
// and those threads run in the turns of the ranks that share the CPU. The
// wake is a raw system call everywhere, since it does not block.
//
// Processes that outnumber the machine's online CPUs do not spin at all:
// they yield at once (Open MPI's mpi_yield_when_idle), for 30µs, before
// they sleep: a sched_yield gives the rest of the rank's time slice to the
// CPU's other tasks, and ranks that keep yielding beside a task from
// outside the job hand it the CPU. Otherwise the spin budget is [Options.SpinFor] at most (50µs
// by default, 2µs for goroutine ranks that outnumber GOMAXPROCS) and adapts
// below it: it halves after each wait that outlasts it, since then the
// poster is not running and spinning only keeps it off the CPU, down to 5µs
// (500ns when oversubscribed, and for goroutine ranks, whose yield is a
// cheap goroutine switch), and doubles after a wait that needed more
// than half of it. Then the wait yields for [Options.YieldFor] (200µs;
// 100µs for oversubscribed goroutine ranks) and sleeps. Sleeps are bounded, so abort, the
// caller's context and peer liveness are rechecked at least every
// min(Timeout/4, 20ms), in every phase: abort and context every 32nd spin
// and every 16th yield, liveness from 50µs into the wait. A wait that ends
// within 15 yields (the usual one of oversubscribed ranks) reads neither
// the clock nor the context.
//
// # Failure
//
// A wait fails only when the arena is aborted, when the awaited peer died or
// left, or when the caller's context ends. Peer death is seen through a
// pidfd opened when all ranks joined (immune to pid reuse; the process start
// time from /proc guards the window before it). [Endpoint.Abort], and a wait
// that finds its peer dead, set the shared abort word (the first rank wins
// and records its cause in its control block) and wake every sleeper, so
// every rank's ongoing and later waits return the same [*AbortError]
// (wrapping [ErrAborted], and [ErrPeerDead] for a death). A cancelled
// context does not abort the arena: the caller decides.
//
// # Cross-memory attach
//
// A rank may also copy straight from or into a peer's private memory, a
// buffer that the peer exposed for a call by publishing its [AddrOf]:
// [Endpoint.ReadPeer] and [Endpoint.WritePeer] (and their vectored forms)
// use process_vm_readv and process_vm_writev between processes, one copy
// instead of two through the arena, and a plain copy between goroutine
// ranks. The peer returns from that call only after every reader has
// posted that it is done. The kernel permits it only where a rank may
// ptrace its peer (same user, and Yama's ptrace_scope, which each process
// relaxes for itself with PR_SET_PTRACER as Open MPI does, or
// CAP_SYS_PTRACE), so when the arena is joined every rank reads every
// peer's control block through its published address and publishes its
// result, and [Endpoint.CrossMemory] is on, on every rank, only if every
// rank read every peer. [Options.NoCrossMemory] on any rank, or
// SHMCOLL_CMA=off, turns it off for the arena.
//
// # Lifetime
//
// Rank 0 creates /dev/shm/shmcoll.<uid>.<name> exclusively (O_EXCL,
// O_NOFOLLOW, mode 0600) and writes the header, the magic last; the others
// open it (retrying until it exists), check owner, mode, size and header
// without mapping anything they have not checked, and map it. Each rank
// reserves its own slot with fallocate (so a full /dev/shm fails at join,
// never with SIGBUS later, and the pages are allocated by their owner: on
// its NUMA node, or on [Options.NodeOf]'s through numa.BindMemory), marks
// itself joined, and the last to join unlinks the name: from then on a
// crash leaves nothing in /dev/shm. [Cleanup] removes segments of crashed
// runs whose processes are all dead. A launcher may instead create the
// arena in a memfd with [CreateFD] that its children inherit
// (SHMCOLL_ARENA=fd:N). [Endpoint.Close] marks the rank as left and unmaps;
// runtime.AddCleanup unmaps an endpoint that was never closed.
//
// A join succeeds on every rank or fails on every rank. The header's
// attached word decides: the joined-rank count reaching p first is success,
// even for a rank that afterwards sees the arena aborted (a faster rank may
// return and abort the new arena at once); a rank that gives up first (its
// context, its deadline, a dead or departed peer, the parent's failure)
// sets the word's failed bit and aborts the arena with its cause, which
// every other rank's join then returns.
//
// In-process arenas live in Go memory, so the race detector sees the
// protocol there; it does not see shared mappings, and the process tests
// prove the protocol across processes.
//
// # Layout
//
// All offsets are fixed by the header, which a joining rank checks against
// its own constants (a foreign, truncated or mismatched segment is an
// ErrBadHeader error, never a crash). p ranks, S = slot bytes and H = heap
// bytes (Options.HeapBytes, 0 for none), each rounded up to the page size;
// this is format version 4:
//
//	offset 0        header (4096 bytes)
//	  +0     magic "shmcoll1" (u64, stored last by the creator)
//	  +8     version, header size, p, control block size, counter spacing,
//	         counters per rank, inline bytes, descriptor bytes (u32 each)
//	  +40    S, slots offset, total size (u64)
//	  +64    creator pid, arena kind, creator start time, uid, page size
//	  +88    H (u64)
//	  +96    FNV-1a checksum of bytes 8..96
//	  +128   attached word (u32, own cache line): joined-rank count, and
//	         bit 31 once the join failed
//	  +256   abort word (u64, own cache line): 0, or 1 + first aborting rank
//	offset 4096     control block of rank 0 (2048 bytes), then rank 1, ...
//	  +0     state (free, joined, left), pid, start time
//	  +16    abort record: kind, dead peer, its pid, cause length, cause text
//	  +384   call descriptor (384 bytes)
//	  +768   join value (u64, Options.JoinValue)
//	  +776   cross-memory test: address of this control block in the
//	         rank's address space (1: not tested), result, and in rank
//	         0's block the decision (u64 each)
//	  +1024  counter 0 line (128 bytes: two cache lines, so that the
//	         adjacent-line prefetcher does not couple counters)
//	           +0 counter (u64; its low half is the futex word)
//	           +8 inline payload (48 bytes)
//	           +64 sleeper count (u32, in the second line)
//	  +1152  counter 1 ... counter 7 (up to +2048)
//	roundup(4096 + 2048p, page)   data slot of rank 0 (S bytes), rank 1, ...
//	then                          heap of rank 0 (H bytes), rank 1, ...
package shm
