package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

func init() {
	register(&command{
		name:    "plot",
		summary: "chart the ratios of compare's JSON output against size, a line per np",
		run:     runPlot,
	})
}

const plotUsage = `usage: shmbench plot -compare FILE[,FILE...] [flags]

Reads what shmbench compare -format json wrote (one file per np, or several
runs at one np; - is standard input) and draws, per collective, the median
over rounds of the per-round ratio shmcoll / faster MPI against the message
size, a line per np, with a line at 1 (below it shmcoll is faster). The
collectives are panels of one PNG image.

Without an MPI in the comparison, the ratio is the one other ratio the files
have (shmcoll/shmcoll@PATH, hier-X/X, X+shmcoll/X); -ratio picks one by name
where there are several.

Placement: compare runs a probe (one-way cache-line handoff between the first
two CPUs) before each block. -placement steady keeps the rounds whose blocks
all saw one placement; -near NS splits the rounds into those whose probes
were all below NS nanoseconds (the two CPUs close: one L3) and those whose
probes were all at or above it (farther: different dies), a line each.

Flags:
`

// plotConfig is a parsed shmbench plot command line.
type plotConfig struct {
	files     []string
	out       string
	ratio     string
	placement string
	nearNS    float64
}

func parsePlot(args []string, stderr io.Writer) (*plotConfig, error) {
	fs := newFlagSet("plot", plotUsage, stderr)
	files := fs.String("compare", "", "compare's JSON output `files`, comma-separated (- is standard input)")
	out := fs.String("o", "ratio.png", "the PNG `file` to write")
	ratio := fs.String("ratio", "", "the ratio to draw, by its column `name` in compare's table, such as shmcoll/shmcoll@PATH (empty: shmcoll / faster MPI, or the only other ratio)")
	placement := fs.String("placement", "all", "the rounds drawn: all, or steady (those whose blocks all saw one placement)")
	near := fs.Float64("near", 0, "split the rounds at this probe time (`ns`): all probes below it, all at or above it; a line each")
	if err := fs.parse(args); err != nil {
		return nil, err
	}
	c := &plotConfig{out: *out, ratio: *ratio, placement: *placement, nearNS: *near}
	switch {
	case *files == "":
		return nil, badUsage("-compare: name compare's JSON output (shmbench compare -format json > FILE)")
	case c.placement != "all" && c.placement != "steady":
		return nil, badUsage("-placement %q: want all or steady", c.placement)
	case c.nearNS < 0 || math.IsNaN(c.nearNS):
		return nil, badUsage("-near %v: want a probe time in ns, > 0", c.nearNS)
	case c.nearNS > 0 && c.placement == "steady":
		return nil, badUsage("-near and -placement steady both choose rounds: give one")
	case !strings.HasSuffix(strings.ToLower(c.out), ".png"):
		return nil, badUsage("-o %q: the output is PNG, name it .png", c.out)
	}
	c.files = strings.Split(*files, ",")
	for _, f := range c.files {
		if f == "" {
			return nil, badUsage("-compare %q: an empty file name", *files)
		}
	}
	return c, nil
}

