package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/shmcoll/shmcoll/internal/benchfmt"
)

// errNothingToChart: every result is a barrier, which has no size axis.
var errNothingToChart = errors.New("nothing to chart: no result has a size (barrier only)")

// plotResults writes, per collective, the median latency and the bus
// bandwidth against the size, a line per algorithm, as PNG and SVG into
// dir. It returns the files written.
func plotResults(dir string, rs []benchfmt.Result) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	byColl := map[string]map[string][]benchfmt.Result{}
	var colls []string
	var algoOrder []string
	for _, r := range rs {
		if byColl[r.Coll] == nil {
			byColl[r.Coll] = map[string][]benchfmt.Result{}
			colls = append(colls, r.Coll)
		}
		byColl[r.Coll][r.Algo] = append(byColl[r.Coll][r.Algo], r)
		found := false
		for _, a := range algoOrder {
			found = found || a == r.Algo
		}
		if !found {
			algoOrder = append(algoOrder, r.Algo)
		}
	}
	var files []string
	for _, coll := range colls {
		lines := map[string]plotter.XYs{}
		bws := map[string]plotter.XYs{}
		np := 0
		for algo, list := range byColl[coll] {
			sort.Slice(list, func(i, j int) bool { return list[i].Bytes < list[j].Bytes })
			for _, r := range list {
				np = r.NP
				if r.Bytes <= 0 {
					continue // barrier: no size axis
				}
				lines[algo] = append(lines[algo], plotter.XY{X: float64(r.Bytes), Y: r.MedianUS})
				bws[algo] = append(bws[algo], plotter.XY{X: float64(r.Bytes), Y: r.BusBW})
			}
		}
		if len(lines) == 0 {
			continue
		}
		for _, chart := range []struct {
			name, ylabel string
			data         map[string]plotter.XYs
			logY         bool
		}{
			{"latency", "median time (µs, slowest rank)", lines, true},
			{"bandwidth", "bus bandwidth (GB/s)", bws, false},
		} {
			p := plot.New()
			p.Title.Text = fmt.Sprintf("%s, %d ranks: %s", coll, np, chart.name)
			p.X.Label.Text = "bytes"
			p.Y.Label.Text = chart.ylabel
			p.X.Scale = plot.LogScale{}
			p.X.Tick.Marker = sizeTicks{}
			if chart.logY && positive(chart.data) {
				p.Y.Scale = plot.LogScale{}
				p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
			}
			p.Y.Min, p.Y.Max = yRange(chart.data, chart.logY)
			p.Add(plotter.NewGrid())
			var args []any
			for _, algo := range algoOrder {
				if d, ok := chart.data[algo]; ok {
					args = append(args, algo, d)
				}
			}
			if err := plotutil.AddLinePoints(p, args...); err != nil {
				return files, err
			}
			// Both curves are low on the left: the legend goes top left.
			p.Legend.Top, p.Legend.Left = true, true
			p.Legend.XOffs, p.Legend.YOffs = vg.Points(8), -vg.Points(12)
			for _, ext := range []string{"png", "svg"} {
				f := filepath.Join(dir, fmt.Sprintf("%s_np%d_%s.%s", coll, np, chart.name, ext))
				if err := p.Save(8*vg.Inch, 5*vg.Inch, f); err != nil {
					return files, err
				}
				files = append(files, f)
			}
		}
	}
	if len(files) == 0 {
		return nil, errNothingToChart
	}
	return files, nil
}

func positive(data map[string]plotter.XYs) bool {
	for _, xys := range data {
		for _, xy := range xys {
			if xy.Y <= 0 {
				return false
			}
		}
	}
	return true
}

// sizeTicks marks powers of 4 bytes on a log axis with their binary size.
type sizeTicks struct{}

func (sizeTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for x := 1.0; x <= hi*1.0001; x *= 4 {
		if x >= lo/1.0001 {
			ts = append(ts, plot.Tick{Value: x, Label: benchfmt.FormatSize(int64(x))})
		}
	}
	return ts
}

// yRange spans the data with a margin (a factor on a log axis) above for
// the legend.
func yRange(data map[string]plotter.XYs, logY bool) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, xys := range data {
		for _, xy := range xys {
			lo, hi = min(lo, xy.Y), max(hi, xy.Y)
		}
	}
	if logY && lo > 0 {
		return lo / 1.5, hi * 4
	}
	return 0, hi * 1.25
}
