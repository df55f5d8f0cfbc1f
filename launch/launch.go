package launch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shmcoll/shmcoll/numa"
	"github.com/shmcoll/shmcoll/shm"
)

// Environment variables set in every rank.
const (
	EnvRank  = "SHMCOLL_RANK"  // the rank, 0..size-1
	EnvSize  = "SHMCOLL_SIZE"  // the number of ranks
	EnvArena = "SHMCOLL_ARENA" // the arena: a name, or fd:N for an inherited memfd
	// EnvCPU is set when the rank is bound: the CPU its plan gave it, in
	// the numbering of the topology the plan came from (when that is a fake
	// one, the rank also gets its SHMCOLL_TOPOLOGY), so that the rank finds
	// its node with numa.HomeNode. The process is already bound when it
	// starts; it need not pin itself.
	EnvCPU = numa.EnvCPU
)

// MaxRanks is the largest number of ranks a job may have.
const MaxRanks = 4096

// DefaultKillGrace is the time between SIGTERM and SIGKILL when the rest of a
// job is killed.
const DefaultKillGrace = time.Second

// ArenaFD is the file descriptor of the inherited arena in every rank under
// [ArenaMemfd]: SHMCOLL_ARENA=fd:3.
const ArenaFD = 3

// ArenaKind says how the ranks find their arena.
type ArenaKind int

const (
	// ArenaMemfd: the launcher creates the arena in a memfd
	// (shm.CreateFD, Config.SlotBytes per rank) that every rank inherits as
	// file descriptor 3, SHMCOLL_ARENA=fd:3. Nothing ever appears in
	// /dev/shm, and the memory is not limited by the size of /dev/shm. The
	// ranks must accept the launcher's slot size (shm.Options.SlotBytes 0 or
	// equal). Where memfds do not exist, the launcher falls back to
	// ArenaNamed.
	ArenaMemfd ArenaKind = iota
	// ArenaNamed: SHMCOLL_ARENA is a name (Config.Arena, or a fresh
	// shmcoll.<uid>.<nonce>); rank 0 creates the segment with its own slot
	// size, the others join it, and the last to join unlinks it.
	ArenaNamed
)

// String returns the name ParseArenaKind accepts.
func (k ArenaKind) String() string {
	switch k {
	case ArenaMemfd:
		return "memfd"
	case ArenaNamed:
		return "named"
	}
	return fmt.Sprintf("ArenaKind(%d)", int(k))
}

// ParseArenaKind parses "memfd" or "named".
func ParseArenaKind(s string) (ArenaKind, error) {
	for _, k := range []ArenaKind{ArenaMemfd, ArenaNamed} {
		if s == k.String() {
			return k, nil
		}
	}
	return ArenaMemfd, fmt.Errorf("%w: unknown arena kind %q (want memfd or named)", ErrBadConfig, s)
}

var (
	// ErrBadConfig is wrapped by errors about a [Config].
	ErrBadConfig = errors.New("launch: bad configuration")
	// ErrTimeout is wrapped by the error of a job that ran out of time
	// (Config.Timeout).
	ErrTimeout = errors.New("launch: job timed out")
	// ErrNotSupported is wrapped when binding is asked for on a system that
	// cannot bind processes.
	ErrNotSupported = errors.New("launch: not supported on this system")
)

// Bind says how ranks are bound to CPUs.
type Bind int

const (
	// BindNone leaves ranks unbound.
	BindNone Bind = iota
	// BindCore binds each rank to the one CPU its plan gives it.
	BindCore
	// BindSocket binds each rank to all CPUs of the package (socket) of the
	// CPU its plan gives it.
	BindSocket
	// BindAuto shares the CPUs out among the ranks. When there are at least
	// as many physical cores as ranks, each rank is bound to ⌊C/N⌋ or
	// ⌈C/N⌉ of the C cores (with all their hardware threads), neighbours in
	// package order, so that a rank whose goroutines run in parallel gets
	// its share of the machine: a Go rank's GOMAXPROCS is the number of
	// CPUs in its set. The map policy orders the ranks over these sets:
	// Compact in rank order, Spread dealing the ranks across packages.
	// With more ranks than cores, each rank is bound to one CPU, dealt out
	// as BindCore deals them (oversubscribed ranks included, so that each
	// CPU keeps the same ranks, which take turns on it), and GOMAXPROCS is
	// 1: a rank's share is then one CPU or less.
	BindAuto
)

