package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/shmcoll/shmcoll/internal/benchfmt"
	"github.com/shmcoll/shmcoll/internal/mpibench"
	"github.com/shmcoll/shmcoll/mpi"
	"github.com/shmcoll/shmcoll/numa"
)

func init() {
	register(&command{
		name:    "compare",
		summary: "the same sweep through Open MPI, MPICH and shmcoll, interleaved, with ratios",
		run:     runCompare,
	})
}

const compareUsage = `usage: shmbench compare [flags]

Runs the same sweep through Open MPI, MPICH (internal/mpibench's C
benchmark, built with mpicc.openmpi and mpicc.mpich) and shmcoll (shmbench
run), with the same timing method. The hypervisor moves this machine's
vCPUs between host cores, which changes small-message times 2-2.5x within
seconds, so the implementations alternate in short blocks (one size each,
or with -block sweep every size, in an order that rotates every round),
the placement probe (one-way
cache-line handoff, ns) is recorded before every block, and the rounds
repeat. Per size it reports each implementation's median over rounds and
the median over rounds of the per-round ratio shmcoll / best MPI (below 1:
shmcoll is faster).

hier-openmpi and hier-mpich are shmcoll's hierarchical collectives
(collectives/hier: shared memory inside a node, that MPI between nodes) on
the same ranks under that MPI's mpirun, the nodes emulated with -node-size
(SHMCOLL_NODE_SIZE: "2" makes nodes of 2 consecutive ranks, "3,1" gives
the sizes). Their column hier-X/X is the median over rounds of the
per-round ratio to that MPI's own collective. shmbench is built without
MPI, so the MPI-tagged program (internal/mpibench/hiercoll) is built on
demand with the go command from the source tree of the working directory
(or of this binary). Barrier, alltoall(v), reduce_scatter and allgatherv have no
hierarchical version there.

Nothing is installed: an MPI that is absent is named with the commands and
Debian packages it lacks, and the comparison goes on without it.

Flags:
`

// compareImpl is one implementation taking part.
type compareImpl struct {
	name string   // "openmpi", "mpich", "shmcoll", "hier-openmpi", "hier-mpich"
	mpi  mpi.Impl // the MPI library, or the one hier runs under
	hier bool     // shmcoll's hierarchical collectives under mpi
	args []string // shmcoll: more flags of its shmbench run (-arena)
}

// library reports whether p is an MPI library's own collectives.
func (p compareImpl) library() bool { return p.mpi != "" && !p.hier }

// block is one implementation's sweep in one round.
type block struct {
	Type    string             `json:"type"` // "block"
	Round   int                `json:"round"`
	Group   int                `json:"group"` // which sizes: 0 for a whole sweep, else 1 + the size's index (-block size)
	Impl    string             `json:"impl"`
	ProbeNS float64            `json:"probe_ns"`
	Seconds float64            `json:"seconds"`
	Results []benchfmt.Result  `json:"results"`
	byKey   map[compareKey]int // index into Results
}

type compareKey struct {
	coll  string
	bytes int64
}

// compareRow is one (collective, size) of the comparison.
type compareRow struct {
	Type   string               `json:"type"` // "compare"
	Coll   string               `json:"coll"`
	NP     int                  `json:"np"`
	Dtype  string               `json:"dtype"`
	Bytes  int64                `json:"bytes"`
	Rounds int                  `json:"rounds"`
	Median map[string]float64   `json:"median_us"`    // per implementation: median over rounds
	PerRnd map[string][]float64 `json:"round_us"`     // per implementation and round (0: missing)
	Ratios []float64            `json:"ratios"`       // per round: shmcoll / best MPI (0: missing)
	Ratio  float64              `json:"ratio_median"` // median of Ratios (0: none)
	// Steady marks the rounds whose blocks all saw the same placement
	// (probes within a factor steadyProbe of each other); SteadyRatio is
	// the median of their ratios (0: no steady round).
	Steady      []bool   `json:"steady"`
	SteadyRatio float64  `json:"ratio_steady_median"`
	Best        []string `json:"best_mpi"` // per round: the faster MPI
	// HierRatios has, per hier-X implementation, the per-round ratio
	// hier-X / X (0: missing); HierRatio their medians.
	HierRatios map[string][]float64 `json:"hier_ratios,omitempty"`
	HierRatio  map[string]float64   `json:"hier_ratio_median,omitempty"`
}

