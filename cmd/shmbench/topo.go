package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/klauspost/cpuid/v2"
	"golang.org/x/sys/unix"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/shmcoll/shmcoll/internal/benchfmt"
	"github.com/shmcoll/shmcoll/numa"
	"github.com/shmcoll/shmcoll/shm"
	"github.com/shmcoll/shmcoll/simd"
)

func init() {
	register(&command{
		name:    "topo",
		summary: "topology, core-to-core latency through the channels, copy bandwidth per NUMA node",
		run:     runTopo,
	})
}

const topoUsage = `usage: shmbench topo [flags]

Prints the machine's topology, the one-way latency between every pair of
CPUs measured through shmcoll's post/wait channels (two threads pinned to
the two CPUs ping-pong on a counter; one-way = round trip / 2, median of
trials), and the copy bandwidth from a CPU of each NUMA node to memory on
each node (bytes copied per second, simd.Copy). -plot DIR writes the
latency matrix as a heatmap (PNG and SVG).

SHMCOLL_TOPOLOGY (e.g. 2x4) measures a fake topology mapped onto the host's
CPUs; pairs that land on the same host CPU are not measured.

Flags:
`

// topoReport is what topo measures; its JSON form is one object.
type topoReport struct {
	Type     string `json:"type"` // "topo"
	Host     string `json:"host"`
	CPU      string `json:"cpu"`
	Topology string `json:"topology"`
	CPUs     []int  `json:"cpus"`
	Nodes    []int  `json:"nodes"`
	// LatencyNS[i][j] is the one-way latency between CPUs[i] and CPUs[j]
	// (median over trials); 0 on the diagonal and where not measured.
	LatencyNS    [][]float64 `json:"latency_ns"`
	LatencyMinNS [][]float64 `json:"latency_min_ns"`
	// CopyGBps[i][j] is the copy bandwidth of a CPU of Nodes[i] between
	// buffers on Nodes[j] (0: the node has no CPU, or not measured).
	CopyGBps  [][]float64 `json:"copy_GBps"`
	CopyBytes int64       `json:"copy_bytes"`
	Notes     []string    `json:"notes,omitempty"`
}

func runTopo(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("topo", topoUsage, stderr)
	per := fs.Duration("time", 30*time.Millisecond, "measuring time per CPU pair and per bandwidth cell")
	size := fs.String("size", "64M", "buffer size of the copy bandwidth (0: skip)")
	format := fs.String("format", "table", "output: table or json")
	cpuList := fs.String("cpus", "", "measure only these CPUs (a list such as 0-3,8)")
	plotDir := fs.String("plot", "", "write the latency heatmap (PNG and SVG) into this directory")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "shmbench topo: %v\n", err)
		return 2
	}
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "shmbench topo: "+format+"\n", a...)
		return 2
	}
	if fs.NArg() > 0 {
		return bad("unexpected arguments: %q", fs.Args())
	}
	if *per <= 0 {
		return bad("-time %v: must be positive", *per)
	}
	if *format != "table" && *format != "json" {
		return bad("-format %q: want table or json", *format)
	}
	copyBytes, err := benchfmt.ParseSize(*size)
	if err != nil {
		return bad("-size: %v", err)
	}
	t, err := numa.Detect()
	if err != nil {
		fmt.Fprintf(stderr, "shmbench topo: %v\n", err)
		return 1
	}
	cpus := make([]int, len(t.CPUs))
	for i, c := range t.CPUs {
		cpus[i] = c.ID
	}
	if *cpuList != "" {
		want, err := numa.ParseCPUList(*cpuList)
		if err != nil {
			return bad("-cpus: %v", err)
		}
		for _, c := range want {
			if !slices.Contains(cpus, c) {
				return bad("-cpus: CPU %d is not in the topology (%s)", c, numa.FormatCPUList(cpus))
			}
		}
		cpus = want
	}
	rep, err := measureTopo(t, cpus, *per, copyBytes, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "shmbench topo: %v\n", err)
		return 1
	}
	if *format == "json" {
		b, _ := json.Marshal(rep)
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		rep.writeTable(stdout)
	}
	if *plotDir != "" {
		files, err := rep.heatmap(*plotDir)
		if err != nil {
			fmt.Fprintf(stderr, "shmbench topo: plot: %v\n", err)
			return 1
		}
		fmt.Fprintf(stderr, "shmbench topo: wrote %s\n", strings.Join(files, ", "))
	}
	return 0
}