// String returns the name ParseBind accepts.
func (b Bind) String() string {
	switch b {
	case BindNone:
		return "none"
	case BindCore:
		return "core"
	case BindSocket:
		return "socket"
	case BindAuto:
		return "auto"
	}
	return fmt.Sprintf("Bind(%d)", int(b))
}

// ParseBind parses "none", "core", "socket" or "auto".
func ParseBind(s string) (Bind, error) {
	for _, b := range []Bind{BindNone, BindCore, BindSocket, BindAuto} {
		if s == b.String() {
			return b, nil
		}
	}
	return BindNone, fmt.Errorf("%w: unknown binding %q (want core, socket, none or auto)", ErrBadConfig, s)
}

// Config describes a job: NP copies of one program.
type Config struct {
	// NP is the number of ranks, 1..MaxRanks.
	NP int
	// Prog is the program, a path or a name looked up in PATH.
	Prog string
	// Args are the program's arguments (without the program name).
	Args []string
	// Env holds extra "KEY=value" entries added to the launcher's
	// environment for every rank (later entries win).
	Env []string
	// Dir is the ranks' working directory ("" for the launcher's).
	Dir string
	// Bind says how ranks are bound to CPUs.
	Bind Bind
	// Map is the placement policy of bound ranks; the zero value (None)
	// means numa.Compact.
	Map numa.Policy
	// Topology is the machine to plan on; nil means numa.Default() (which
	// honours SHMCOLL_TOPOLOGY).
	Topology *numa.Topology
	// Stdout and Stderr receive the ranks' output, each line prefixed by
	// "[rank] " unless NoPrefix is set; nil means os.Stdout and os.Stderr.
	// Lines of different ranks never interleave: a partial line is held
	// until its newline (or 1 MiB, or the end of the rank's output).
	Stdout, Stderr io.Writer
	// NoPrefix writes the ranks' output unchanged.
	NoPrefix bool
	// Timeout, if positive, kills the job after that time; Wait then
	// returns an error wrapping ErrTimeout.
	Timeout time.Duration
	// KillGrace is the time between SIGTERM and SIGKILL when the rest of
	// the job is killed; 0 means DefaultKillGrace.
	KillGrace time.Duration
	// ArenaKind says how the ranks find their arena.
	ArenaKind ArenaKind
	// SlotBytes is the slot size of a memfd arena (0: shm.DefaultSlotBytes).
	SlotBytes int
	// HeapBytes is the heap of each rank of a memfd arena (0: none), from
	// which collectives.Alloc hands out buffers.
	HeapBytes int
	// Arena names a named arena (and implies ArenaNamed); "" generates a
	// fresh name shmcoll.<uid>.<nonce> when one is needed. Whatever is left
	// of the segment in /dev/shm is removed when the job ends.
	Arena string
}

// RankError reports a rank that failed: it exited with a non-zero status,
// was killed by a signal, or could not be waited for.
type RankError struct {
	Rank   int
	PID    int
	Status int            // exit status, or -1 if the rank did not exit normally
	Signal syscall.Signal // the signal that killed the rank, or 0
	Err    error          // the underlying error
}

func (e *RankError) Error() string {
	switch {
	case e.Signal != 0:
		return fmt.Sprintf("rank %d (pid %d) killed by signal %d (%v)", e.Rank, e.PID, int(e.Signal), e.Signal)
	case e.Status >= 0:
		return fmt.Sprintf("rank %d (pid %d) exited with status %d", e.Rank, e.PID, e.Status)
	}
	return fmt.Sprintf("rank %d (pid %d): %v", e.Rank, e.PID, e.Err)
}

