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
	"os/exec"
	"os/signal"
	"path/filepath"
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
		summary: "the same sweep through MPIs and shmcoll builds, interleaved, with ratios",
		run:     runCompare,
	})
}

const compareUsage = `usage: shmbench compare [flags]

Runs the same sweep through MPI libraries (a small C benchmark of shmbench,
built with each MPI's compiler wrapper and started with its launcher) and
through shmcoll (shmbench run), with the same timing method: one
iteration is a barrier, then the collective; its time is the slowest
rank's; a size's time is the median over its iterations.

A machine's speed drifts while it runs: frequency, other load, and on a
virtual machine the host cores its virtual CPUs run on. So the implementations
alternate in short blocks (one size each, or with -block sweep every size,
in an order that rotates every round), a placement probe (one-way
cache-line handoff between the first two CPUs, ns) is recorded before
every block, and the rounds repeat. Per size it reports each
implementation's median over rounds and the median over rounds of the
per-round ratio shmcoll / best MPI (below 1: shmcoll is faster); "steady"
is the same median over the rounds whose blocks all saw one placement.
With -format json, shmbench plot -compare charts those ratios against the
size, the outputs of several np in one image.

Implementations (-impls, comma-separated):
  openmpi, mpich     Debian's Open MPI and MPICH (mpicc.openmpi, mpirun.openmpi,
                     mpicc.mpich, mpirun.mpich on PATH)
  NAME               an MPI installation named with -mpi NAME=PREFIX (PREFIX/bin/mpicc
                     and PREFIX/bin/mpirun or mpiexec) or with -mpi-name NAME -mpicc PATH
                     -mpirun PATH; its launcher says whether it is Open MPI or
                     an MPICH derivative (Hydra), which decides the launch line
  shmcoll            this shmbench's own collectives
  shmcoll@PATH       another build of shmbench (PATH is its binary), run the same way;
                     the column shmcoll/shmcoll@PATH is the per-round ratio of this
                     build to that one, median over rounds (below 1: this one faster)
  MPI+shmcoll        that MPI with libshmcoll preloaded into its ranks (LD_PRELOAD,
  MPI+shmcoll@LIB    through the launcher): LIB, or -libshmcoll, is the library built
                     for that MPI (go build -buildmode=c-shared -tags mpi, plus
                     mpich for MPICH, ./cmd/libshmcoll); the column MPI+shmcoll/MPI
                     is the per-round ratio to that MPI's own collective
  hier-openmpi,      shmcoll's hierarchical collectives (collectives/hier: shared
  hier-mpich         memory inside a node, that MPI between nodes) under that MPI's
                     launcher, the nodes emulated with -node-size (SHMCOLL_NODE_SIZE:
                     "2" makes nodes of 2 consecutive ranks, "3,1" gives the sizes);
                     built on demand with the go command from the source tree of the
                     working directory (or of this binary); allreduce,
                     reduce_scatter_block, allgather, bcast and reduce only

An MPI given by -mpi or -mpicc takes part without naming it in -impls.
Nothing is installed: an MPI that is absent is named with the commands and
Debian packages it lacks, and the comparison goes on without it.

Flags:
`

// compareImpl is one implementation taking part.
type compareImpl struct {
	name    string            // as in -impls
	inst    *mpi.Installation // the MPI library, or the one hier and preload run under
	hier    bool              // shmcoll's hierarchical collectives under inst
	preload string            // the interposer preloaded into inst's ranks
	exe     string            // shmcoll: the shmbench binary ("": this one)
	args    []string          // shmcoll: more flags of its shmbench run (-arena)
	// base is the implementation this one is set against, per round (hier
	// and preload: the MPI's own collectives; another shmcoll build: this
	// one), and baseFirst puts base in the numerator of the ratio.
	base      string
	baseFirst bool
}

// library reports whether p is an MPI library's own collectives.
func (p compareImpl) library() bool { return p.inst != nil && !p.hier && p.preload == "" }

