package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shmcoll/shmcoll/collectives"
	"github.com/shmcoll/shmcoll/internal/benchfmt"
	"github.com/shmcoll/shmcoll/launch"
	"github.com/shmcoll/shmcoll/numa"
	"github.com/shmcoll/shmcoll/shm"
	"github.com/shmcoll/shmcoll/simd"
)

func init() {
	register(&command{
		name:    "tune",
		summary: "measure every algorithm of each collective over sizes and write the selection table",
		run:     runTune,
	})
}

const tuneUsage = `usage: shmbench tune [flags]

Measures every algorithm that implements each collective on -np local
processes (a list runs one job per p, one after another), over -sizes, and
writes the selection table that auto uses (collectives.Table; -o merges
with the entries the file has for other p) and a markdown report of the
medians (stdout, or -report).

Method (docs/TUNING.md): each round measures every (collective, size,
algorithm) once, the algorithms of a size back to back and in an order
that rotates with the round; a case is the shmbench run timing (barrier,
then the collective; the slowest rank's time; median over the iterations
of at least -time). An algorithm's time at a size is the median over the
rounds. The fastest at each measured size (or the heuristic's choice,
while within -margin of it, else the choice of the size below, while
within -tolerance of it) holds from the geometric middle
between it and the size below to that between it and the size above; the
table also records the fastest order-preserving algorithm, which auto
takes for a non-commutative operator.

Flags:
`

// tuneConfig is a parsed shmbench tune command line.
type tuneConfig struct {
	nps         []int
	colls       []string
	dtype       simd.Type
	op          simd.Op
	sizes       []int64
	sizesFlag   string
	rounds      int
	tm          timing
	prune       float64
	tolerance   float64
	margin      float64
	out, report string
	overrides   *collectives.Table // merged over the measured table; nil: none
	bind        launch.Bind
	timeout     time.Duration
}