func (e *RankError) Unwrap() error { return e.Err }

// ExitCode is the exit code a launcher should exit with for this failure:
// the rank's status, 128+signal for a rank killed by a signal, or 1.
func (e *RankError) ExitCode() int {
	switch {
	case e.Signal != 0:
		return 128 + int(e.Signal)
	case e.Status > 0:
		return e.Status
	}
	return 1
}

// Job is a running set of ranks.
type Job struct {
	np    int
	arena string
	cmds  []*exec.Cmd
	cpus  [][]int
	grace time.Duration
	kill  context.CancelCauseFunc

	results chan rankResult
	done    chan struct{}
	err     error // valid after done is closed

	mu      sync.Mutex
	exited  []bool
	killing bool // the launcher is killing the job: later deaths are not failures
	termFwd bool // SIGTERM came from outside (Signal): ranks it kills caused the failure

	outputMu sync.Mutex     // serialises the ranks' output
	output   sync.WaitGroup // the goroutines copying it
	readers  []*os.File     // the read ends of the ranks' pipes
}

// outputDelay bounds how long the job waits, once every rank has exited,
// for pipes that something outside the ranks' process groups still holds.
const outputDelay = 2 * time.Second

// drain copies a rank's pipe to dst until the pipe closes.
func (j *Job) drain(r *os.File, dst io.Writer) {
	j.readers = append(j.readers, r)
	j.output.Add(1)
	go func() {
		defer j.output.Done()
		io.Copy(dst, r)
		if p, ok := dst.(*prefixWriter); ok {
			p.flush()
		}
		r.Close()
	}()
}

// awaitOutput waits until all output is copied, at most outputDelay, and
// then cuts the pipes still open.
func (j *Job) awaitOutput() {
	done := make(chan struct{})
	go func() {
		j.output.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(outputDelay):
		for _, r := range j.readers {
			r.Close()
		}
		<-done
	}
}

type rankResult struct {
	rank int
	err  *RankError // nil on success
}

