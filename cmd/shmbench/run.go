package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shmcoll/shmcoll/collectives"
	"github.com/shmcoll/shmcoll/internal/benchfmt"
	"github.com/shmcoll/shmcoll/launch"
	"github.com/shmcoll/shmcoll/shm"
	"github.com/shmcoll/shmcoll/simd"
)

func init() {
	register(&command{
		name:    "run",
		summary: "time collectives on local processes (default: an allreduce sweep)",
		run:     runRun,
	})
	defaultCommand = "run"
}

// envStream tells a rank started by shmbench run itself to send its
// results to the launcher as JSON lines instead of formatting them.
const envStream = "SHMBENCH_STREAM"

const runUsage = `usage: shmbench run [flags]

Times collectives of shmcoll on -np local processes, which shmbench starts
itself; under shmrun, mpirun or srun (the variables shm.ReadEnv reads) each
process is one rank and -np is the launcher's.

One iteration is a barrier, then the collective; its time is the slowest
rank's. Per case: min, median, mean, max and p99 over the iterations, the
span (first rank's start to last rank's end, median), and algorithm and bus
bandwidth as nccl-tests define them (bytes: the full vector, docs/DESIGN.md).
Inputs change every iteration; every result is checked (all elements of
every iteration with -check) and a wrong one makes the exit status 1.

Flags:
`

// runConfig is a parsed and validated shmbench run command line.
type runConfig struct {
	np, npSet int // npSet: -np given explicitly
	colls     []string
	algos     map[string][]string // algorithms per collective
	dtype     simd.Type
	op        simd.Op
	sizes     []int64
	tm        timing
	format    string
	plotDir   string
	root      int // of the rooted collectives: below every p the sweep runs on
	bind      launch.Bind
	timeout   time.Duration
}

// usageError is a bad command line: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func badUsage(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

func defaultNP() int { return max(2, min(runtime.NumCPU(), 8)) }