func parseTune(args []string, stderr io.Writer) (*tuneConfig, error) {
	fs := newFlagSet("tune", tuneUsage, stderr)
	np := fs.String("np", "2,3,4,8", "ranks: one or more counts, comma-separated, measured one after another")
	coll := fs.String("coll", "all", "collectives, comma-separated, or all (those with more than one algorithm)")
	dtype := fs.String("dtype", "float64", "element type: int8..uint64, float32, float64, bfloat16, float16, complex64, complex128")
	op := fs.String("op", "sum", "reduction operator: sum, prod, min, max, band, bor, bxor, land, lor")
	sizes := fs.String("sizes", "8:64M:8,64M", "sizes in bytes: lists and ranges lo:hi[:factor] (factor 2 if left out)")
	rounds := fs.Int("rounds", 3, "rounds: each measures every case once; the median over rounds counts")
	tsize := fs.Duration("time", 10*time.Millisecond, "timed duration per case and round (at least 3 iterations)")
	prune := fs.Float64("prune", 4, "above 256 KiB, skip for the rest of a round an algorithm this many times slower than the best at the size below (0: never)")
	tolerance := fs.Float64("tolerance", 0.03, "keep the choice of the size below while it is at most this fraction slower than the fastest")
	margin := fs.Float64("margin", 0.10, "keep the heuristic's choice (the fallback's) while it is at most this fraction slower than the fastest")
	out := fs.String("o", "", "write the selection table to this file, keeping its entries for other p (default: stdout)")
	report := fs.String("report", "", "write the markdown report to this file (default: stdout)")
	bind := fs.String("bind", "core", "binding of the ranks: core, socket, none or auto")
	timeout := fs.Duration("timeout", 2*time.Hour, "stop the ranks of one p after this long")
	overrides := fs.String("overrides", "builtin", "hand-made entries merged over the measured table before it is written: builtin (collectives/tune/overrides.txt), none, or a table file")
	al := fs.addAliases(aliasSizes | aliasDtype) // -o is the output file here
	if err := fs.parse(args); err != nil {
		return nil, err
	}
	if err := al.resolve(native{sizes: sizes, dtype: dtype}); err != nil {
		return nil, err
	}
	c := &tuneConfig{rounds: *rounds, prune: *prune, tolerance: *tolerance, margin: *margin, out: *out, report: *report, timeout: *timeout, sizesFlag: *sizes,
		tm: timing{target: *tsize, warmup: *tsize / 4, maxIters: 20000, minIters: 3, light: true}}
	for _, s := range strings.Split(*np, ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 2 || n > launch.MaxRanks {
			return nil, badUsage("-np %q: want counts from 2 to %d", s, launch.MaxRanks)
		}
		if !slices.Contains(c.nps, n) {
			c.nps = append(c.nps, n)
		}
	}
	var err error
	switch {
	case c.rounds < 1:
		return nil, badUsage("-rounds %d: must be >= 1", c.rounds)
	case c.tm.target <= 0:
		return nil, badUsage("-time %v: must be positive", c.tm.target)
	case c.prune != 0 && c.prune < 1:
		return nil, badUsage("-prune %v: 0 or at least 1", c.prune)
	case c.tolerance < 0 || c.tolerance >= 1:
		return nil, badUsage("-tolerance %v: want 0 <= t < 1", c.tolerance)
	case c.margin < 0 || c.margin >= 1:
		return nil, badUsage("-margin %v: want 0 <= m < 1", c.margin)
	case c.timeout <= 0:
		return nil, badUsage("-timeout %v: must be positive", c.timeout)
	}
	switch *overrides {
	case "none":
	case "builtin":
		if c.overrides, err = collectives.DefaultOverrides(); err != nil {
			return nil, err
		}
	default:
		if c.overrides, err = collectives.LoadTable(*overrides); err != nil {
			return nil, badUsage("-overrides: %v", err)
		}
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
	for _, n := range c.nps {
		if _, err := newValues(c.dtype, c.op, n); err != nil {
			return nil, badUsage("-dtype %s -op %s: %v", c.dtype, c.op, err)
		}
	}
	if c.sizes, err = benchfmt.ParseSizes(*sizes); err != nil {
		return nil, badUsage("-sizes: %v", err)
	}
	slices.Sort(c.sizes)
	if *coll == "all" {
		for _, name := range benchColls {
			if len(tuneAlgorithms(name)) > 1 {
				c.colls = append(c.colls, name)
			}
		}
	} else if c.colls, err = parseColls(*coll); err != nil {
		return nil, err
	}
	return c, nil
}

// tuneAlgorithms lists the algorithms that implement coll and that the
// selection table can choose: not Direct, which serves buffers from Alloc
// whatever the table says, nor Single, which serves private buffers where
// cross-memory attach is on before the table is asked (the table holds
// what serves them where it is off).
func tuneAlgorithms(coll string) []collectives.Algorithm {
	cl, err := collectives.ParseCollective(coll)
	if err != nil {
		return nil
	}
	var out []collectives.Algorithm
	for _, a := range allAlgorithms() {
		if collectives.Implements(cl, a) && a != collectives.Direct && a != collectives.Single {
			out = append(out, a)
		}
	}
	return out
}

func runTune(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseTune(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "shmbench tune: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if env, err := shm.ReadEnv(); err == nil {
		return tuneRank(ctx, cfg, env, stdout, stderr)
	}
	return tuneLauncher(ctx, cfg, args, stdout, stderr)
}

// tuneLine is what rank 0 streams besides results.
type tuneLine struct {
	Type  string `json:"type"` // "tune"
	Over  bool   `json:"over"` // the ranks are oversubscribed
	Round int    `json:"round"`
}

// tuneRank is one rank of a tuning job: every round measures every case.
func tuneRank(ctx context.Context, cfg *tuneConfig, env shm.EnvJoin, stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "shmbench tune: rank %d: %v\n", env.Rank, err)
		return 1
	}
	helper, err := collectives.JoinEnv(ctx, collectives.Options{})
	if err != nil {
		return fail(err)
	}
	defer helper.Close()
	p := helper.Size()
	emit := func(v any) {
		if helper.Rank() == 0 {
			b, _ := json.Marshal(v)
			fmt.Fprintf(stdout, "%s\n", b)
		}
	}
	// One communicator per algorithm, pinned for every collective it
	// implements but the barrier, which every case runs before each
	// iteration and which is the same (auto's) for all of them; the
	// barrier's own cases have communicators of their own.
	comms := map[string]*collectives.Comm{}
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	algs := map[string][]collectives.Algorithm{}
	for _, coll := range cfg.colls {
		algs[coll] = tuneAlgorithms(coll)
		for _, a := range algs[coll] {
			key := commKey(coll, a)
			if comms[key] != nil {
				continue
			}
			pins := map[collectives.Collective]collectives.Algorithm{}
			for cl := range collectives.Collective(len(benchColls)) {
				if collectives.Implements(cl, a) && (cl != collectives.CollBarrier) == (coll != "barrier") {
					pins[cl] = a
				}
			}
			if comms[key], err = joinPinned(ctx, helper, pins); err != nil {
				helper.Abort(err)
				return fail(err)
			}
		}
	}
	b, err := newBench(helper, cfg.dtype, cfg.op, cfg.tm)
	if err != nil {
		return fail(err)
	}
	emit(tuneLine{Type: "tune", Over: helper.Oversubscribed()})
	s := &sink{w: streamWriter{stdout}}
	for round := range cfg.rounds {
		for _, coll := range cfg.colls {
			if err := tuneColl(ctx, b, s, comms, coll, algs[coll], round, cfg, p); err != nil {
				helper.Abort(err)
				return fail(err)
			}
		}
		emit(tuneLine{Type: "tune", Over: helper.Oversubscribed(), Round: round + 1})
	}
	return 0
}