func measureTopo(t *numa.Topology, cpus []int, per time.Duration, copyBytes int64, stderr io.Writer) (*topoReport, error) {
	host, _ := os.Hostname()
	rep := &topoReport{Type: "topo", Host: host, CPU: cpuid.CPU.BrandName, Topology: t.String(), CPUs: cpus, CopyBytes: copyBytes}
	n := len(cpus)
	rep.LatencyNS, rep.LatencyMinNS = square(n), square(n)
	pairs := n * (n - 1) / 2
	done := 0
	for i := range n {
		for j := i + 1; j < n; j++ {
			hi, _ := t.HostCPU(cpus[i])
			hj, _ := t.HostCPU(cpus[j])
			done++
			if hi == hj {
				rep.note(fmt.Sprintf("CPUs %d and %d are both host CPU %d: not measured", cpus[i], cpus[j], hi))
				continue
			}
			if isTerminal(stderr) {
				fmt.Fprintf(stderr, "\rlatency: pair %d of %d", done, pairs)
			}
			med, lo, err := channelLatency(t, cpus[i], cpus[j], per)
			if err != nil {
				rep.note(fmt.Sprintf("CPUs %d and %d: %v", cpus[i], cpus[j], err))
				continue
			}
			rep.LatencyNS[i][j], rep.LatencyNS[j][i] = med, med
			rep.LatencyMinNS[i][j], rep.LatencyMinNS[j][i] = lo, lo
		}
	}
	if isTerminal(stderr) && pairs > 0 {
		fmt.Fprint(stderr, "\r\033[K")
	}
	for _, nd := range t.Nodes {
		rep.Nodes = append(rep.Nodes, nd.ID)
	}
	if copyBytes <= 0 {
		return rep, nil
	}
	rep.CopyGBps = square(len(t.Nodes))
	for i, from := range t.Nodes {
		if len(from.CPUs) == 0 {
			continue
		}
		for j, to := range t.Nodes {
			bw, err := copyBandwidth(t, from.CPUs[0], to.ID, int(copyBytes), per)
			if err != nil {
				rep.note(fmt.Sprintf("copy from CPU %d to node %d: %v", from.CPUs[0], to.ID, err))
				continue
			}
			rep.CopyGBps[i][j] = bw
		}
	}
	return rep, nil
}

func (r *topoReport) note(s string) {
	if !slices.Contains(r.Notes, s) {
		r.Notes = append(r.Notes, s)
	}
}

func square(n int) [][]float64 {
	m := make([][]float64, n)
	for i := range m {
		m[i] = make([]float64, n)
	}
	return m
}