func runCompare(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, compareUsage)
		fs.PrintDefaults()
	}
	np := fs.Int("np", 2, "ranks")
	coll := fs.String("coll", "allreduce", "collectives, comma-separated, or all: "+strings.Join(mpibench.Colls, ", "))
	dtype := fs.String("dtype", "float64", "element type: "+strings.Join(mpibench.Dtypes, ", "))
	sizes := fs.String("sizes", "8,1K,64K,1M,16M,64M", "sizes in bytes: lists and ranges lo:hi[:factor]")
	rounds := fs.Int("rounds", 3, "rounds: each runs every implementation once")
	per := fs.Duration("time", 100*time.Millisecond, "timed duration per size in each block")
	warm := fs.Duration("warmup", 20*time.Millisecond, "warm-up per size in each block")
	impls := fs.String("impls", "openmpi,mpich,shmcoll", "implementations to compare: openmpi, mpich, shmcoll, hier-openmpi, hier-mpich")
	nodeSize := fs.String("node-size", "", "hier-*: ranks per emulated node (SHMCOLL_NODE_SIZE: k, or sizes a,b,...; empty: one node)")
	format := fs.String("format", "table", "output: table or json (block lines, then one line per size)")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up on a block after this long")
	blockBy := fs.String("block", "size", "what one block measures: size (one size: the implementations alternate every size) or sweep (every size)")
	plotDir := fs.String("plot", "", "write latency and bandwidth charts (a line per implementation, medians over rounds) into this directory")
	arena := fs.Bool("arena", false, "shmcoll: buffers from collectives.Alloc, each rank's input rewritten before every iteration (shmbench run -arena)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "shmbench compare: %v\n", err)
		return 2
	}
	bad := func(f string, a ...any) int {
		fmt.Fprintf(stderr, "shmbench compare: "+f+"\n", a...)
		return 2
	}
	switch {
	case fs.NArg() > 0:
		return bad("unexpected arguments: %q", fs.Args())
	case *np < 1 || *np > 1024:
		return bad("-np %d: need 1 to 1024 ranks", *np)
	case *rounds < 1:
		return bad("-rounds %d: need at least 1", *rounds)
	case *per <= 0:
		return bad("-time %v: must be positive", *per)
	case *warm < 0:
		return bad("-warmup %v: must be >= 0", *warm)
	case *format != "table" && *format != "json":
		return bad("-format %q: want table or json", *format)
	case *blockBy != "sweep" && *blockBy != "size":
		return bad("-block %q: want sweep or size", *blockBy)
	case !slices.Contains(mpibench.Dtypes, *dtype):
		return bad("-dtype %q: the MPI benchmark supports %s", *dtype, strings.Join(mpibench.Dtypes, ", "))
	}
	colls := mpibench.Colls
	if *coll != "all" {
		colls = strings.Split(*coll, ",")
		for _, c := range colls {
			if !slices.Contains(mpibench.Colls, c) {
				return bad("-coll: %q is not one the MPI benchmark measures (%s, or all)", c, strings.Join(mpibench.Colls, ", "))
			}
		}
	}
	sz, err := benchfmt.ParseSizes(*sizes)
	if err != nil {
		return bad("-sizes: %v", err)
	}
	var parts []compareImpl
	for _, name := range strings.Split(*impls, ",") {
		switch name {
		case "openmpi":
			parts = append(parts, compareImpl{name: name, mpi: mpi.OpenMPI})
		case "mpich":
			parts = append(parts, compareImpl{name: name, mpi: mpi.MPICH})
		case "shmcoll":
			im := compareImpl{name: name}
			if *arena {
				im.args = []string{"-arena"}
			}
			parts = append(parts, im)
		case "hier-openmpi":
			parts = append(parts, compareImpl{name: name, mpi: mpi.OpenMPI, hier: true})
		case "hier-mpich":
			parts = append(parts, compareImpl{name: name, mpi: mpi.MPICH, hier: true})
		default:
			return bad("-impls: unknown implementation %q (openmpi, mpich, shmcoll, hier-openmpi, hier-mpich)", name)
		}
	}
	if !slices.ContainsFunc(parts, func(p compareImpl) bool { return !p.library() }) {
		return bad("-impls %s: shmcoll or hier-openmpi or hier-mpich must take part", *impls)
	}
	if *nodeSize != "" {
		for _, f := range strings.Split(*nodeSize, ",") {
			if n, err := strconv.Atoi(f); err != nil || n < 1 {
				return bad("-node-size %q: want k or a,b,... of positive integers", *nodeSize)
			}
		}
	}

	// Say exactly what is missing, and go on without it.
	var usable []compareImpl
	for _, p := range parts {
		if p.mpi != "" {
			if err := mpi.Lookup(p.mpi).Err(); err != nil {
				fmt.Fprintf(stderr, "shmbench compare: %v; comparing without it\n", err)
				continue
			}
		}
		usable = append(usable, p)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Build the MPI benchmarks before timing anything. A hierarchical one
	// that cannot be built (no go command, no pkg-config module, no source
	// tree) is named and left out.
	var built []compareImpl
	for _, p := range usable {
		switch {
		case p.hier:
			if _, err := mpibench.BuildHier(ctx, p.mpi); err != nil {
				fmt.Fprintf(stderr, "shmbench compare: %s: %v; comparing without it\n", p.name, err)
				continue
			}
		case p.mpi != "":
			if _, err := mpibench.Build(ctx, p.mpi); err != nil {
				fmt.Fprintf(stderr, "shmbench compare: %v\n", err)
				return 1
			}
		}
		built = append(built, p)
	}
	usable = built
	if !slices.ContainsFunc(usable, compareImpl.library) {
		fmt.Fprintf(stderr, "shmbench compare: no MPI to compare with (install nothing was tried; see the packages named above)\n")
		return 1
	}
	if !slices.ContainsFunc(usable, func(p compareImpl) bool { return !p.library() }) {
		fmt.Fprintf(stderr, "shmbench compare: nothing to compare with the MPI libraries (see the reasons above)\n")
		return 1
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "shmbench compare: %v\n", err)
		return 1
	}
	topo, _ := numa.Detect()
	h := hostHeader("shmbench compare", *np, *dtype, "sum")
	if *format == "json" {
		h.Type = "run"
		b, _ := json.Marshal(h)
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		fmt.Fprintf(stdout, "# host: %s; cpu: %s (%d CPUs); simd: %s; load: %s\n", h.Host, h.CPU, h.CPUs, h.SIMD, h.Load)
		fmt.Fprintf(stdout, "# compare np=%d dtype=%s, %d rounds of %s, %v per size\n", *np, *dtype, *rounds, implNames(usable), *per)
	}

	// Blocks: each implementation runs a group of sizes, one after the
	// other, in an order that rotates every round.
	groups := [][]int64{sz}
	if *blockBy == "size" {
		groups = nil
		for _, b := range sz {
			groups = append(groups, []int64{b})
		}
	}
	var blocks []*block
	for r := range *rounds {
		for g, sizes := range groups {
			for i := range usable {
				p := usable[(i+r)%len(usable)]
				b := &block{Type: "block", Round: r + 1, Impl: p.name}
				if len(groups) > 1 {
					b.Group = g + 1
				}
				if err := runBlock(ctx, b, p, exe, *np, *nodeSize, colls, sizes, *per, *warm, *dtype, *timeout, topo, stderr); err != nil {
					fmt.Fprintf(stderr, "shmbench compare: round %d, %s: %v\n", r+1, p.name, err)
					return 1
				}
				blocks = append(blocks, b)
				if *format == "json" {
					bb, _ := json.Marshal(b)
					fmt.Fprintf(stdout, "%s\n", bb)
				} else {
					probe := "n/a"
					if b.ProbeNS > 0 {
						probe = fmt.Sprintf("%.1f ns", b.ProbeNS)
					}
					what := "sweep"
					if b.Group > 0 {
						what = humanSize(sizes[0])
					}
					fmt.Fprintf(stdout, "# round %d %-8s %-8s probe %9s, %5.1f s\n", b.Round, b.Impl, what, probe, b.Seconds)
				}
			}
		}
	}
	rows := compareRows(blocks, usable, *rounds)
	if *format == "json" {
		for _, row := range rows {
			row.NP, row.Dtype = *np, *dtype
			b, _ := json.Marshal(row)
			fmt.Fprintf(stdout, "%s\n", b)
		}
	} else {
		writeCompareTable(stdout, rows, usable)
	}
	if *plotDir != "" {
		files, err := plotResults(*plotDir, compareResults(rows, usable, *np))
		if err != nil {
			fmt.Fprintf(stderr, "shmbench compare: plot: %v\n", err)
			return 1
		}
		fmt.Fprintf(stderr, "shmbench compare: wrote %s\n", strings.Join(files, ", "))
	}
	for _, b := range blocks {
		for _, res := range b.Results {
			if res.Check != "ok" {
				fmt.Fprintf(stderr, "shmbench compare: CHECK FAILED: %s %s at %d B: %s\n", b.Impl, res.Coll, res.Bytes, res.Check)
				return 1
			}
		}
	}
	return 0
}