// tuneColl measures the algorithms of coll over the sizes, once: in an
// order that rotates with the round; above 256 KiB an algorithm that
// was -prune times slower than the best at the size below is skipped.
// Rank 0 decides what to skip and tells the others.
func tuneColl(ctx context.Context, b *bench, s *sink, comms map[string]*collectives.Comm,
	coll string, algs []collectives.Algorithm, round int, cfg *tuneConfig, p int) error {
	n := len(algs)
	order := make([]collectives.Algorithm, n)
	for i := range n {
		order[i] = algs[(i+round)%n]
	}
	skip := make([]uint8, n) // by index in order
	last := int64(-1)
	for _, size := range cfg.sizes {
		lay := newLayout(coll, size, cfg.dtype.Size(), p)
		if got := lay.bytes(cfg.dtype.Size()); got == last {
			continue
		} else {
			last = got
		}
		med := make([]float64, n)
		for i, a := range order {
			if skip[i] != 0 {
				continue
			}
			cs := caseSpec{coll: coll, algo: a.String(), bytes: size, lay: lay}
			res, err := b.run(ctx, comms[commKey(coll, a)], cs)
			if err != nil {
				return fmt.Errorf("%v: %w", cs, err)
			}
			med[i] = res.MedianUS
			if b.rank == 0 {
				if err := s.result(res); err != nil {
					return err
				}
			}
		}
		if coll == "barrier" {
			break
		}
		if cfg.prune > 0 && last > 256<<10 {
			if b.rank == 0 {
				best := math.Inf(1)
				for i, m := range med {
					if skip[i] == 0 {
						best = min(best, m)
					}
				}
				for i, m := range med {
					if skip[i] == 0 && m > cfg.prune*best {
						skip[i] = 1
					}
				}
			}
			if err := collectives.Bcast(ctx, b.helper, skip, 0); err != nil {
				return err
			}
		}
	}
	return nil
}

// commKey names the communicator that measures a for coll.
func commKey(coll string, a collectives.Algorithm) string {
	if coll == "barrier" {
		return "barrier/" + a.String()
	}
	return a.String()
}