// ratioName is the column of p's per-round ratio to its base.
func (p compareImpl) ratioName() string {
	if p.baseFirst {
		return p.base + "/" + p.name
	}
	return p.name + "/" + p.base
}

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
	// PairRatios has, per implementation set against another (hier-X /
	// X, X+shmcoll / X, shmcoll / shmcoll@PATH), the per-round ratio (0:
	// missing), keyed by the ratio's name; PairRatio their medians and
	// PairSteady the medians over the steady rounds (0: none).
	PairRatios map[string][]float64 `json:"pair_ratios,omitempty"`
	PairRatio  map[string]float64   `json:"pair_ratio_median,omitempty"`
	PairSteady map[string]float64   `json:"pair_ratio_steady_median,omitempty"`
}

// compareConfig is a parsed shmbench compare command line.
type compareConfig struct {
	np, rounds, iters int
	colls             []string
	dtype             string
	sizes             []int64
	per, warm         time.Duration
	impls             []compareImpl
	nodeSize          string
	format            string
	timeout           time.Duration
	blockBy           string
	plotDir           string
	// servedBarrier: the MPI benchmark's timing barrier calls MPI_Barrier
	// (-barrier mpi), which a preloaded libshmcoll serves.
	servedBarrier bool
}

// siteMPIs are the installations of -mpi NAME=PREFIX, in order.
type siteMPIs []siteMPI

type siteMPI struct{ name, prefix string }

func (s *siteMPIs) String() string {
	var out []string
	for _, m := range *s {
		out = append(out, m.name+"="+m.prefix)
	}
	return strings.Join(out, ",")
}

func (s *siteMPIs) Set(v string) error {
	name, prefix, ok := strings.Cut(v, "=")
	if !ok || name == "" || prefix == "" {
		return fmt.Errorf("want NAME=PREFIX")
	}
	*s = append(*s, siteMPI{name, prefix})
	return nil
}