// parseRun parses and checks a command line; flag errors and usage go to
// stderr, notes about what was left out to notes.
func parseRun(args []string, stderr, notes io.Writer) (*runConfig, error) {
	fs := newFlagSet("run", runUsage, stderr)
	np := fs.Int("np", defaultNP(), "ranks to start (local processes; default min(CPUs, 8), at least 2)")
	coll := fs.String("coll", "allreduce", "collectives, comma-separated, or all: "+strings.Join(benchColls, ", "))
	algo := fs.String("algo", "auto", "algorithms: names (comma-separated), auto (the selection table) or all")
	dtype := fs.String("dtype", "float64", "element type: int8..uint64, float32, float64, bfloat16, float16, complex64, complex128")
	op := fs.String("op", "sum", "reduction operator: sum, prod, min, max, band, bor, bxor, land, lor")
	root := fs.Int("root", 0, "root rank of bcast, reduce, scatter and gather")
	sizes := fs.String("sizes", "8:64M:8", "sizes in bytes: lists and ranges lo:hi[:factor] (factor 2 if left out), e.g. 8:256M or 8,1K,64K")
	iters := fs.Int("iters", 0, "timed iterations per size (0: run for -time)")
	tsize := fs.Duration("time", 200*time.Millisecond, "timed duration per size when -iters is 0")
	warm := fs.Duration("warmup", 20*time.Millisecond, "warm-up per size: doubling batches until one lasts this long")
	maxIters := fs.Int("maxiters", 200000, "at most this many timed iterations per size")
	check := fs.Bool("check", false, "check every element of every iteration's result (without it: the changed elements of every iteration, and all of the last)")
	format := fs.String("format", "table", "output: table, csv or json (one object per line)")
	plotDir := fs.String("plot", "", "write latency and bandwidth charts (PNG and SVG) into this directory")
	bind := fs.String("bind", "core", "binding of the ranks shmbench starts: core, socket, none or auto")
	timeout := fs.Duration("timeout", 30*time.Minute, "stop the ranks after this long")
	arena := fs.Bool("arena", false, "buffers from collectives.Alloc in the arena, which the direct algorithm reads in place from 1 MiB up (allgather 4 MiB; implies -dirty)")
	dirty := fs.Bool("dirty", false, "rewrite each rank's whole input before every iteration, outside the timing, as a program that produces it would")
	timedRewrite := fs.Bool("timed-rewrite", false, "with -dirty or -arena: rewrite the input inside the timing, after the barrier (what the next write of a buffer the peers read costs)")
	al := fs.addAliases(aliasSizes | aliasIters | aliasWarm | aliasCheck | aliasDtype | aliasOp | aliasRoot)
	if err := fs.parse(args); err != nil {
		return nil, err
	}
	var warmByCount bool
	var warmIters int
	if err := al.resolve(native{sizes: sizes, iters: iters, warmup: &warmByCount, warmIters: &warmIters,
		check: check, dtype: dtype, op: op, root: root}); err != nil {
		return nil, err
	}
	c := &runConfig{np: *np, format: *format, plotDir: *plotDir, timeout: *timeout, root: *root,
		tm: timing{iters: *iters, target: *tsize, warmup: *warm, warmByCount: warmByCount, warmIters: warmIters,
			maxIters: *maxIters, full: *check, arena: *arena, dirty: *dirty || *arena, timedRewrite: *timedRewrite}}
	if fs.setFlags()["np"] {
		c.npSet = *np
	}
	var err error
	switch {
	case c.np < 1 || c.np > launch.MaxRanks:
		return nil, badUsage("-np %d: need 1 to %d ranks", c.np, launch.MaxRanks)
	case c.root < 0 || c.root >= launch.MaxRanks:
		return nil, badUsage("-root %d: must be a rank", c.root)
	case c.tm.iters < 0:
		return nil, badUsage("-iters %d: must be >= 0", c.tm.iters)
	case c.tm.target <= 0 && c.tm.iters == 0:
		return nil, badUsage("-time %v: must be positive (or give -iters)", c.tm.target)
	case c.tm.warmup < 0:
		return nil, badUsage("-warmup %v: must be >= 0", c.tm.warmup)
	case c.tm.maxIters < 1:
		return nil, badUsage("-maxiters %d: must be >= 1", c.tm.maxIters)
	case c.timeout <= 0:
		return nil, badUsage("-timeout %v: must be positive", c.timeout)
	case c.tm.timedRewrite && !c.tm.dirty:
		return nil, badUsage("-timed-rewrite needs -dirty or -arena")
	case !slices.Contains(benchfmt.Formats, c.format):
		return nil, badUsage("-format %q: want %s", c.format, strings.Join(benchfmt.Formats, ", "))
	}
	if c.tm.iters > 0 {
		c.tm.maxIters = c.tm.iters
	}
	if c.bind, err = launch.ParseBind(*bind); err != nil {
		return nil, badUsage("-bind: %v", err)
	}
	if c.dtype, err = simd.ParseType(typeName(*dtype)); err != nil {
		return nil, badUsage("-dtype: %v", err)
	}
	if c.op, err = simd.ParseOp(*op); err != nil {
		return nil, badUsage("-op: %v", err)
	}
	if _, err := newValues(c.dtype, c.op, c.np); err != nil {
		return nil, badUsage("-dtype %s -op %s: %v", c.dtype, c.op, err)
	}
	if c.sizes, err = benchfmt.ParseSizes(*sizes); err != nil {
		return nil, badUsage("-sizes: %v", err)
	}
	if c.colls, err = parseColls(*coll); err != nil {
		return nil, err
	}
	if c.algos, err = parseAlgos(*algo, c.colls, c.tm.arena, notes); err != nil {
		return nil, err
	}
	return c, nil
}