// Start starts a job. The ranks run until they exit, one fails, ctx ends or
// the timeout expires; as soon as one rank fails (or ctx ends) the others are
// sent SIGTERM and, after Config.KillGrace, SIGKILL. Every rank runs in its
// own process group, which is killed with it, so that nothing of the job
// outlives it; on Linux the ranks are also killed if the launcher dies. The
// ranks' standard input is /dev/null.
//
// If a rank cannot be started, the ranks already started are killed and Start
// returns the error.
//
// On Linux the kernel kills a rank when the OS thread that started it exits
// (PR_SET_PDEATHSIG is per thread). Go ends a thread only when a goroutine
// locked to it (runtime.LockOSThread) returns without unlocking, so do not
// call Start from such a goroutine.
func Start(ctx context.Context, cfg Config) (*Job, error) {
	if cfg.NP < 1 || cfg.NP > MaxRanks {
		return nil, fmt.Errorf("%w: %d ranks: need 1 to %d", ErrBadConfig, cfg.NP, MaxRanks)
	}
	if cfg.Prog == "" {
		return nil, fmt.Errorf("%w: no program to run", ErrBadConfig)
	}
	prog, err := exec.LookPath(cfg.Prog)
	if err != nil {
		return nil, fmt.Errorf("launch: program %q: %w", cfg.Prog, err)
	}
	for _, kv := range cfg.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return nil, fmt.Errorf("%w: environment entry %q is not KEY=value", ErrBadConfig, kv)
		}
	}
	cpus, planned, planTop, err := bindings(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.SlotBytes < 0 {
		return nil, fmt.Errorf("%w: slot size %d", ErrBadConfig, cfg.SlotBytes)
	}
	if cfg.HeapBytes < 0 {
		return nil, fmt.Errorf("%w: heap size %d", ErrBadConfig, cfg.HeapBytes)
	}
	var arena string
	var arenaFile *os.File
	kind := cfg.ArenaKind
	if cfg.Arena != "" {
		kind = ArenaNamed
	}
	switch kind {
	case ArenaMemfd:
		arenaFile, err = shm.CreateFD(cfg.NP, shm.Options{SlotBytes: cfg.SlotBytes, HeapBytes: cfg.HeapBytes})
		switch {
		case err == nil:
			arena = "fd:" + strconv.Itoa(ArenaFD)
			defer arenaFile.Close() // the ranks hold their copies
		case errors.Is(err, shm.ErrNotSupported):
		case errors.Is(err, shm.ErrBadSize):
			return nil, fmt.Errorf("%w: %w", ErrBadConfig, err)
		default:
			return nil, fmt.Errorf("launch: create the arena: %w", err)
		}
	case ArenaNamed:
	default:
		return nil, fmt.Errorf("%w: unknown arena kind %v", ErrBadConfig, kind)
	}
	if arena == "" {
		if arena = cfg.Arena; arena == "" {
			if arena, err = NewArenaName(); err != nil {
				return nil, err
			}
		} else if err := shm.ValidName(arena); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadConfig, err)
		}
	}
	j := &Job{
		np:      cfg.NP,
		arena:   arena,
		cmds:    make([]*exec.Cmd, cfg.NP),
		cpus:    cpus,
		grace:   cfg.KillGrace,
		results: make(chan rankResult, cfg.NP),
		done:    make(chan struct{}),
		exited:  make([]bool, cfg.NP),
	}
	if j.grace <= 0 {
		j.grace = DefaultKillGrace
	}
	stdout, stderr := cfg.Stdout, cfg.Stderr
	if stdout == nil {
		stdout = os.Stdout
	}
	if stderr == nil {
		stderr = os.Stderr
	}
	// A SHMCOLL_CPU inherited from an outer job would lie about an unbound
	// rank; the other SHMCOLL_* variables are overridden below.
	base := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, EnvCPU+"=") })
	base = append(base, cfg.Env...)
	for r := range cfg.NP {
		cmd := exec.Command(prog, cfg.Args...)
		cmd.Args[0] = cfg.Prog
		cmd.Dir = cfg.Dir
		env := append(slices.Clip(base),
			EnvRank+"="+strconv.Itoa(r),
			EnvSize+"="+strconv.Itoa(cfg.NP),
			EnvArena+"="+arena)
		if planned != nil {
			env = append(env, EnvCPU+"="+strconv.Itoa(planned[r]))
			if planTop.Fake {
				// SHMCOLL_CPU is a CPU of the fake topology: the rank must
				// see the same one to make sense of it.
				env = append(env, numa.EnvTopology+"="+planTop.Spec)
			}
		}
		cmd.Env = env
		if arenaFile != nil {
			cmd.ExtraFiles = []*os.File{arenaFile} // descriptor 3 == ArenaFD
		}
		var dstOut, dstErr io.Writer = lockedWriter{&j.outputMu, stdout}, lockedWriter{&j.outputMu, stderr}
		if !cfg.NoPrefix {
			dstOut, dstErr = newPrefixWriter(&j.outputMu, stdout, r), newPrefixWriter(&j.outputMu, stderr, r)
		}
		// Our own pipes, not exec's copying goroutines: cmd.Wait then returns
		// as soon as the rank is reaped, even if something it started still
		// holds its output, so failures are seen in the order ranks die.
		outR, outW, err := os.Pipe()
		if err != nil {
			j.abortStart(r)
			return nil, fmt.Errorf("launch: rank %d: %w", r, err)
		}
		errR, errW, err := os.Pipe()
		if err != nil {
			outR.Close()
			outW.Close()
			j.abortStart(r)
			return nil, fmt.Errorf("launch: rank %d: %w", r, err)
		}
		cmd.Stdout, cmd.Stderr = outW, errW
		cmd.SysProcAttr = sysProcAttr()
		err = startBound(cmd, cpus[r])
		outW.Close() // the rank holds the write ends now
		errW.Close()
		if err != nil {
			outR.Close()
			errR.Close()
			j.abortStart(r)
			return nil, fmt.Errorf("launch: start rank %d: %w", r, err)
		}
		j.cmds[r] = cmd
		j.drain(outR, dstOut)
		j.drain(errR, dstErr)
		go func() {
			j.results <- rankResult{rank: r, err: rankError(r, cmd, cmd.Wait())}
		}()
	}
	ctx, j.kill = context.WithCancelCause(ctx)
	go j.supervise(ctx, cfg.Timeout)
	return j, nil
}