// runBlock measures one block: the placement probe, then the sweep.
func runBlock(ctx context.Context, b *block, p compareImpl, exe string, np int, nodeSize string, colls []string, sizes []int64,
	per, warm time.Duration, dtype string, timeout time.Duration, topo *numa.Topology, stderr io.Writer) error {
	b.ProbeNS, _ = placementNS(topo) // 0: not measured
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	var err error
	if p.mpi != "" {
		o := mpibench.Options{NP: np, Colls: colls, Sizes: sizes, Time: per, Warmup: warm, Dtype: dtype, Hier: p.hier, NodeSize: nodeSize}
		if p.hier {
			o.Colls = slices.DeleteFunc(slices.Clone(colls), func(c string) bool { return !slices.Contains(mpibench.HierColls, c) })
		}
		if len(o.Colls) > 0 {
			err = runMPIBlock(ctx, b, p.mpi, o)
		}
	} else {
		err = runShmBlock(ctx, b, exe, np, colls, sizes, per, warm, dtype, p.args, stderr)
	}
	b.Seconds = time.Since(start).Seconds()
	b.byKey = map[compareKey]int{}
	for k, res := range b.Results {
		b.byKey[compareKey{res.Coll, res.Bytes}] = k
	}
	return err
}

func implNames(ps []compareImpl) string {
	var s []string
	for _, p := range ps {
		s = append(s, p.name)
	}
	return strings.Join(s, ", ")
}