func parseColls(s string) ([]string, error) {
	if s == "all" {
		return benchColls, nil
	}
	var out []string
	for _, c := range strings.Split(s, ",") {
		if !slices.Contains(benchColls, c) {
			return nil, badUsage("-coll: unknown collective %q (known: %s, or all)", c, strings.Join(benchColls, ", "))
		}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// allAlgorithms lists the concrete algorithms the library names.
func allAlgorithms() []collectives.Algorithm {
	var out []collectives.Algorithm
	for a := collectives.Auto + 1; ; a++ {
		if strings.HasPrefix(a.String(), "Algorithm(") {
			return out
		}
		out = append(out, a)
	}
}

// parseAlgos resolves -algo for each collective. auto is the selection
// table; all is every algorithm that implements the collective; named
// algorithms that do not implement a collective are left out of it with a
// note.
func parseAlgos(s string, colls []string, arena bool, stderr io.Writer) (map[string][]string, error) {
	var named []collectives.Algorithm
	auto := false
	for _, name := range strings.Split(s, ",") {
		switch name {
		case "auto":
			auto = true
		case "all":
			for _, a := range allAlgorithms() {
				if a != collectives.Direct || arena {
					named = append(named, a)
				}
			}
		default:
			a, err := collectives.ParseAlgorithm(name)
			if err != nil {
				var names []string
				for _, a := range allAlgorithms() {
					names = append(names, a.String())
				}
				return nil, badUsage("-algo: unknown algorithm %q (known: %s, auto or all)", name, strings.Join(names, ", "))
			}
			if a == collectives.Direct && !arena {
				return nil, badUsage("-algo direct reads the ranks' buffers in the arena: it needs -arena")
			}
			named = append(named, a)
		}
	}
	out := map[string][]string{}
	empty := true
	for _, coll := range colls {
		var list []string
		if auto {
			list = append(list, "auto")
		}
		for _, a := range named {
			if slices.Contains(list, a.String()) {
				continue
			}
			ok, err := implements(coll, a)
			if err != nil {
				return nil, err
			}
			if ok {
				list = append(list, a.String())
			} else if s != "all" {
				fmt.Fprintf(stderr, "shmbench: note: algorithm %s does not implement %s; left out\n", a, coll)
			}
		}
		out[coll] = list
		empty = empty && len(list) == 0
	}
	if empty {
		return nil, badUsage("-algo %s: no algorithm implements the collectives asked for", s)
	}
	return out, nil
}

// implements reports whether algorithm a implements coll.
func implements(coll string, a collectives.Algorithm) (bool, error) {
	cl, err := collectives.ParseCollective(coll)
	if err != nil {
		return false, err
	}
	return collectives.Implements(cl, a), nil
}

// runRun is shmbench run.
func runRun(args []string, stdout, stderr io.Writer) int {
	env, envErr := shm.ReadEnv()
	// Notes about the command line come from the process that reports:
	// the launcher, or rank 0 of someone else's launcher.
	notes := stderr
	if envErr == nil && (env.Rank != 0 || os.Getenv(envStream) == "1") {
		notes = io.Discard
	}
	cfg, err := parseRun(args, stderr, notes)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "shmbench run: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	p := cfg.np
	if envErr == nil {
		p = env.Size
	}
	if err := cfg.checkRoot(p); err != nil {
		fmt.Fprintf(stderr, "shmbench run: %v\n", err)
		return 2
	}
	if envErr == nil {
		return runRank(ctx, cfg, env, stdout, stderr)
	}
	return runLauncher(ctx, cfg, args, stdout, stderr)
}

// cases is the sweep of cfg on p ranks.
func (cfg *runConfig) cases(p int) []caseSpec {
	cs := sweep(cfg.colls, func(coll string) []string { return cfg.algos[coll] }, cfg.sizes, cfg.dtype.Size(), p)
	for i := range cs {
		cs[i].lay.root = cfg.root
	}
	return cs
}

// checkRoot refuses a -root that is not a rank of p.
func (cfg *runConfig) checkRoot(p int) error {
	if cfg.root >= p {
		return badUsage("-root %d: not a rank of %d", cfg.root, p)
	}
	return nil
}

// runLauncher starts cfg.np ranks of this program and formats what rank 0
// streams back.
func runLauncher(ctx context.Context, cfg *runConfig, args []string, stdout, stderr io.Writer) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "shmbench run: cannot re-execute myself: %v\n", err)
		return 1
	}
	cases := cfg.cases(cfg.np)
	h := hostHeader("shmbench", cfg.np, cfg.dtype.String(), cfg.op.String())
	s, err := newSink(cfg.format, stdout, stderr, len(cases))
	if err != nil {
		fmt.Fprintf(stderr, "shmbench run: %v\n", err)
		return 2
	}
	s.header(h)
	err = launchSweep(ctx, cfg, exe, args, s, stderr)
	return finishRun(cfg, s, stdout, stderr, err)
}