// joinPinned joins a new communicator of the helper's ranks with pins:
// rank 0 names the arena and broadcasts the name.
func joinPinned(ctx context.Context, helper *collectives.Comm, pins map[collectives.Collective]collectives.Algorithm) (*collectives.Comm, error) {
	name := make([]uint8, 128)
	if helper.Rank() == 0 {
		copy(name, arenaPrefix+shm.NewName())
	}
	if err := collectives.Bcast(ctx, helper, name, 0); err != nil {
		return nil, err
	}
	opt := collectives.Options{Algorithms: pins, HeapBytes: helper.HeapBytes()}
	return collectives.Join(ctx, string(name[:clen(name)]), helper.Rank(), helper.Size(), opt)
}

// tuneJob is what one p's job brought back.
type tuneJob struct {
	np      int
	over    bool
	results []benchfmt.Result
	// probes: the placement probe (one-way cache-line handoff between
	// the first two CPUs, ns; 0: not measured) before and after the job.
	// The best algorithm can depend on it: vCPUs that share an L3 or not.
	probes [2]float64
}

// tuneLauncher runs one job per p, then writes the table and the report.
func tuneLauncher(ctx context.Context, cfg *tuneConfig, args []string, stdout, stderr io.Writer) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "shmbench tune: cannot re-execute myself: %v\n", err)
		return 1
	}
	h := hostHeader("shmbench", cfg.nps[0], cfg.dtype.String(), cfg.op.String())
	start := time.Now()
	var jobs []tuneJob
	code := 0
	topo, _ := numa.Detect()
	for _, np := range cfg.nps {
		before, _ := placementNS(topo)
		job, err := tuneLaunch(ctx, cfg, exe, args, np, stderr, start)
		if err != nil {
			fmt.Fprintf(stderr, "shmbench tune: np=%d: %v\n", np, err)
			return 1
		}
		job.probes[0] = before
		job.probes[1], _ = placementNS(topo)
		for _, r := range job.results {
			if r.Check != "ok" {
				fmt.Fprintf(stderr, "shmbench tune: CHECK FAILED: np=%d %s/%s at %d B: %s (left out of the table)\n", np, r.Coll, r.Algo, r.Bytes, r.Check)
				code = 1
			}
		}
		jobs = append(jobs, job)
	}
	fmt.Fprintf(stderr, "shmbench tune: measured in %v\n", time.Since(start).Round(time.Second))
	tab := &collectives.Table{Header: append(tuneHeader(cfg, h, args, time.Since(start)), probeLine(jobs))}
	var rep bytes.Buffer
	writeReportHead(&rep, tab.Header)
	for _, job := range jobs {
		es := tuneEntries(cfg, job, &rep)
		tab.Entries = append(tab.Entries, es...)
	}
	if err := tab.Check(); err != nil {
		fmt.Fprintf(stderr, "shmbench tune: %v\n", err)
		return 1
	}
	writeOverrides(&rep, tab)
	if cfg.overrides != nil {
		tab = tab.Override(cfg.overrides)
	}
	if cfg.out != "" {
		if old, err := collectives.LoadTable(cfg.out); err == nil {
			merged := old.Merge(tab)
			if kept := keptPs(old, tab); kept != "" {
				merged.Header = append(merged.Header, fmt.Sprintf("kept from the previous %s: p=%s (made: %s)", cfg.out, kept, madeLine(old)))
			}
			tab = merged
		} else if !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(stderr, "shmbench tune: %v (not merged)\n", err)
		}
	}
	text, _ := tab.MarshalText()
	if cfg.out != "" {
		if err := os.WriteFile(cfg.out, text, 0o644); err != nil {
			fmt.Fprintf(stderr, "shmbench tune: %v\n", err)
			return 1
		}
		fmt.Fprintf(stderr, "shmbench tune: wrote %s\n", cfg.out)
	}
	if cfg.report != "" {
		if err := os.WriteFile(cfg.report, rep.Bytes(), 0o644); err != nil {
			fmt.Fprintf(stderr, "shmbench tune: %v\n", err)
			return 1
		}
		fmt.Fprintf(stderr, "shmbench tune: wrote %s\n", cfg.report)
	} else {
		stdout.Write(rep.Bytes())
	}
	if cfg.out == "" {
		if cfg.report == "" {
			fmt.Fprintln(stdout)
		}
		stdout.Write(text)
	}
	return code
}