// bindings returns each rank's host CPU set (nil entries: unbound), the
// plan's CPUs (nil when unbound) and the topology of the plan.
func bindings(cfg Config) ([][]int, []int, *numa.Topology, error) {
	cpus := make([][]int, cfg.NP)
	if cfg.Bind == BindNone {
		return cpus, nil, nil, nil
	}
	switch cfg.Bind {
	case BindCore, BindSocket, BindAuto:
	default:
		return nil, nil, nil, fmt.Errorf("%w: unknown binding %v", ErrBadConfig, cfg.Bind)
	}
	top := cfg.Topology
	if top == nil {
		var err error
		if top, err = numa.Default(); err != nil {
			return nil, nil, nil, fmt.Errorf("launch: topology: %w", err)
		}
	}
	if !top.Fake && canBind {
		// Plan only on the CPUs a cpuset lets us use.
		allowed, err := numa.AllowedCPUs()
		if err != nil {
			return nil, nil, nil, fmt.Errorf("launch: %w", err)
		}
		allowed = slices.DeleteFunc(allowed, func(c int) bool { return top.NodeOfCPU(c) < 0 })
		if len(allowed) < len(top.CPUs) {
			if top, err = top.Restrict(allowed); err != nil {
				return nil, nil, nil, fmt.Errorf("launch: %w", err)
			}
		}
	}
	policy := cfg.Map
	if policy == numa.None {
		policy = numa.Compact
	}
	plan, err := top.Plan(cfg.NP, policy)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("launch: %w", err)
	}
	var shares [][]int
	if cfg.Bind == BindAuto && cfg.NP <= top.Cores {
		shares = coreShares(top, cfg.NP, policy)
		for r, set := range shares {
			plan[r] = set[0]
		}
	}
	for r, cpu := range plan {
		set := []int{cpu}
		switch {
		case shares != nil:
			set = shares[r]
		case cfg.Bind == BindSocket:
			set = top.CPUsOfPackage(top.PackageOfCPU(cpu))
		}
		for _, c := range set {
			h, err := top.HostCPU(c)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("launch: rank %d: %w", r, err)
			}
			if !slices.Contains(cpus[r], h) {
				cpus[r] = append(cpus[r], h)
			}
		}
		slices.Sort(cpus[r])
	}
	return cpus, plan, top, nil
}