// launchSweep starts cfg.np ranks of exe running shmbench run with args and
// feeds the results rank 0 streams back to s.
func launchSweep(ctx context.Context, cfg *runConfig, exe string, args []string, s *sink, stderr io.Writer) error {
	stream := &streamReader{sink: s, stderr: stderr}
	heap := 0
	if cfg.tm.arena {
		heap = heapFor(cfg.cases(cfg.np), cfg.dtype.Size(), cfg.np)
	}
	job, err := launch.Start(ctx, launch.Config{
		NP: cfg.np, Prog: exe, Args: append([]string{"run"}, args...), HeapBytes: heap,
		Env: []string{envStream + "=1"}, Bind: cfg.bind,
		Stdout: stream, Stderr: stderr, Timeout: cfg.timeout,
	})
	if err != nil {
		return err
	}
	jobErr := job.Wait()
	stream.flush()
	return errors.Join(jobErr, stream.err)
}

// finishRun writes the summary and plots and decides the exit status.
func finishRun(cfg *runConfig, s *sink, stdout, stderr io.Writer, errs ...error) int {
	code := 0
	s.finish()
	for _, err := range errs {
		if err != nil {
			fmt.Fprintf(stderr, "shmbench run: %v\n", err)
			code = 1
		}
	}
	if cfg.format == "table" {
		s.summary(stdout)
	} else {
		s.summary(stderr)
	}
	if cfg.plotDir != "" && len(s.results) > 0 {
		files, err := plotResults(cfg.plotDir, s.results)
		switch {
		case errors.Is(err, errNothingToChart):
			fmt.Fprintf(stderr, "shmbench run: note: %v\n", err)
		case err != nil:
			fmt.Fprintf(stderr, "shmbench run: plot: %v\n", err)
			code = 1
		default:
			fmt.Fprintf(stderr, "shmbench run: wrote %s\n", strings.Join(files, ", "))
		}
	}
	if len(s.failed) > 0 {
		for _, r := range s.failed {
			fmt.Fprintf(stderr, "shmbench run: CHECK FAILED: %s/%s at %d B: %s\n", r.Coll, r.Algo, r.Bytes, r.Check)
		}
		code = 1
	}
	return code
}

// streamReader takes the ranks' standard output: rank 0's JSON result
// lines go to the sink, anything else to stderr as it came.
type streamReader struct {
	mu     sync.Mutex
	buf    []byte
	sink   *sink
	stderr io.Writer
	err    error
}

func (r *streamReader) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = append(r.buf, p...)
	for {
		i := bytes.IndexByte(r.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		r.line(r.buf[:i])
		r.buf = r.buf[i+1:]
	}
}

func (r *streamReader) flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.buf) > 0 {
		r.line(r.buf)
		r.buf = nil
	}
}

func (r *streamReader) line(l []byte) {
	if rest, ok := bytes.CutPrefix(l, []byte("[0] ")); ok && bytes.HasPrefix(rest, []byte(`{"type":"result"`)) {
		var res benchfmt.Result
		if err := json.Unmarshal(rest, &res); err != nil {
			r.fail(fmt.Errorf("bad result line from rank 0: %v: %s", err, rest))
			return
		}
		if err := r.sink.result(res); err != nil {
			r.fail(err)
		}
		return
	}
	fmt.Fprintf(r.stderr, "%s\n", l)
}