// tuneLaunch runs the job of np ranks.
func tuneLaunch(ctx context.Context, cfg *tuneConfig, exe string, args []string, np int, stderr io.Writer, start time.Time) (tuneJob, error) {
	job := tuneJob{np: np}
	s := &sink{w: discardWriter{}}
	st := &tuneStream{streamReader: streamReader{sink: s, stderr: stderr}, np: np, rounds: cfg.rounds, start: start, job: &job}
	j, err := launch.Start(ctx, launch.Config{
		NP: np, Prog: exe, Args: append([]string{"tune"}, args...),
		Env: []string{envStream + "=1"}, Bind: cfg.bind,
		Stdout: st, Stderr: stderr, Timeout: cfg.timeout,
	})
	if err != nil {
		return job, err
	}
	jobErr := j.Wait()
	st.flush()
	job.results = s.results
	return job, errors.Join(jobErr, st.err)
}

// tuneStream reads rank 0's lines: results, and the job's tune lines.
type tuneStream struct {
	streamReader
	np, rounds int
	start      time.Time
	job        *tuneJob
	tmu        sync.Mutex
	tbuf       []byte
}

func (t *tuneStream) Write(p []byte) (int, error) {
	t.tmu.Lock()
	defer t.tmu.Unlock()
	t.tbuf = append(t.tbuf, p...)
	for {
		i := bytes.IndexByte(t.tbuf, '\n')
		if i < 0 {
			return len(p), nil
		}
		l := t.tbuf[:i]
		if rest, ok := bytes.CutPrefix(l, []byte("[0] ")); ok && bytes.HasPrefix(rest, []byte(`{"type":"tune"`)) {
			var tl tuneLine
			if err := json.Unmarshal(rest, &tl); err == nil {
				t.job.over = tl.Over
				if tl.Round > 0 {
					fmt.Fprintf(t.stderr, "shmbench tune: np=%d: round %d/%d done (%v)\n", t.np, tl.Round, t.rounds, time.Since(t.start).Round(time.Second))
				}
			}
		} else {
			t.streamReader.Write(append(l, '\n'))
		}
		t.tbuf = t.tbuf[i+1:]
	}
}

func (t *tuneStream) flush() {
	t.tmu.Lock()
	if len(t.tbuf) > 0 {
		t.streamReader.Write(t.tbuf)
		t.tbuf = nil
	}
	t.tmu.Unlock()
	t.streamReader.flush()
}

// discardWriter is a benchfmt.Writer that writes nothing.
type discardWriter struct{}

func (discardWriter) Header(benchfmt.Header) error { return nil }
func (discardWriter) Result(benchfmt.Result) error { return nil }
func (discardWriter) Flush() error                 { return nil }

// tuneHeader describes how the table was made.
func tuneHeader(cfg *tuneConfig, h benchfmt.Header, args []string, took time.Duration) []string {
	var nps []string
	for _, n := range cfg.nps {
		nps = append(nps, strconv.Itoa(n))
	}
	return []string{
		"shmcoll selection table, made by shmbench tune (docs/TUNING.md)",
		fmt.Sprintf("made: %s on %s, in %v", h.Time, h.Host, took.Round(time.Second)),
		fmt.Sprintf("cpu: %s; online CPUs: %d; simd: %s; %s", h.CPU, h.CPUs, h.SIMD, h.Go),
		fmt.Sprintf("load at the start: %s", h.Load),
		"command: shmbench tune " + strings.Join(args, " "),
		fmt.Sprintf("measured: p=%s, %s %s, sizes %s, %d rounds, %v per case and round; the median over rounds of each case's median; margin %g, tolerance %g, prune %g",
			strings.Join(nps, ","), cfg.dtype, cfg.op, cfg.sizesFlag, cfg.rounds, cfg.tm.target, cfg.margin, cfg.tolerance, cfg.prune),
	}
}