func runPlot(args []string, stdout, stderr io.Writer) int {
	cfg, err := parsePlot(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "shmbench plot: %v\n", err)
		return 2
	}
	var runs []*compareRun
	for _, name := range cfg.files {
		r, err := readCompareFile(name)
		if err != nil {
			fmt.Fprintf(stderr, "shmbench plot: %v\n", err)
			return 1
		}
		runs = append(runs, r)
	}
	if err := plotCompare(cfg, runs); err != nil {
		fmt.Fprintf(stderr, "shmbench plot: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "shmbench plot: wrote %s\n", cfg.out)
	return 0
}

// compareRun is one compare output: its blocks and rows.
type compareRun struct {
	name   string
	blocks []block
	rows   []compareRow
}

func readCompareFile(name string) (*compareRun, error) {
	var data []byte
	var err error
	if name == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(name)
	}
	if err != nil {
		return nil, err
	}
	r, err := readCompare(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	r.name = name
	return r, nil
}

// readCompare reads compare's JSON lines: a run header, block lines, then
// a line per (collective, size).
func readCompare(rd io.Reader) (*compareRun, error) {
	r := &compareRun{}
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var kind struct{ Type string }
		if err := json.Unmarshal(line, &kind); err != nil {
			return nil, fmt.Errorf("line %d: %v (not compare -format json output)", n, err)
		}
		var err error
		switch kind.Type {
		case "run":
		case "block":
			var b block
			err = json.Unmarshal(line, &b)
			r.blocks = append(r.blocks, b)
		case "compare":
			var row compareRow
			if err = json.Unmarshal(line, &row); err == nil && (row.NP < 1 || row.Rounds < 1 || row.Coll == "") {
				err = fmt.Errorf("a compare line without np, rounds or collective")
			}
			r.rows = append(r.rows, row)
		default:
			err = fmt.Errorf("type %q: not compare -format json output", kind.Type)
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(r.rows) == 0 {
		return nil, errors.New("no compare lines (shmbench compare -format json writes them after its blocks)")
	}
	return r, nil
}

// ratioSeries is one line of a panel.
type ratioSeries struct {
	label string
	np    int
	class int // 0: all rounds (or steady); with -near, 1 close and 2 far
	xys   plotter.XYs
}

// mpiRatio names the ratio of shmcoll to the faster MPI.
const mpiRatio = "shmcoll / faster MPI"

// chooseRatio is the ratio to draw: -ratio's, else shmcoll / faster MPI
// where any row has it, else the one other ratio the rows have.
func chooseRatio(want string, runs []*compareRun) (string, error) {
	var others []string
	for _, run := range runs {
		for _, row := range run.rows {
			if want == "" && medianPositive(row.Ratios) > 0 {
				return mpiRatio, nil
			}
			for k, v := range row.PairRatios {
				if medianPositive(v) > 0 && !slices.Contains(others, k) {
					others = append(others, k)
				}
			}
		}
	}
	switch {
	case want != "" && !slices.Contains(others, want):
		return "", fmt.Errorf("-ratio %s: no row of the files has that ratio (they have: %s)", want, strings.Join(others, ", "))
	case want != "":
		return want, nil
	case len(others) == 1:
		return others[0], nil
	case len(others) == 0:
		return "", errors.New("nothing to chart: no row has a ratio of shmcoll to an MPI or another ratio")
	}
	sort.Strings(others)
	return "", fmt.Errorf("no ratio of shmcoll to an MPI, and several others (%s): pick one with -ratio", strings.Join(others, ", "))
}

// roundRatios is row's per-round ratio named name (nil: none).
func roundRatios(row *compareRow, name string) []float64 {
	if name == mpiRatio {
		return row.Ratios
	}
	return row.PairRatios[name]
}

// roundProbes is, per round, the range of the probes of the blocks that
// measured row's size (lo 0: a block without a probe).
func roundProbes(run *compareRun, row *compareRow) (lo, hi []float64) {
	group, found := 0, false
	for _, b := range run.blocks {
		if found {
			break
		}
		for _, res := range b.Results {
			if res.Coll == row.Coll && res.Bytes == row.Bytes {
				group, found = b.Group, true
				break
			}
		}
	}
	lo, hi = make([]float64, row.Rounds), make([]float64, row.Rounds)
	seen := make([]bool, row.Rounds)
	for _, b := range run.blocks {
		r := b.Round - 1
		if !found || b.Group != group || r < 0 || r >= row.Rounds {
			continue
		}
		if !seen[r] || b.ProbeNS < lo[r] {
			lo[r] = b.ProbeNS
		}
		hi[r], seen[r] = max(hi[r], b.ProbeNS), true
	}
	return lo, hi
}

// ratioLines groups the runs' rows by collective, each a set of lines (np,
// and with -near the placement class), sorted by np. It returns the
// collectives in the order of the first run, and the name of the ratio
// drawn.
func ratioLines(cfg *plotConfig, runs []*compareRun) ([]string, map[string][]*ratioSeries, string, error) {
	name, err := chooseRatio(cfg.ratio, runs)
	if err != nil {
		return nil, nil, "", err
	}
	var colls []string
	lines := map[string][]*ratioSeries{}
	for _, run := range runs {
		for i := range run.rows {
			row := &run.rows[i]
			if row.Bytes <= 0 {
				continue // barrier: no size axis
			}
			per := roundRatios(row, name)
			if per == nil {
				continue
			}
			if !slices.Contains(colls, row.Coll) {
				colls = append(colls, row.Coll)
			}
			type pick struct {
				class int
				keep  func(r int) bool
			}
			picks := []pick{{0, func(int) bool { return true }}}
			switch {
			case cfg.placement == "steady":
				picks[0].keep = func(r int) bool { return r < len(row.Steady) && row.Steady[r] }
			case cfg.nearNS > 0:
				lo, hi := roundProbes(run, row)
				picks = []pick{
					{1, func(r int) bool { return lo[r] > 0 && hi[r] < cfg.nearNS }},
					{2, func(r int) bool { return lo[r] >= cfg.nearNS }},
				}
			}
			for _, p := range picks {
				var vs []float64
				for r, v := range per {
					if p.keep(r) {
						vs = append(vs, v)
					}
				}
				m := medianPositive(vs)
				if m <= 0 {
					continue
				}
				var s *ratioSeries
				for _, x := range lines[row.Coll] {
					if x.np == row.NP && x.class == p.class {
						s = x
					}
				}
				if s == nil {
					s = &ratioSeries{np: row.NP, class: p.class, label: fmt.Sprintf("np=%d", row.NP)}
					switch p.class {
					case 1:
						s.label += fmt.Sprintf(", probe < %g ns", cfg.nearNS)
					case 2:
						s.label += fmt.Sprintf(", probe >= %g ns", cfg.nearNS)
					}
					lines[row.Coll] = append(lines[row.Coll], s)
				}
				s.xys = append(s.xys, plotter.XY{X: float64(row.Bytes), Y: m})
			}
		}
	}
	if len(colls) == 0 {
		return nil, nil, "", fmt.Errorf("nothing to chart: no row with a size has %s", name)
	}
	for _, ls := range lines {
		sort.SliceStable(ls, func(i, j int) bool {
			if ls[i].np != ls[j].np {
				return ls[i].np < ls[j].np
			}
			return ls[i].class < ls[j].class
		})
		for _, s := range ls {
			sort.Slice(s.xys, func(i, j int) bool { return s.xys[i].X < s.xys[j].X })
			// Two runs at one np measuring one size: keep both points'
			// median in one place, the line stays a function of size.
			s.xys = mergeSizes(s.xys)
		}
	}
	return colls, lines, name, nil
}

// mergeSizes replaces the points of a sorted line that share a size by
// their median.
func mergeSizes(xys plotter.XYs) plotter.XYs {
	var out plotter.XYs
	for i := 0; i < len(xys); {
		j := i
		var ys []float64
		for ; j < len(xys) && xys[j].X == xys[i].X; j++ {
			ys = append(ys, xys[j].Y)
		}
		out = append(out, plotter.XY{X: xys[i].X, Y: medianPositive(ys)})
		i = j
	}
	return out
}

// Panel size and layout of the ratio image.
const (
	ratioPanelW = 6 * vg.Inch
	ratioPanelH = 4 * vg.Inch
	ratioDPI    = 96
)

// ratioGrid is the columns and rows of panels for n collectives.
func ratioGrid(n int) (cols, rows int) {
	cols = min(n, 2)
	return cols, (n + cols - 1) / cols
}

// plotCompare writes cfg.out: a panel per collective, the ratio against
// size, a line per np.
func plotCompare(cfg *plotConfig, runs []*compareRun) error {
	colls, lines, name, err := ratioLines(cfg, runs)
	if err != nil {
		return err
	}
	cols, rows := ratioGrid(len(colls))
	plots := make([][]*plot.Plot, rows)
	for i := range plots {
		plots[i] = make([]*plot.Plot, cols)
	}
	yLabel := name
	if cfg.placement == "steady" {
		yLabel += " (steady rounds)"
	}
	for k, coll := range colls {
		p := plot.New()
		p.Title.Text = coll
		p.X.Label.Text = "bytes"
		p.Y.Label.Text = yLabel + ", median over rounds"
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = sizeTicks{}
		p.Add(plotter.NewGrid())
		hi := 1.0
		xlo, xhi := math.Inf(1), math.Inf(-1)
		var args []any
		for _, s := range lines[coll] {
			args = append(args, s.label, s.xys)
			for _, xy := range s.xys {
				hi = max(hi, xy.Y)
				xlo, xhi = min(xlo, xy.X), max(xhi, xy.X)
			}
		}
		if err := plotutil.AddLinePoints(p, args...); err != nil {
			return err
		}
		if xlo == xhi { // one size: widen the axis so that the point shows
			xlo, xhi = xlo/2, xhi*2
		}
		one, err := plotter.NewLine(plotter.XYs{{X: xlo, Y: 1}, {X: xhi, Y: 1}})
		if err != nil {
			return err
		}
		one.Color = color.Gray{Y: 64}
		one.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		p.Add(one)
		p.X.Min, p.X.Max = xlo, xhi
		// Room above the data for the legend, a row per line.
		p.Y.Min, p.Y.Max = 0, hi*(1+0.12*float64(len(lines[coll])+1))
		p.Legend.Top, p.Legend.Left = true, true
		p.Legend.XOffs, p.Legend.YOffs = vg.Points(8), -vg.Points(4)
		plots[k/cols][k%cols] = p
	}
	img := vgimg.NewWith(vgimg.UseWH(vg.Length(cols)*ratioPanelW, vg.Length(rows)*ratioPanelH), vgimg.UseDPI(ratioDPI))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		for j, p := range plots[i] {
			if p != nil {
				p.Draw(canvases[i][j])
			}
		}
	}
	f, err := os.Create(cfg.out)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