func runMPIBlock(ctx context.Context, b *block, impl mpi.Impl, o mpibench.Options) error {
	if o.Warmup == 0 {
		o.Warmup = -1 // mpibench: negative means none
	}
	rep, err := mpibench.Run(ctx, impl, o)
	if rep != nil {
		for _, r := range rep.Results {
			b.Results = append(b.Results, benchfmt.Result{
				Type: "result", Coll: r.Coll, Algo: r.Impl, NP: r.NP, Dtype: r.Dtype, Op: r.Op, Bytes: r.Bytes, Iters: r.Iters,
				MinUS: r.MinUS, MedianUS: r.MedianUS, MeanUS: r.MeanUS, MaxUS: r.MaxUS, P99US: r.P99US, SpanUS: r.SpanUS,
				AlgBW: r.AlgBW, BusBW: r.BusBW, Check: r.Check,
			})
		}
	}
	return err
}

func runShmBlock(ctx context.Context, b *block, exe string, np int, colls []string, sizes []int64, per, warm time.Duration, dtype string, more []string, stderr io.Writer) error {
	var ss []string
	for _, s := range sizes {
		ss = append(ss, strconv.FormatInt(s, 10))
	}
	args := []string{"-np", strconv.Itoa(np), "-coll", strings.Join(colls, ","), "-sizes", strings.Join(ss, ","),
		"-time", per.String(), "-warmup", warm.String(), "-dtype", dtype, "-format", "json"}
	args = append(args, more...)
	cfg, err := parseRun(args, stderr, io.Discard)
	if err != nil {
		return err
	}
	s, err := newSink("json", io.Discard, stderr, 0)
	if err != nil {
		return err
	}
	err = launchSweep(ctx, cfg, exe, args, s, stderr)
	b.Results = s.results
	return err
}