// channelLatency measures the one-way latency between CPUs a and b of t
// through an in-process arena's post/wait channel: a thread pinned to a
// posts a counter, a thread pinned to b waits for it and posts its own,
// which the first waits for. It returns the median and the minimum over
// trials of round trip / 2, in ns.
func channelLatency(t *numa.Topology, a, b int, d time.Duration) (median, least float64, err error) {
	// Spin only: a handoff that yields or sleeps measures the scheduler.
	eps, err := shm.NewLocal(2, shm.Options{SlotBytes: 4096, SpinFor: time.Hour, YieldFor: -1})
	if err != nil {
		return 0, 0, err
	}
	defer eps[0].Close()
	defer eps[1].Close()
	// The deadline only guards against a peer that never runs; a loaded
	// machine may stretch each handoff to a scheduler tick.
	ctx, cancel := context.WithTimeout(context.Background(), 20*d+time.Minute)
	defer cancel()

	var stop atomic.Bool
	peer := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the pinned thread exits with the goroutine
		if err := t.PinThread(b); err != nil {
			peer <- err
			eps[1].Abort(err)
			return
		}
		for i := uint64(1); ; i++ {
			if err := eps[1].Wait(ctx, 0, 0, i); err != nil {
				peer <- err
				return
			}
			if stop.Load() {
				peer <- nil
				return
			}
			eps[1].Post(0, i)
		}
	}()
	type out struct {
		med, min float64
		err      error
	}
	res := make(chan out, 1)
	go func() {
		runtime.LockOSThread()
		if err := t.PinThread(a); err != nil {
			res <- out{err: err}
			return
		}
		var i uint64
		roundTrips := func(n int) (time.Duration, error) {
			start := time.Now()
			for range n {
				i++
				eps[0].Post(0, i)
				if err := eps[0].Wait(ctx, 1, 0, i); err != nil {
					return 0, err
				}
			}
			return time.Since(start), nil
		}
		// Warm up for about d/8 and size the trials from it.
		var el time.Duration
		done := 0
		for done < 1000 && el < d/8 {
			e, err := roundTrips(10)
			if err != nil {
				res <- out{err: err}
				return
			}
			el += e
			done += 10
		}
		const trials = 7
		n := max(10, int(int64(d)/trials*int64(done)/max(int64(el), 1)))
		var oneWay []float64
		for range trials {
			el, err := roundTrips(n)
			if err != nil {
				res <- out{err: err}
				return
			}
			oneWay = append(oneWay, float64(el.Nanoseconds())/float64(n)/2)
		}
		stop.Store(true)
		eps[0].Post(0, i+1)
		s := benchfmt.Summarize(oneWay)
		res <- out{med: s.Median, min: s.Min}
	}()
	// The first to fail cancels the other's waits.
	var r out
	var peerErr error
	select {
	case r = <-res:
		if r.err != nil {
			cancel()
		}
		peerErr = <-peer
	case peerErr = <-peer:
		if peerErr != nil {
			cancel()
		}
		r = <-res
	}
	if r.err == nil {
		r.err = peerErr
	}
	if r.err != nil {
		return 0, 0, r.err
	}
	return r.med, r.min, nil
}

// copyBandwidth copies between two buffers of size bytes on NUMA node
// node, from a thread pinned to cpu, for about d, and returns the median
// rate in GB/s (1e9 bytes copied per second).
func copyBandwidth(t *numa.Topology, cpu, node, size int, d time.Duration) (float64, error) {
	type out struct {
		bw  float64
		err error
	}
	res := make(chan out, 1)
	go func() {
		runtime.LockOSThread()
		if err := t.PinThread(cpu); err != nil {
			res <- out{err: err}
			return
		}
		bufs := make([][]byte, 2)
		for i := range bufs {
			b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
			if err != nil {
				res <- out{err: err}
				return
			}
			defer unix.Munmap(b)
			if len(t.Nodes) > 1 {
				if err := t.BindMemory(b, node); err != nil {
					res <- out{err: err}
					return
				}
			}
			for j := range b { // fault in, outside the timing
				b[j] = byte(j)
			}
			bufs[i] = b
		}
		var rates []float64
		deadline := time.Now().Add(d)
		for len(rates) < 3 || (time.Now().Before(deadline) && len(rates) < 1000) {
			start := time.Now()
			simd.Copy(bufs[1], bufs[0])
			el := time.Since(start)
			rates = append(rates, float64(size)/float64(max(el.Nanoseconds(), 1)))
		}
		res <- out{bw: benchfmt.Summarize(rates).Median}
	}()
	r := <-res
	return r.bw, r.err
}