func parseCompare(args []string, stderr io.Writer) (*compareConfig, error) {
	fs := newFlagSet("compare", compareUsage, stderr)
	np := fs.Int("np", 2, "ranks")
	coll := fs.String("coll", "allreduce", "collectives, comma-separated, or all: "+strings.Join(mpibench.Colls, ", "))
	dtype := fs.String("dtype", "float64", "element type: "+strings.Join(mpibench.Dtypes, ", "))
	sizes := fs.String("sizes", "8,1K,64K,1M,16M,64M", "sizes in bytes: lists and ranges lo:hi[:factor] (factor 2 if left out)")
	rounds := fs.Int("rounds", 3, "rounds: each runs every implementation once")
	iters := fs.Int("iters", 0, "timed iterations per size in each block (0: run for -time)")
	per := fs.Duration("time", 100*time.Millisecond, "timed duration per size in each block")
	warm := fs.Duration("warmup", 20*time.Millisecond, "warm-up per size in each block")
	impls := fs.String("impls", "openmpi,mpich,shmcoll", "implementations to compare (see above)")
	var sites siteMPIs
	fs.Var(&sites, "mpi", "an MPI installation `NAME=PREFIX` (PREFIX/bin/mpicc, PREFIX/bin/mpirun); repeatable")
	mpicc := fs.String("mpicc", "", "the compiler wrapper of the MPI named by -mpi-name")
	mpirun := fs.String("mpirun", "", "the launcher (mpirun or mpiexec) of the MPI named by -mpi-name")
	mpiName := fs.String("mpi-name", "site", "the name of the MPI given by -mpicc and -mpirun")
	lib := fs.String("libshmcoll", "", "libshmcoll for MPI+shmcoll without @LIB")
	nodeSize := fs.String("node-size", "", "hier-*: ranks per emulated node (SHMCOLL_NODE_SIZE: k, or sizes a,b,...; empty: one node)")
	format := fs.String("format", "table", "output: table or json (block lines, then one line per size)")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up on a block after this long")
	blockBy := fs.String("block", "size", "what one block measures: size (one size: the implementations alternate every size) or sweep (every size)")
	plotDir := fs.String("plot", "", "write latency and bandwidth charts (a line per implementation, medians over rounds) into this directory; the ratios: shmbench plot")
	arena := fs.Bool("arena", false, "shmcoll: buffers from collectives.Alloc, each rank's input rewritten before every iteration (shmbench run -arena)")
	barrier := fs.String("barrier", "pmpi", "the MPI benchmark's barrier before every iteration: pmpi (PMPI_Barrier, the MPI's own with libshmcoll preloaded too) or mpi (MPI_Barrier, which libshmcoll serves, as IMB and OSU time)")
	al := fs.addAliases(aliasSizes | aliasIters | aliasDtype)
	if err := fs.parse(args); err != nil {
		return nil, err
	}
	if err := al.resolve(native{sizes: sizes, iters: iters, dtype: dtype}); err != nil {
		return nil, err
	}
	*dtype = typeName(*dtype)
	set := fs.setFlags()
	c := &compareConfig{np: *np, rounds: *rounds, iters: *iters, dtype: *dtype, per: *per, warm: *warm,
		nodeSize: *nodeSize, format: *format, timeout: *timeout, blockBy: *blockBy, plotDir: *plotDir,
		servedBarrier: *barrier == "mpi"}
	switch {
	case *barrier != "pmpi" && *barrier != "mpi":
		return nil, badUsage("-barrier %q: want pmpi or mpi", *barrier)
	case c.np < 1 || c.np > 1024:
		return nil, badUsage("-np %d: need 1 to 1024 ranks", c.np)
	case c.rounds < 1:
		return nil, badUsage("-rounds %d: need at least 1", c.rounds)
	case c.iters < 0:
		return nil, badUsage("-iters %d: must be >= 0", c.iters)
	case c.per <= 0:
		return nil, badUsage("-time %v: must be positive", c.per)
	case c.warm < 0:
		return nil, badUsage("-warmup %v: must be >= 0", c.warm)
	case c.format != "table" && c.format != "json":
		return nil, badUsage("-format %q: want table or json", c.format)
	case c.blockBy != "sweep" && c.blockBy != "size":
		return nil, badUsage("-block %q: want sweep or size", c.blockBy)
	case !slices.Contains(mpibench.Dtypes, c.dtype):
		return nil, badUsage("-dtype %q: the MPI benchmark supports %s", c.dtype, strings.Join(mpibench.Dtypes, ", "))
	case (*mpicc == "") != (*mpirun == ""):
		return nil, badUsage("-mpicc and -mpirun name one MPI: give both")
	case set["mpi-name"] && *mpicc == "":
		return nil, badUsage("-mpi-name names the MPI of -mpicc and -mpirun: give them")
	}
	c.colls = mpibench.Colls
	if *coll != "all" {
		c.colls = strings.Split(*coll, ",")
		for _, x := range c.colls {
			if !slices.Contains(mpibench.Colls, x) {
				return nil, badUsage("-coll: %q is not one the MPI benchmark measures (%s, or all)", x, strings.Join(mpibench.Colls, ", "))
			}
		}
	}
	var err error
	if c.sizes, err = benchfmt.ParseSizes(*sizes); err != nil {
		return nil, badUsage("-sizes: %v", err)
	}
	if c.nodeSize != "" {
		for _, f := range strings.Split(c.nodeSize, ",") {
			if n, err := strconv.Atoi(f); err != nil || n < 1 {
				return nil, badUsage("-node-size %q: want k or a,b,... of positive integers", c.nodeSize)
			}
		}
	}

	// The MPIs by name: Debian's, then those given by path.
	mpis := map[string]*mpi.Installation{}
	for _, impl := range mpi.Impls {
		in := mpi.Lookup(impl)
		mpis[string(impl)] = &in
	}
	var named []string // given by path: they take part unless -impls is given
	checkName := func(name string) error {
		if name == "shmcoll" || strings.ContainsAny(name, "@+,=") || strings.HasPrefix(name, "hier-") {
			return badUsage("MPI name %q: a name of its own, without @ + , =", name)
		}
		if slices.Contains(named, name) {
			return badUsage("MPI %q given twice", name)
		}
		return nil
	}
	addSite := func(name, cc, run string) error {
		if err := checkName(name); err != nil {
			return err
		}
		in, err := siteInstallation(cc, run)
		if err != nil {
			return badUsage("MPI %s: %v", name, err)
		}
		mpis[name] = &in
		named = append(named, name)
		return nil
	}
	for _, s := range sites {
		if err := checkName(s.name); err != nil {
			return nil, err
		}
		cc, run, err := prefixCommands(s.prefix)
		if err != nil {
			return nil, badUsage("-mpi %s=%s: %v", s.name, s.prefix, err)
		}
		if err := addSite(s.name, cc, run); err != nil {
			return nil, err
		}
	}
	if *mpicc != "" {
		if err := addSite(*mpiName, *mpicc, *mpirun); err != nil {
			return nil, err
		}
	}
	list := strings.Split(*impls, ",")
	if !set["impls"] {
		list = append(list, named...)
	}
	for _, name := range list {
		im := compareImpl{name: name}
		if slices.ContainsFunc(c.impls, func(p compareImpl) bool { return p.name == name }) {
			return nil, badUsage("-impls: %s given twice", name)
		}
		switch base, libPath, isPreload := cutPreload(name); {
		case name == "shmcoll":
			if *arena {
				im.args = []string{"-arena"}
			}
		case strings.HasPrefix(name, "shmcoll@"):
			im.exe = strings.TrimPrefix(name, "shmcoll@")
			if st, err := os.Stat(im.exe); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
				return nil, badUsage("-impls %s: %s is not an executable shmbench", name, im.exe)
			}
			if *arena {
				im.args = []string{"-arena"}
			}
			im.base, im.baseFirst = "shmcoll", true
		case isPreload:
			if libPath == "" {
				libPath = *lib
			}
			if libPath == "" {
				return nil, badUsage("-impls %s: name the library: %s@/path/libshmcoll.so or -libshmcoll", name, name)
			}
			if _, err := os.Stat(libPath); err != nil {
				return nil, badUsage("-impls %s: %v", name, err)
			}
			abs, err := filepath.Abs(libPath)
			if err != nil {
				return nil, badUsage("-impls %s: %v", name, err)
			}
			if im.inst = mpis[base]; im.inst == nil {
				return nil, badUsage("-impls %s: unknown MPI %q (openmpi, mpich, or one given by -mpi or -mpicc)", name, base)
			}
			im.preload, im.base = abs, base
		case strings.HasPrefix(name, "hier-") && mpis[strings.TrimPrefix(name, "hier-")] != nil && slices.Contains(mpi.Impls, mpi.Impl(strings.TrimPrefix(name, "hier-"))):
			im.base = strings.TrimPrefix(name, "hier-")
			im.inst, im.hier = mpis[im.base], true
		case mpis[name] != nil:
			im.inst = mpis[name]
		default:
			return nil, badUsage("-impls: unknown implementation %q (openmpi, mpich, shmcoll, shmcoll@PATH, MPI+shmcoll[@LIB], hier-openmpi, hier-mpich, or an MPI given by -mpi or -mpicc)", name)
		}
		c.impls = append(c.impls, im)
	}
	if !slices.ContainsFunc(c.impls, func(p compareImpl) bool { return !p.library() }) {
		return nil, badUsage("-impls %s: shmcoll, shmcoll@PATH, MPI+shmcoll or hier-MPI must take part", *impls)
	}
	// MPI+shmcoll@LIB is called MPI+shmcoll where that is the only one
	// for the MPI (the header names the library).
	for i, p := range c.impls {
		short := p.base + "+shmcoll"
		if p.preload != "" && p.name != short &&
			!slices.ContainsFunc(c.impls, func(q compareImpl) bool { return q.name != p.name && q.preload != "" && q.base == p.base }) {
			c.impls[i].name = short
		}
	}
	return c, nil
}