// probeLine reports the placement probes around each p's job.
func probeLine(jobs []tuneJob) string {
	var ps []string
	for _, j := range jobs {
		ps = append(ps, fmt.Sprintf("p=%d %.0f/%.0f", j.np, j.probes[0], j.probes[1]))
	}
	return "placement probe (one-way cache-line handoff in ns before/after; 0: not measured): " + strings.Join(ps, ", ")
}

func madeLine(t *collectives.Table) string {
	for _, h := range t.Header {
		if m, ok := strings.CutPrefix(h, "made: "); ok {
			return m
		}
	}
	return "unknown"
}

// keptPs lists the p of old that u does not replace.
func keptPs(old, u *collectives.Table) string {
	var kept []string
	for _, p := range old.Ps() {
		if !slices.Contains(u.Ps(), p) {
			kept = append(kept, strconv.Itoa(p))
		}
	}
	return strings.Join(kept, ",")
}

// medians returns per collective, size and algorithm the median over the
// rounds of the cases' medians.
func medians(rs []benchfmt.Result) map[string]map[int64]map[string]float64 {
	all := map[string]map[int64]map[string][]float64{}
	for _, r := range rs {
		if r.Check != "ok" {
			continue
		}
		if all[r.Coll] == nil {
			all[r.Coll] = map[int64]map[string][]float64{}
		}
		if all[r.Coll][r.Bytes] == nil {
			all[r.Coll][r.Bytes] = map[string][]float64{}
		}
		all[r.Coll][r.Bytes][r.Algo] = append(all[r.Coll][r.Bytes][r.Algo], r.MedianUS)
	}
	out := map[string]map[int64]map[string]float64{}
	for coll, bySize := range all {
		out[coll] = map[int64]map[string]float64{}
		for size, byAlg := range bySize {
			out[coll][size] = map[string]float64{}
			for a, xs := range byAlg {
				out[coll][size][a] = benchfmt.Summarize(xs).Median
			}
		}
	}
	return out
}

// threshold is where the winner of size a gives way to that of size b > a:
// the power of two nearest their geometric middle if it lies in (a, b],
// else the middle itself.
func threshold(a, b int64) int64 {
	m := math.Sqrt(float64(a) * float64(b))
	if m < 1 {
		return b
	}
	pow := int64(1) << int(math.Round(math.Log2(m)))
	if pow > a && pow <= b {
		return pow
	}
	return min(max(int64(math.Ceil(m)), a+1), b)
}

