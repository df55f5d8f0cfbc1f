package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/klauspost/cpuid/v2"
	"golang.org/x/term"

	"github.com/shmcoll/shmcoll/internal/benchfmt"
	"github.com/shmcoll/shmcoll/internal/probe"
	"github.com/shmcoll/shmcoll/numa"
	"github.com/shmcoll/shmcoll/simd"
)

// hostHeader describes this machine for the first line of a run. The
// placement probe runs here, before any rank spins.
func hostHeader(launcher string, np int, dtype, op string) benchfmt.Header {
	host, _ := os.Hostname()
	cpus := runtime.NumCPU()
	t, err := numa.Detect()
	if err == nil {
		cpus = len(t.CPUs)
	}
	h := benchfmt.Header{
		Tool: "shmbench", Host: host, CPU: cpuid.CPU.BrandName, CPUs: cpus,
		SIMD: simd.Impl(), Load: loadAvg(), Launcher: launcher, NP: np, Dtype: dtype, Op: op,
		Go: runtime.Version(), Time: time.Now().UTC().Format(time.RFC3339),
	}
	var perr error
	if h.ProbeNS, perr = placementNS(t); perr != nil {
		h.ProbeErr = perr.Error()
	}
	return h
}

// placementNS is the placement probe between the first two CPUs of the
// machine (not of this process's affinity, which a launcher may have
// narrowed to one CPU), or why it cannot be measured.
func placementNS(t *numa.Topology) (float64, error) {
	if t == nil || len(t.CPUs) < 2 {
		return 0, errors.New("fewer than 2 CPUs")
	}
	a, errA := t.HostCPU(t.CPUs[0].ID)
	b, errB := t.HostCPU(t.CPUs[1].ID)
	if err := errors.Join(errA, errB); err != nil {
		return 0, err
	}
	r, err := probe.Handoff(a, b, 0)
	return r.OneWayNS, err
}

// loadAvg is the first three fields of /proc/loadavg ("" where absent).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// sink receives a run's results: it writes them in the chosen format,
// advances the progress bar, and keeps them for the summary and plots.
type sink struct {
	w       benchfmt.Writer
	bar     *progress
	results []benchfmt.Result
	failed  []benchfmt.Result
	probeNS float64 // the run's placement probe, 0 if unknown
}

func newSink(format string, stdout, stderr io.Writer, total int) (*sink, error) {
	w, err := benchfmt.NewWriter(format, stdout)
	if err != nil {
		return nil, err
	}
	s := &sink{w: w}
	if total > 1 && isTerminal(stderr) {
		s.bar = &progress{w: stderr, total: total}
	}
	return s, nil
}

func (s *sink) header(h benchfmt.Header) error {
	s.probeNS = h.ProbeNS
	return s.w.Header(h)
}

func (s *sink) result(r benchfmt.Result) error {
	if s.bar != nil {
		s.bar.Clear()
	}
	s.results = append(s.results, r)
	if r.Check != "ok" {
		s.failed = append(s.failed, r)
	}
	err := s.w.Result(r)
	if s.bar != nil {
		s.bar.step(fmt.Sprintf("%s/%s %s", r.Coll, r.Algo, benchfmt.FormatSize(r.Bytes)))
	}
	return err
}

// finish closes the bar and flushes the output.
func (s *sink) finish() error {
	if s.bar != nil {
		s.bar.Clear()
	}
	return s.w.Flush()
}

// summary writes a few lines per (collective, algorithm): the time of the
// smallest size and the best bus bandwidth with its size, and the verdict
// of the checks.
func (s *sink) summary(w io.Writer) {
	type key struct{ coll, algo string }
	groups := map[key][]benchfmt.Result{}
	var keys []key
	for _, r := range s.results {
		k := key{r.Coll, r.Algo}
		if groups[k] == nil {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], r)
	}
	fmt.Fprintln(w, "# summary")
	for _, k := range keys {
		rs := groups[k]
		first, best := rs[0], rs[0]
		for _, r := range rs {
			if r.BusBW > best.BusBW {
				best = r
			}
		}
		line := fmt.Sprintf("#   %s %s np=%d: %s in %.3g µs (median)", k.coll, k.algo, first.NP, humanSize(first.Bytes), first.MedianUS)
		if s.probeNS > 0 {
			// The floor of a small collective is a few cache-line handoffs.
			line += fmt.Sprintf(" = %.1f one-way handoffs", first.MedianUS*1e3/s.probeNS)
		}
		if best.Bytes > 0 && best.BusBW > 0 {
			line += fmt.Sprintf("; best busbw %.3g GB/s at %s (%.3g µs)", best.BusBW, humanSize(best.Bytes), best.MedianUS)
		}
		fmt.Fprintln(w, line)
	}
	if len(s.failed) == 0 {
		fmt.Fprintf(w, "#   %d cases, every result checked: ok\n", len(s.results))
	} else {
		fmt.Fprintf(w, "#   %d of %d cases FAILED their check\n", len(s.failed), len(s.results))
	}
}

// humanSize writes a byte count for people: "8 B", "64 KiB", "1 MiB".
func humanSize(n int64) string {
	s := benchfmt.FormatSize(n)
	if last := s[len(s)-1]; last >= '0' && last <= '9' {
		return s + " B"
	}
	return s[:len(s)-1] + " " + s[len(s)-1:] + "iB"
}