// coreShares divides the cores of top into np sets of consecutive cores
// (package-major order), the first C mod np of them one core larger, and
// returns each rank's set as the CPUs of its cores (the first thread of
// its first core first). Compact gives rank r set r; Spread deals the ranks
// across the packages of the sets' first cores in turn.
func coreShares(top *numa.Topology, np int, policy numa.Policy) [][]int {
	coreCPUs := make([][]int, top.Cores)
	for _, c := range top.CPUs {
		coreCPUs[c.Core] = append(coreCPUs[c.Core], c.ID)
	}
	for _, ids := range coreCPUs {
		slices.SortFunc(ids, func(a, b int) int {
			ca, _ := top.CPU(a)
			cb, _ := top.CPU(b)
			return ca.Thread - cb.Thread
		})
	}
	sets := make([][]int, np)
	first := 0
	for k := range sets {
		n := top.Cores / np
		if k < top.Cores%np {
			n++
		}
		for _, ids := range coreCPUs[first : first+n] {
			sets[k] = append(sets[k], ids...)
		}
		first += n
	}
	if policy != numa.Spread {
		return sets
	}
	// Queue the sets by package, then take one from each package in turn.
	byPkg := make([][][]int, top.Packages)
	for _, set := range sets {
		p := top.PackageOfCPU(set[0])
		byPkg[p] = append(byPkg[p], set)
	}
	dealt := make([][]int, 0, np)
	for len(dealt) < np {
		for p := range byPkg {
			if len(byPkg[p]) > 0 {
				dealt = append(dealt, byPkg[p][0])
				byPkg[p] = byPkg[p][1:]
			}
		}
	}
	return dealt
}

// NewArenaName returns a fresh arena name, shmcoll.<uid>.<nonce> (a 16-digit
// hexadecimal nonce), as shm.Join accepts it.
func NewArenaName() (string, error) {
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return "", fmt.Errorf("launch: arena name: %w", err)
	}
	return fmt.Sprintf("shmcoll.%d.%s", os.Getuid(), hex.EncodeToString(nonce[:])), nil
}

// rankError turns the result of cmd.Wait into a RankError (nil on success).
func rankError(rank int, cmd *exec.Cmd, err error) *RankError {
	if err == nil {
		return nil
	}
	e := &RankError{Rank: rank, PID: cmd.Process.Pid, Status: -1, Err: err}
	if st := cmd.ProcessState; st != nil {
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			e.Signal = ws.Signal()
		} else if st.Exited() {
			e.Status = st.ExitCode()
		}
	}
	return e
}

// abortStart kills and reaps the ranks before rank n after a failed start.
func (j *Job) abortStart(n int) {
	for r := range n {
		killGroup(j.cmds[r], syscall.SIGKILL)
	}
	for range n {
		<-j.results
	}
	j.awaitOutput()
	j.removeArena()
}

// supervise collects the ranks' results, kills the rest on the first
// failure, the timeout or the end of ctx, and finishes the job.
func (j *Job) supervise(ctx context.Context, timeout time.Duration) {
	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	var first error
	var hardKill <-chan time.Time
	stop := func(err error) {
		if first == nil {
			first = err
		}
		j.mu.Lock()
		already := j.killing
		j.killing = true
		j.mu.Unlock()
		if !already {
			j.signalAll(syscall.SIGTERM)
			hardKill = time.After(j.grace)
		}
	}
	ctxDone := ctx.Done()
	hardSent := false
	for left := j.np; left > 0; {
		select {
		case res := <-j.results:
			left--
			j.mu.Lock()
			j.exited[res.rank] = true
			killing, termFwd := j.killing, j.termFwd
			j.mu.Unlock()
			killGroup(j.cmds[res.rank], syscall.SIGKILL) // whatever the rank left behind
			if res.err != nil && !killing {
				stop(res.err)
			} else if res.err != nil && killedFromOutside(res.err, hardSent, termFwd) && exitedFirst(first) {
				// A rank killed by a signal the launcher did not send
				// caused the failure: its peers see it die at once and
				// may exit with an error of their own before it is reaped.
				first = res.err
			}
		case <-expired:
			expired = nil
			stop(fmt.Errorf("%w after %v", ErrTimeout, timeout))
		case <-ctxDone:
			ctxDone = nil
			stop(fmt.Errorf("launch: job stopped: %w", context.Cause(ctx)))
		case <-hardKill:
			hardKill = nil
			hardSent = true
			j.signalAll(syscall.SIGKILL)
		}
	}
	j.awaitOutput()
	j.removeArena()
	j.err = first
	close(j.done)
	j.kill(nil) // release the context
}