// compareRows pairs the blocks' results by (collective, size), in the order
// of the first round's blocks.
func compareRows(blocks []*block, impls []compareImpl, rounds int) []*compareRow {
	var keys []compareKey
	groupOf := map[compareKey]int{}
	for _, b := range blocks {
		if b.Round == 1 {
			for _, r := range b.Results {
				k := compareKey{r.Coll, r.Bytes}
				if _, dup := groupOf[k]; !dup {
					keys = append(keys, k)
					groupOf[k] = b.Group
				}
			}
		}
	}
	steady := steadyRounds(blocks)
	var rows []*compareRow
	for _, k := range keys {
		g := groupOf[k]
		row := &compareRow{Type: "compare", Coll: k.coll, Bytes: k.bytes, Rounds: rounds,
			Median: map[string]float64{}, PerRnd: map[string][]float64{}}
		for _, p := range impls {
			row.PerRnd[p.name] = make([]float64, rounds)
		}
		for _, b := range blocks {
			if i, ok := b.byKey[k]; ok {
				row.PerRnd[b.Impl][b.Round-1] = b.Results[i].MedianUS
			}
		}
		for name, xs := range row.PerRnd {
			row.Median[name] = medianPositive(xs)
		}
		row.Ratios = make([]float64, rounds)
		row.Best = make([]string, rounds)
		for r := range rounds {
			best, bestName := 0.0, ""
			for _, p := range impls {
				if v := row.PerRnd[p.name][r]; p.library() && v > 0 && (best == 0 || v < best) {
					best, bestName = v, p.name
				}
			}
			row.Best[r] = bestName
			if sh, ok := row.PerRnd["shmcoll"]; ok && best > 0 && sh[r] > 0 {
				row.Ratios[r] = sh[r] / best
			}
		}
		row.Ratio = medianPositive(row.Ratios)
		row.Steady = make([]bool, rounds)
		var sr []float64
		for r := range rounds {
			row.Steady[r] = steady[[2]int{r + 1, g}]
			if row.Steady[r] {
				sr = append(sr, row.Ratios[r])
			}
		}
		row.SteadyRatio = medianPositive(sr)
		for _, p := range impls {
			if !p.hier {
				continue
			}
			if row.HierRatios == nil {
				row.HierRatios, row.HierRatio = map[string][]float64{}, map[string]float64{}
			}
			rs := make([]float64, rounds)
			for r := range rounds {
				if h, m := row.PerRnd[p.name][r], row.PerRnd[string(p.mpi)][r]; h > 0 && m > 0 {
					rs[r] = h / m
				}
			}
			row.HierRatios[p.name], row.HierRatio[p.name] = rs, medianPositive(rs)
		}
		rows = append(rows, row)
	}
	return rows
}

// steadyProbe is how far apart (a factor) the probes of one round's blocks
// may be for the round to count as one placement: the classes on the
// project's VM (~14, ~30-55, ~150-210 ns) are further apart than this.
const steadyProbe = 1.6

// steadyRounds reports, per (round, group), whether every block of it
// measured its probe and all probes are within steadyProbe of each other.
func steadyRounds(blocks []*block) map[[2]int]bool {
	lo, hi := map[[2]int]float64{}, map[[2]int]float64{}
	ok := map[[2]int]bool{}
	for _, b := range blocks {
		k := [2]int{b.Round, b.Group}
		if _, seen := ok[k]; !seen {
			ok[k] = true
		}
		if b.ProbeNS <= 0 {
			ok[k] = false
			continue
		}
		if lo[k] == 0 || b.ProbeNS < lo[k] {
			lo[k] = b.ProbeNS
		}
		hi[k] = max(hi[k], b.ProbeNS)
	}
	for k := range ok {
		ok[k] = ok[k] && lo[k] > 0 && hi[k] <= steadyProbe*lo[k]
	}
	return ok
}