// cutPreload splits "MPI+shmcoll[@LIB]".
func cutPreload(name string) (mpiName, lib string, ok bool) {
	before, after, ok := strings.Cut(name, "+shmcoll")
	if !ok || before == "" || (after != "" && !strings.HasPrefix(after, "@")) {
		return "", "", false
	}
	return before, strings.TrimPrefix(after, "@"), true
}

// prefixCommands finds an MPI's compiler wrapper and launcher under its
// installation prefix.
func prefixCommands(prefix string) (mpicc, mpirun string, err error) {
	exe := func(name string) bool {
		st, err := os.Stat(filepath.Join(prefix, "bin", name))
		return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
	}
	if !exe("mpicc") {
		return "", "", fmt.Errorf("no %s", filepath.Join(prefix, "bin", "mpicc"))
	}
	for _, run := range []string{"mpirun", "mpiexec"} {
		if exe(run) {
			return filepath.Join(prefix, "bin", "mpicc"), filepath.Join(prefix, "bin", run), nil
		}
	}
	return "", "", fmt.Errorf("no %s or mpiexec", filepath.Join(prefix, "bin", "mpirun"))
}

// siteInstallation describes the MPI whose compiler wrapper and launcher
// are mpicc and mpirun (paths, or commands on PATH). The launcher's
// --version tells Open MPI ("Open MPI", "OpenRTE", "PRRTE") from the MPICH
// family (Hydra: MPICH, MVAPICH, Intel MPI), whose launch lines differ.
func siteInstallation(mpicc, mpirun string) (mpi.Installation, error) {
	var in mpi.Installation
	var err error
	if in.MPICC, err = exec.LookPath(mpicc); err != nil {
		return in, err
	}
	if in.MPIRun, err = exec.LookPath(mpirun); err != nil {
		return in, err
	}
	out, err := exec.Command(in.MPIRun, "--version").CombinedOutput()
	v := string(out)
	switch {
	case strings.Contains(v, "Open MPI") || strings.Contains(v, "OpenRTE") || strings.Contains(v, "PRRTE"):
		in.Impl = mpi.OpenMPI
	case strings.Contains(v, "HYDRA") || strings.Contains(v, "Hydra") || strings.Contains(v, "MPICH") || strings.Contains(v, "Intel"):
		in.Impl = mpi.MPICH
	default:
		if err == nil {
			err = fmt.Errorf("neither Open MPI nor Hydra")
		}
		return in, fmt.Errorf("%s --version: %v: %.200q", in.MPIRun, err, v)
	}
	return in, nil
}