func (r *streamReader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// runRank is one rank of a sweep: under shmbench run's own launcher, under
// shmrun or under mpirun.
func runRank(ctx context.Context, cfg *runConfig, env shm.EnvJoin, stdout, stderr io.Writer) int {
	streaming := os.Getenv(envStream) == "1"
	if cfg.npSet != 0 && cfg.npSet != env.Size {
		fmt.Fprintf(stderr, "shmbench run: note: -np %d ignored; the %s launcher started %d ranks\n", cfg.npSet, env.Source, env.Size)
	}
	if _, err := newValues(cfg.dtype, cfg.op, env.Size); err != nil {
		fmt.Fprintf(stderr, "shmbench run: %v\n", err)
		return 2
	}
	var s *sink
	var h benchfmt.Header
	if env.Rank == 0 && !streaming {
		// Probe before joining: the other ranks wait in the rendezvous
		// rather than spinning in a barrier.
		launcher := env.Source
		if launcher == "shmcoll" {
			launcher = "shmrun"
		}
		h = hostHeader(launcher, env.Size, cfg.dtype.String(), cfg.op.String())
	}
	var opt collectives.Options
	if cfg.tm.arena {
		opt.HeapBytes = heapFor(cfg.cases(env.Size), cfg.dtype.Size(), env.Size)
	}
	helper, err := collectives.JoinEnv(ctx, opt)
	if err != nil {
		fmt.Fprintf(stderr, "shmbench run: rank %d: %v\n", env.Rank, err)
		return 1
	}
	defer helper.Close()
	p := helper.Size()
	cases := cfg.cases(p)
	if helper.Rank() == 0 {
		if streaming {
			s = &sink{w: streamWriter{stdout}}
		} else if s, err = newSink(cfg.format, stdout, stderr, len(cases)); err != nil {
			fmt.Fprintf(stderr, "shmbench run: %v\n", err)
			return 2
		} else {
			s.header(h)
		}
	}
	b, err := newBench(helper, cfg.dtype, cfg.op, cfg.tm)
	if err != nil {
		fmt.Fprintf(stderr, "shmbench run: %v\n", err)
		return 2
	}
	comms := map[string]*collectives.Comm{}
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	var runErr error
	for _, cs := range cases {
		c := helper
		if cs.algo != "auto" {
			key := cs.coll + "/" + cs.algo
			if c = comms[key]; c == nil {
				if c, runErr = pinnedComm(ctx, helper, cs.coll, cs.algo); runErr != nil {
					break
				}
				comms[key] = c
			}
		}
		var res benchfmt.Result
		if res, runErr = b.run(ctx, c, cs); runErr != nil {
			runErr = fmt.Errorf("%v: %w", cs, runErr)
			break
		}
		if s != nil {
			if err := s.result(res); err != nil {
				runErr = err
				break
			}
		}
	}
	if runErr != nil {
		fmt.Fprintf(stderr, "shmbench run: rank %d: %v\n", helper.Rank(), runErr)
		helper.Abort(runErr)
		return 1
	}
	if s == nil {
		return 0 // only rank 0 reports; a failed check is its exit status
	}
	if streaming {
		if len(s.failed) > 0 {
			return 1
		}
		return 0
	}
	return finishRun(cfg, s, stdout, stderr)
}

// heapFor is the heap that -arena needs: the send and receive buffers of
// the largest case of any rank, and a line of alignment each.
func heapFor(cases []caseSpec, esz, p int) int {
	n := 0
	for _, cs := range cases {
		for r := range p {
			n = max(n, (cs.lay.sendLen(r)+cs.lay.recvLen(r))*esz)
		}
	}
	return n + 2*64
}

// arenaPrefix starts the nonce of the arenas shmbench names itself, so that
// one left in /dev/shm says where it came from.
const arenaPrefix = "shmbench-"

// pinnedComm joins a new communicator of the same ranks with algorithm
// pinned for coll: rank 0 names the arena and broadcasts the name.
func pinnedComm(ctx context.Context, helper *collectives.Comm, coll, algo string) (*collectives.Comm, error) {
	cl, err := collectives.ParseCollective(coll)
	if err != nil {
		return nil, err
	}
	a, err := collectives.ParseAlgorithm(algo)
	if err != nil {
		return nil, err
	}
	return joinPinned(ctx, helper, map[collectives.Collective]collectives.Algorithm{cl: a})
}

// streamWriter sends results to the launcher as JSON lines.
type streamWriter struct{ w io.Writer }

func (s streamWriter) Header(benchfmt.Header) error { return nil }

func (s streamWriter) Result(r benchfmt.Result) error {
	r.Type = "result"
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(s.w, "%s\n", b)
	return err
}

func (s streamWriter) Flush() error {
	if f, ok := s.w.(interface{ Sync() error }); ok {
		f.Sync()
	}
	return nil
}