// tuneEntries turns one job's results into table entries and appends its
// part of the report to rep.
func tuneEntries(cfg *tuneConfig, job tuneJob, rep *bytes.Buffer) []collectives.TableEntry {
	med := medians(job.results)
	cpus := "fit"
	if job.over {
		cpus = "over"
	}
	var out []collectives.TableEntry
	for _, coll := range cfg.colls {
		cl, _ := collectives.ParseCollective(coll)
		algs := tuneAlgorithms(coll)
		sizes := make([]int64, 0, len(med[coll]))
		for s := range med[coll] {
			sizes = append(sizes, s)
		}
		slices.Sort(sizes)
		if len(sizes) == 0 {
			continue
		}
		fmt.Fprintf(rep, "\n## %s, p=%d (%s)\n\n", coll, job.np, cpus)
		fmt.Fprint(rep, "| bytes |")
		for _, a := range algs {
			name := a.String()
			if collectives.OrderPreserving(cl, a) && reducing(coll) {
				name += " (o)"
			}
			fmt.Fprintf(rep, " %s |", name)
		}
		fmt.Fprintln(rep, " winner | ordered |")
		fmt.Fprint(rep, "|---:|")
		for range algs {
			fmt.Fprint(rep, "---:|")
		}
		fmt.Fprintln(rep, "---|---|")
		type pick struct{ alg, ord collectives.Algorithm }
		picks := make([]pick, len(sizes))
		for i, s := range sizes {
			best, bestOrd := math.Inf(1), math.Inf(1)
			var pk, fastest pick
			for _, a := range algs {
				t, ok := med[coll][s][a.String()]
				if !ok {
					continue
				}
				if t < best {
					best, fastest.alg = t, a
				}
				if reducing(coll) && collectives.OrderPreserving(cl, a) && t < bestOrd {
					bestOrd, fastest.ord = t, a
				}
			}
			// within: a was measured at s and is at most frac slower than
			// best.
			within := func(a collectives.Algorithm, best, frac float64) bool {
				t, ok := med[coll][s][a.String()]
				return a != collectives.Auto && ok && t <= (1+frac)*best
			}
			// The heuristic's choice stays while it is within -margin of
			// the fastest, so that a table made on a noisy machine replaces
			// it only where another algorithm is clearly faster; else the
			// choice of the size below stays while within -tolerance:
			// fewer ranges, none of them made by noise between close
			// algorithms.
			choose := func(fastest collectives.Algorithm, commutative bool, best float64) collectives.Algorithm {
				if h := collectives.HeuristicAlgorithm(cl, int(s), job.np, commutative, job.over); cfg.margin > 0 && within(h, best, cfg.margin) {
					return h
				}
				if i > 0 {
					prev := picks[i-1].alg
					if !commutative {
						prev = picks[i-1].ord
					}
					if within(prev, best, cfg.tolerance) {
						return prev
					}
				}
				return fastest
			}
			pk.alg = choose(fastest.alg, true, best)
			pk.ord = fastest.ord
			if reducing(coll) {
				pk.ord = choose(fastest.ord, false, bestOrd)
			}
			picks[i] = pk
			fmt.Fprintf(rep, "| %s |", benchfmt.FormatSize(s))
			for _, a := range algs {
				t, ok := med[coll][s][a.String()]
				switch {
				case !ok:
					fmt.Fprint(rep, " — |")
				case a == fastest.alg:
					fmt.Fprintf(rep, " **%s** |", usCell(t))
				default:
					fmt.Fprintf(rep, " %s |", usCell(t))
				}
			}
			ord := "-"
			if pk.ord != collectives.Auto {
				ord = pk.ord.String()
			}
			fmt.Fprintf(rep, " %s | %s |\n", pk.alg, ord)
		}
		// Ranges: each measured size's pick from the threshold below it to
		// the threshold above; equal neighbours merge.
		for i := 0; i < len(sizes); {
			j := i
			for j+1 < len(sizes) && picks[j+1] == picks[i] {
				j++
			}
			e := collectives.TableEntry{Coll: cl, P: job.np, Over: job.over, From: 0, To: math.MaxInt64,
				Alg: picks[i].alg, Ordered: picks[i].ord}
			if i > 0 {
				e.From = threshold(sizes[i-1], sizes[i])
			}
			if j+1 < len(sizes) {
				e.To = threshold(sizes[j], sizes[j+1])
			}
			if e.Alg != collectives.Auto {
				out = append(out, e)
			}
			i = j + 1
		}
	}
	return out
}

// usCell formats microseconds with three significant digits or more.
func usCell(us float64) string {
	switch {
	case us >= 100:
		return strconv.FormatFloat(us, 'f', 0, 64)
	case us >= 10:
		return strconv.FormatFloat(us, 'f', 1, 64)
	}
	return strconv.FormatFloat(us, 'f', 2, 64)
}

func writeReportHead(rep *bytes.Buffer, header []string) {
	fmt.Fprintln(rep, "# shmbench tune report")
	fmt.Fprintln(rep)
	for _, h := range header[1:] {
		fmt.Fprintf(rep, "- %s\n", h)
	}
	fmt.Fprintln(rep)
	fmt.Fprintln(rep, "Median time in µs of the slowest rank (median over rounds of each case's median);")
	fmt.Fprintln(rep, "**bold**: the fastest; winner: the table's choice (the fastest, or the heuristic's choice while")
	fmt.Fprintln(rep, "within -margin of it, else the choice of the size below while within -tolerance of it);")
	fmt.Fprintln(rep, "(o): keeps rank order; ordered: the choice among those,")
	fmt.Fprintln(rep, "taken for non-commutative operators; —: not measured (pruned: far behind at the size below).")
}