// killedFromOutside reports whether e is a rank killed by a signal the
// launcher did not send of its own accord: the launcher sends SIGTERM on a
// failure (unless a SIGTERM was forwarded to the ranks first, termFwd) and
// SIGKILL only after the grace period (hardSent).
func killedFromOutside(e *RankError, hardSent, termFwd bool) bool {
	return e.Signal != 0 && (e.Signal != syscall.SIGTERM || termFwd) && (e.Signal != syscall.SIGKILL || !hardSent)
}

// exitedFirst reports whether the job's first failure is a rank that
// exited with a status of its own.
func exitedFirst(first error) bool {
	e, ok := first.(*RankError)
	return ok && e.Signal == 0
}

// signalAll sends sig to the process group of every rank that has not exited.
func (j *Job) signalAll(sig syscall.Signal) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for r, cmd := range j.cmds {
		if !j.exited[r] {
			killGroup(cmd, sig)
		}
	}
}

// removeArena removes what is left of the job's arenas once every rank has
// exited: nothing, normally, since the last rank to join an arena unlinks
// it; but ranks that died before all of them joined leave the segment
// behind, the job's own named arena or one that ranks were creating
// themselves (a Split or Dup). shm.Cleanup removes the latter: it takes
// only segments whose creator and joined ranks are all dead, so other
// jobs' arenas are safe.
func (j *Job) removeArena() {
	if !strings.HasPrefix(j.arena, "fd:") {
		if path, err := shm.SegmentPath(j.arena); err == nil {
			_ = os.Remove(path) // absent is the normal case
		}
	}
	_, _ = shm.Cleanup() // best effort: an unreadable /dev/shm leaves nothing to clean
}

// Wait waits for the job to end. It returns nil if every rank exited with
// status 0; otherwise the error of the first failure: a *RankError naming
// the first rank that failed, or an error wrapping ErrTimeout, ErrKilled or
// the cause of the context's end. Wait may be called from several
// goroutines.
//
// "First" is the order in which the launcher reaps the ranks, with one
// exception: when a rank is killed by a signal the launcher did not send,
// its peers notice within microseconds (shm watches their pids) and may exit
// with an error of their own before it is reaped; the killed rank is then
// the one reported.
func (j *Job) Wait() error {
	<-j.done
	return j.err
}

// Done is closed when the job has ended.
func (j *Job) Done() <-chan struct{} { return j.done }

// Signal sends sig to every rank that is still running (to its process
// group). Ranks that die of it are failures like any other: the first one is
// what Wait reports, also where a rank that saw a peer die of it exited
// with a status of its own before that peer was reaped. This is how a
// launcher forwards SIGINT, SIGTERM and SIGHUP.
func (j *Job) Signal(sig syscall.Signal) {
	if sig == syscall.SIGTERM {
		j.mu.Lock()
		j.termFwd = true
		j.mu.Unlock()
	}
	j.signalAll(sig)
}

// ErrKilled is wrapped by the error of a job stopped by [Job.Kill].
var ErrKilled = errors.New("launch: job killed")

// Kill stops the job as a failure would: SIGTERM, then SIGKILL after the
// grace period. Wait then returns an error wrapping ErrKilled unless a rank
// had already failed.
func (j *Job) Kill() {
	j.kill(ErrKilled)
}

// PIDs returns the process ids of the ranks.
func (j *Job) PIDs() []int {
	pids := make([]int, j.np)
	for r, cmd := range j.cmds {
		pids[r] = cmd.Process.Pid
	}
	return pids
}

// CPUs returns the host CPUs each rank is bound to (nil for an unbound rank).
func (j *Job) CPUs() [][]int {
	out := make([][]int, len(j.cpus))
	for r, c := range j.cpus {
		out[r] = slices.Clone(c)
	}
	return out
}

// Arena returns the value of SHMCOLL_ARENA given to the ranks.
func (j *Job) Arena() string { return j.arena }