func runCompare(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseCompare(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "shmbench compare: %v\n", err)
		return 2
	}

	// Say exactly what is missing, and go on without it.
	var usable []compareImpl
	for _, p := range cfg.impls {
		if p.inst != nil {
			if err := p.inst.Err(); err != nil {
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
			if _, err := mpibench.BuildHier(ctx, p.inst.Impl); err != nil {
				fmt.Fprintf(stderr, "shmbench compare: %s: %v; comparing without it\n", p.name, err)
				continue
			}
		case p.inst != nil:
			if _, err := mpibench.BuildWith(ctx, *p.inst); err != nil {
				fmt.Fprintf(stderr, "shmbench compare: %s: %v\n", p.name, err)
				return 1
			}
		}
		built = append(built, p)
	}
	usable = built
	// Two builds of shmcoll compare without an MPI; anything else needs one.
	switch {
	case len(usable) < 2 && !slices.ContainsFunc(usable, compareImpl.library):
		fmt.Fprintf(stderr, "shmbench compare: no MPI to compare with (install nothing was tried; see the packages named above)\n")
		return 1
	case len(usable) < 2 || !slices.ContainsFunc(usable, func(p compareImpl) bool { return !p.library() }):
		fmt.Fprintf(stderr, "shmbench compare: nothing to compare with the MPI libraries (see the reasons above)\n")
		return 1
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "shmbench compare: %v\n", err)
		return 1
	}
	topo, _ := numa.Detect()
	h := hostHeader("shmbench compare", cfg.np, cfg.dtype, "sum")
	if cfg.format == "json" {
		h.Type = "run"
		b, _ := json.Marshal(h)
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		fmt.Fprintf(stdout, "# host: %s; cpu: %s (%d CPUs); simd: %s; load: %s\n", h.Host, h.CPU, h.CPUs, h.SIMD, h.Load)
		fmt.Fprintf(stdout, "# compare np=%d dtype=%s, %d rounds of %s, %v per size\n", cfg.np, cfg.dtype, cfg.rounds, implNames(usable), cfg.per)
		for _, p := range usable {
			if p.inst != nil && !slices.Contains(mpi.Impls, mpi.Impl(p.name)) && p.library() {
				fmt.Fprintf(stdout, "# %s: %s, %s (launch line of %s)\n", p.name, p.inst.MPICC, p.inst.MPIRun, p.inst.Impl)
			}
			if p.preload != "" {
				fmt.Fprintf(stdout, "# %s: LD_PRELOAD=%s\n", p.name, p.preload)
			}
		}
	}

	// Blocks: each implementation runs a group of sizes, one after the
	// other, in an order that rotates every round.
	groups := [][]int64{cfg.sizes}
	if cfg.blockBy == "size" {
		groups = nil
		for _, b := range cfg.sizes {
			groups = append(groups, []int64{b})
		}
	}
	nameWidth := 8
	for _, p := range usable {
		nameWidth = max(nameWidth, len(p.name))
	}
	var blocks []*block
	for r := range cfg.rounds {
		for g, sizes := range groups {
			for i := range usable {
				p := usable[(i+r)%len(usable)]
				b := &block{Type: "block", Round: r + 1, Impl: p.name}
				if len(groups) > 1 {
					b.Group = g + 1
				}
				if err := runBlock(ctx, cfg, b, p, exe, sizes, topo, stderr); err != nil {
					fmt.Fprintf(stderr, "shmbench compare: round %d, %s: %v\n", r+1, p.name, err)
					return 1
				}
				blocks = append(blocks, b)
				if cfg.format == "json" {
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
					fmt.Fprintf(stdout, "# round %d %-*s %-8s probe %9s, %5.1f s\n", b.Round, nameWidth, b.Impl, what, probe, b.Seconds)
				}
			}
		}
	}
	rows := compareRows(blocks, usable, cfg.rounds)
	if cfg.format == "json" {
		for _, row := range rows {
			row.NP, row.Dtype = cfg.np, cfg.dtype
			b, _ := json.Marshal(row)
			fmt.Fprintf(stdout, "%s\n", b)
		}
	} else {
		writeCompareTable(stdout, rows, usable)
	}
	if cfg.plotDir != "" {
		files, err := plotResults(cfg.plotDir, compareResults(rows, usable, cfg.np))
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
func runBlock(ctx context.Context, cfg *compareConfig, b *block, p compareImpl, exe string, sizes []int64, topo *numa.Topology, stderr io.Writer) error {
	b.ProbeNS, _ = placementNS(topo) // 0: not measured
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	start := time.Now()
	var err error
	if p.inst != nil {
		o := mpibench.Options{NP: cfg.np, Colls: cfg.colls, Sizes: sizes, Iters: cfg.iters, Time: cfg.per, Warmup: cfg.warm, Dtype: cfg.dtype,
			Hier: p.hier, NodeSize: cfg.nodeSize, Preload: p.preload, ServedBarrier: cfg.servedBarrier}
		if p.hier {
			o.Colls = slices.DeleteFunc(slices.Clone(cfg.colls), func(c string) bool { return !slices.Contains(mpibench.HierColls, c) })
		}
		if len(o.Colls) > 0 {
			err = runMPIBlock(ctx, b, *p.inst, o)
		}
	} else {
		err = runShmBlock(ctx, cfg, b, p, exe, sizes, stderr)
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

func runMPIBlock(ctx context.Context, b *block, in mpi.Installation, o mpibench.Options) error {
	if o.Warmup == 0 {
		o.Warmup = -1 // mpibench: negative means none
	}
	rep, err := mpibench.RunWith(ctx, in, o)
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

// runShmBlock runs shmbench run: this binary's launcher, or another
// build's whole command, which starts its ranks itself and writes JSON
// lines, so that each build runs its own launch protocol.
func runShmBlock(ctx context.Context, cfg *compareConfig, b *block, p compareImpl, exe string, sizes []int64, stderr io.Writer) error {
	var ss []string
	for _, s := range sizes {
		ss = append(ss, strconv.FormatInt(s, 10))
	}
	args := []string{"-np", strconv.Itoa(cfg.np), "-coll", strings.Join(cfg.colls, ","), "-sizes", strings.Join(ss, ","),
		"-time", cfg.per.String(), "-warmup", cfg.warm.String(), "-dtype", cfg.dtype, "-format", "json"}
	if cfg.iters > 0 {
		args = append(args, "-iters", strconv.Itoa(cfg.iters))
	}
	args = append(args, p.args...)
	if p.exe != "" {
		return runOtherBuild(ctx, b, p.exe, args, stderr)
	}
	rc, err := parseRun(args, stderr, io.Discard)
	if err != nil {
		return err
	}
	s, err := newSink("json", io.Discard, stderr, 0)
	if err != nil {
		return err
	}
	err = launchSweep(ctx, rc, exe, args, s, stderr)
	b.Results = s.results
	return err
}

// runOtherBuild runs "exe run args" and reads its JSON lines. A failed
// check is in the results (and exit status 1); any other failure is an
// error carrying the end of its standard error.
func runOtherBuild(ctx context.Context, b *block, exe string, args []string, stderr io.Writer) error {
	cmd := exec.CommandContext(ctx, exe, append([]string{"run"}, args...)...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	runErr := cmd.Run()
	_, results, perr := benchfmt.ReadJSON(&out)
	b.Results = results
	if runErr != nil && !slices.ContainsFunc(results, func(r benchfmt.Result) bool { return r.Check != "ok" }) {
		msg := errOut.Bytes()
		if len(msg) > 4096 {
			msg = msg[len(msg)-4096:]
		}
		return fmt.Errorf("%s: %v\n%s", strings.Join(cmd.Args, " "), runErr, msg)
	}
	return perr
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
			base, ok := row.PerRnd[p.base]
			if p.base == "" || !ok {
				continue
			}
			if row.PairRatios == nil {
				row.PairRatios, row.PairRatio, row.PairSteady = map[string][]float64{}, map[string]float64{}, map[string]float64{}
			}
			rs := make([]float64, rounds)
			var st []float64
			for r := range rounds {
				num, den := row.PerRnd[p.name][r], base[r]
				if p.baseFirst {
					num, den = den, num
				}
				if num > 0 && den > 0 {
					rs[r] = num / den
				}
				if row.Steady[r] {
					st = append(st, rs[r])
				}
			}
			k := p.ratioName()
			row.PairRatios[k], row.PairRatio[k], row.PairSteady[k] = rs, medianPositive(rs), medianPositive(st)
		}
		rows = append(rows, row)
	}
	return rows
}

// steadyProbe is how far apart (a factor) the probes of one round's blocks
// may be for the round to count as one placement: the classes the probe
// tells apart (SMT siblings, one L3, different dies) differ by more.
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
		fmt.Fprintf(w, " %*s", max(11, len(p.name)+3), p.name+"_us")
	}
	pairs := pairNames(rows, impls)
	for _, k := range pairs {
		fmt.Fprintf(w, " %*s", max(26, len(k)), k)
	}
	fmt.Fprintf(w, " %8s %11s %13s  %s\n", "ratio", "spread", "steady", "best MPI per round")
	for _, row := range rows {
		fmt.Fprintf(w, "%-20s %8s", row.Coll, benchfmt.FormatSize(row.Bytes))
		for _, p := range impls {
			fmt.Fprintf(w, " %*s", max(11, len(p.name)+3), fmtUS(row.Median[p.name]))
		}
		for _, k := range pairs {
			cell := fmtRatio(row.PairRatio[k], row.PairRatios[k])
			if st := row.PairSteady[k]; st > 0 {
				cell += fmt.Sprintf(" st %.3f", st)
			}
			fmt.Fprintf(w, " %*s", max(26, len(k)), cell)
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
		best := slices.Clone(row.Best)
		for i, b := range best {
			if b == "" {
				best[i] = "-" // no MPI in that round
			}
		}
		fmt.Fprintf(w, " %8s %11s %13s  %s\n", ratio, spread, st, strings.Join(best, ","))
	}
	fmt.Fprintln(w, "# ratio: median over rounds of shmcoll / best MPI in that round (< 1: shmcoll faster); times: median over rounds of each block's median")
	if len(pairs) > 0 {
		fmt.Fprintln(w, "# A/B: median over rounds of A / B in that round, its spread, and (st) the median over the steady rounds (< 1: A faster);")
		fmt.Fprintln(w, "#   hier-X/X and X+shmcoll/X against MPI X's own collectives, shmcoll/shmcoll@PATH this build against that one")
	}
	fmt.Fprintf(w, "# steady: the same median over the rounds whose blocks all saw one placement (probes within %.1fx)\n", steadyProbe)
}

// pairNames are the ratio columns the rows have, in the order of impls.
func pairNames(rows []*compareRow, impls []compareImpl) []string {
	var out []string
	for _, p := range impls {
		k := p.ratioName()
		if p.base != "" && slices.ContainsFunc(rows, func(r *compareRow) bool { return r.PairRatio[k] > 0 }) {
			out = append(out, k)
		}
	}
	return out
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