// writeTable prints the report for people.
func (r *topoReport) writeTable(w io.Writer) {
	fmt.Fprintf(w, "# host: %s; cpu: %s\n", r.Host, r.CPU)
	fmt.Fprintf(w, "topology: %s\n", r.Topology)
	fmt.Fprintf(w, "\none-way latency through the channels, ns (median of trials; row and column: CPU)\n")
	fmt.Fprintf(w, "%6s", "")
	for _, c := range r.CPUs {
		fmt.Fprintf(w, " %7d", c)
	}
	fmt.Fprintln(w)
	var all []float64
	for i, c := range r.CPUs {
		fmt.Fprintf(w, "%6d", c)
		for j := range r.CPUs {
			switch v := r.LatencyNS[i][j]; {
			case i == j:
				fmt.Fprintf(w, " %7s", "-")
			case v == 0:
				fmt.Fprintf(w, " %7s", "n/a")
			default:
				fmt.Fprintf(w, " %7.1f", v)
				if j > i {
					all = append(all, v)
				}
			}
		}
		fmt.Fprintln(w)
	}
	if len(all) > 0 {
		s := benchfmt.Summarize(all)
		fmt.Fprintf(w, "pairs: %d; min %.1f ns, median %.1f ns, max %.1f ns\n", s.N, s.Min, s.Median, s.Max)
	}
	if r.CopyGBps != nil {
		fmt.Fprintf(w, "\ncopy bandwidth, GB/s of %s copied (row: node of the CPU, column: node of the memory)\n", humanSize(r.CopyBytes))
		fmt.Fprintf(w, "%6s", "")
		for _, n := range r.Nodes {
			fmt.Fprintf(w, " %7s", fmt.Sprintf("node%d", n))
		}
		fmt.Fprintln(w)
		for i, n := range r.Nodes {
			fmt.Fprintf(w, "%6s", fmt.Sprintf("node%d", n))
			for j := range r.Nodes {
				if v := r.CopyGBps[i][j]; v > 0 {
					fmt.Fprintf(w, " %7.2f", v)
				} else {
					fmt.Fprintf(w, " %7s", "n/a")
				}
			}
			fmt.Fprintln(w)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

// latencyGrid is the latency matrix as a heatmap grid; cells that were
// not measured are NaN (drawn blank).
type latencyGrid struct{ r *topoReport }

func (g latencyGrid) Dims() (c, r int) { return len(g.r.CPUs), len(g.r.CPUs) }
func (g latencyGrid) X(c int) float64  { return float64(c) }
func (g latencyGrid) Y(r int) float64  { return float64(r) }
func (g latencyGrid) Z(c, r int) float64 {
	if v := g.r.LatencyNS[r][c]; v > 0 {
		return v
	}
	return math.NaN()
}

// heatmap writes the latency matrix as PNG and SVG into dir.
func (r *topoReport) heatmap(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for i := range r.LatencyNS {
		for _, v := range r.LatencyNS[i] {
			if v > 0 {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 1) {
		return nil, fmt.Errorf("no CPU pair was measured")
	}
	if hi <= lo {
		hi = lo + 1
	}
	pal := moreland.SmoothBlueRed()
	pal.SetMin(lo)
	pal.SetMax(hi)
	hm := plotter.NewHeatMap(latencyGrid{r}, pal.Palette(64))
	hm.Min, hm.Max = lo, hi
	hm.NaN = nil
	p := plot.New()
	p.Title.Text = fmt.Sprintf("one-way latency through shmcoll channels, ns (%.0f to %.0f)", lo, hi)
	p.X.Label.Text = "CPU"
	p.Y.Label.Text = "CPU"
	p.Add(hm)
	ticks := cpuTicks(r.CPUs)
	p.X.Tick.Marker, p.Y.Tick.Marker = ticks, ticks
	// A legend of the colour scale beside the matrix.
	for _, v := range []float64{lo, (lo + hi) / 2, hi} {
		c, _ := pal.At(v)
		box, _ := plotter.NewPolygon(plotter.XYs{})
		box.Color = c
		box.LineStyle.Color = c
		p.Legend.Add(fmt.Sprintf("%.0f ns", v), box)
	}
	p.Legend.Top = true
	var files []string
	side := vg.Length(max(4, min(12, len(r.CPUs)/4+4))) * vg.Inch
	for _, ext := range []string{"png", "svg"} {
		f := filepath.Join(dir, "topo_latency."+ext)
		if err := p.Save(side+vg.Inch, side, f); err != nil {
			return files, err
		}
		files = append(files, f)
	}
	return files, nil
}

// cpuTicks labels the matrix cells with their CPU numbers (at most ~16
// labels).
type cpuTicks []int

func (c cpuTicks) Ticks(lo, hi float64) []plot.Tick {
	step := max(1, len(c)/16)
	var ts []plot.Tick
	for i := 0; i < len(c); i += step {
		ts = append(ts, plot.Tick{Value: float64(i), Label: fmt.Sprint(c[i])})
	}
	return ts
}