// compareResults turns the rows into one result per implementation and
// size (median over rounds), for the charts: the algorithm is the
// implementation.
func compareResults(rows []*compareRow, impls []compareImpl, np int) []benchfmt.Result {
	var out []benchfmt.Result
	for _, p := range impls {
		for _, row := range rows {
			med := row.Median[p.name]
			if med <= 0 {
				continue
			}
			r := benchfmt.Result{Coll: row.Coll, Algo: p.name, NP: np, Bytes: row.Bytes, Iters: row.Rounds,
				MinUS: med, MedianUS: med, MeanUS: med, MaxUS: med, P99US: med, SpanUS: med, Check: "ok"}
			r.AlgBW = float64(r.Bytes) / (med * 1e3)
			r.BusBW = r.AlgBW * benchfmt.BusFactor(r.Coll, np)
			out = append(out, r)
		}
	}
	return out
}

// medianPositive is the median of the positive values of xs (0 if none).
func medianPositive(xs []float64) float64 {
	var v []float64
	for _, x := range xs {
		if x > 0 {
			v = append(v, x)
		}
	}
	return benchfmt.Summarize(v).Median
}

func writeCompareTable(w io.Writer, rows []*compareRow, impls []compareImpl) {
	fmt.Fprintf(w, "%-20s %8s", "coll", "bytes")
	for _, p := range impls {
		fmt.Fprintf(w, " %11s", p.name+"_us")
	}
	for _, p := range impls {
		if p.hier {
			fmt.Fprintf(w, " %20s", p.name+"/"+string(p.mpi))
		}
	}
	fmt.Fprintf(w, " %8s %11s %13s  %s\n", "ratio", "spread", "steady", "best MPI per round")
	for _, row := range rows {
		fmt.Fprintf(w, "%-20s %8s", row.Coll, benchfmt.FormatSize(row.Bytes))
		for _, p := range impls {
			fmt.Fprintf(w, " %11s", fmtUS(row.Median[p.name]))
		}
		for _, p := range impls {
			if p.hier {
				fmt.Fprintf(w, " %20s", fmtRatio(row.HierRatio[p.name], row.HierRatios[p.name]))
			}
		}
		lo, hi := 0.0, 0.0
		for _, r := range row.Ratios {
			if r > 0 {
				if lo == 0 || r < lo {
					lo = r
				}
				hi = max(hi, r)
			}
		}
		n := 0
		for _, ok := range row.Steady {
			if ok {
				n++
			}
		}
		st := "none"
		if row.SteadyRatio > 0 {
			st = fmt.Sprintf("%.3f (%d/%d)", row.SteadyRatio, n, row.Rounds)
		}
		ratio, spread := "n/a", "n/a"
		if row.Ratio > 0 {
			ratio, spread = fmt.Sprintf("%.3f", row.Ratio), fmt.Sprintf("%.3g-%.3g", lo, hi)
		}
		fmt.Fprintf(w, " %8s %11s %13s  %s\n", ratio, spread, st, strings.Join(row.Best, ","))
	}
	fmt.Fprintln(w, "# ratio: median over rounds of shmcoll / best MPI in that round (< 1: shmcoll faster); times: median over rounds of each block's median")
	if slices.ContainsFunc(impls, func(p compareImpl) bool { return p.hier }) {
		fmt.Fprintln(w, "# hier-X/X: median over rounds of hier-X / MPI X's own collective in that round, and its spread (< 1: hierarchical faster)")
	}
	fmt.Fprintf(w, "# steady: the same median over the rounds whose blocks all saw one placement (probes within %.1fx)\n", steadyProbe)
}

// fmtRatio prints a median ratio and the spread of its rounds.
func fmtRatio(med float64, rs []float64) string {
	lo, hi := 0.0, 0.0
	for _, r := range rs {
		if r > 0 {
			if lo == 0 || r < lo {
				lo = r
			}
			hi = max(hi, r)
		}
	}
	if med == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.3f (%.3g-%.3g)", med, lo, hi)
}

func fmtUS(us float64) string {
	switch {
	case us == 0:
		return "n/a"
	case us < 10:
		return fmt.Sprintf("%.3f", us)
	case us < 1000:
		return fmt.Sprintf("%.1f", us)
	case us < 10000:
		return fmt.Sprintf("%.0f", us)
	}
	return fmt.Sprintf("%.1f ms", us/1000)
}
