// Package benchfmt holds what shmbench measures and how it is written: the
// timing statistics of one (collective, size) case, the bandwidths as
// nccl-tests define them, and the table, CSV and JSON-lines formats with
// readers that parse each format back.
//
// The JSON fields are those of internal/mpibench, so that a shmcoll line and
// an MPI line of the same case compare field by field.
package benchfmt

import (
	"fmt"
	"math"
	"slices"
)

// Header is the first line of a run: where and how it ran.
type Header struct {
	Type     string  `json:"type"` // "run"
	Tool     string  `json:"tool"` // "shmbench"
	Host     string  `json:"host"`
	CPU      string  `json:"cpu"`      // CPU model name
	CPUs     int     `json:"cpus"`     // online CPUs
	SIMD     string  `json:"simd"`     // simd.Impl()
	ProbeNS  float64 `json:"probe_ns"` // one-way cache-line handoff; 0: not measured
	ProbeErr string  `json:"probe_error,omitempty"`
	Load     string  `json:"load"` // /proc/loadavg, first three fields
	Launcher string  `json:"launcher"`
	NP       int     `json:"np"`
	Dtype    string  `json:"dtype"`
	Op       string  `json:"op"`
	Go       string  `json:"go"`
	Time     string  `json:"time"` // RFC 3339, UTC
}

// Result is one (collective, algorithm, size) case. Times are those of the
// slowest rank per iteration, in microseconds; SpanUS is the median over
// iterations of the last rank's end minus the first rank's start.
type Result struct {
	Type     string  `json:"type,omitempty"` // "result"
	Coll     string  `json:"coll"`
	Algo     string  `json:"algo"`
	Chosen   string  `json:"chosen,omitempty"` // what auto chose (Algo "auto"); "algo:chosen" in table and CSV
	NP       int     `json:"np"`
	Dtype    string  `json:"dtype"`
	Op       string  `json:"op"`
	Bytes    int64   `json:"bytes"`
	Iters    int     `json:"iters"`
	MinUS    float64 `json:"min_us"`
	MedianUS float64 `json:"median_us"`
	MeanUS   float64 `json:"mean_us"`
	MaxUS    float64 `json:"max_us"`
	P99US    float64 `json:"p99_us"`
	SpanUS   float64 `json:"span_us"`
	AlgBW    float64 `json:"algbw_GBps"`
	BusBW    float64 `json:"busbw_GBps"`
	Check    string  `json:"check"` // "ok", "off" (not checked) or what was wrong
}

// Summary holds order statistics of a sample.
type Summary struct {
	N                           int
	Min, Median, Mean, Max, P99 float64
}

// Summarize returns the statistics of xs (which it sorts in place). The
// median of an even count is the mean of the middle two; p99 is the
// smallest value at or above 99 % of the sample (the element at
// ceil(0.99 n) - 1), as mpicoll.c computes it.
func Summarize(xs []float64) Summary {
	n := len(xs)
	if n == 0 {
		return Summary{}
	}
	slices.Sort(xs)
	s := Summary{N: n, Min: xs[0], Max: xs[n-1]}
	if n%2 == 1 {
		s.Median = xs[n/2]
	} else {
		s.Median = (xs[n/2-1] + xs[n/2]) / 2
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	s.Mean = sum / float64(n)
	s.P99 = xs[max(0, int(math.Ceil(float64(n)*0.99))-1)]
	return s
}

// BusFactor is the nccl-tests factor from algorithm to bus bandwidth of a
// collective on p ranks: what each rank's link must carry relative to
// bytes. Collectives nccl-tests has no test for get the factor of their
// closest relative (scan and exscan that of reduce, the v-variants that of
// their regular form).
func BusFactor(coll string, p int) float64 {
	if p <= 1 {
		return 0
	}
	switch coll {
	case "allreduce":
		return 2 * float64(p-1) / float64(p)
	case "reduce_scatter_block", "reduce_scatter", "allgather", "allgatherv",
		"alltoall", "alltoallv", "scatter", "gather":
		return float64(p-1) / float64(p)
	case "barrier":
		return 0
	}
	return 1 // bcast, reduce, scan, exscan
}

// Fill computes the result's times, bandwidths and iteration count from
// the slowest rank's time and the span of each iteration, both in
// nanoseconds (slices are sorted in place).
func (r *Result) Fill(slowestNS, spanNS []float64) {
	s := Summarize(slowestNS)
	us := func(ns float64) float64 { return ns / 1e3 }
	r.Iters = s.N
	r.MinUS, r.MedianUS, r.MeanUS, r.MaxUS, r.P99US = us(s.Min), us(s.Median), us(s.Mean), us(s.Max), us(s.P99)
	r.SpanUS = us(Summarize(spanNS).Median)
	r.AlgBW, r.BusBW = 0, 0
	if s.Median > 0 {
		r.AlgBW = float64(r.Bytes) / s.Median // bytes per ns = GB/s
		r.BusBW = r.AlgBW * BusFactor(r.Coll, r.NP)
	}
}

// Validate reports a result whose fields cannot be right.
func (r *Result) Validate() error {
	switch {
	case r.Coll == "" || r.Algo == "":
		return fmt.Errorf("benchfmt: result without collective or algorithm")
	case r.NP < 1 || r.Iters < 1 || r.Bytes < 0:
		return fmt.Errorf("benchfmt: %s: np %d, iters %d, bytes %d", r.Coll, r.NP, r.Iters, r.Bytes)
	case r.Check == "":
		return fmt.Errorf("benchfmt: %s at %d B: no check field", r.Coll, r.Bytes)
	case !(r.MinUS <= r.MedianUS && r.MedianUS <= r.MaxUS && r.P99US <= r.MaxUS):
		return fmt.Errorf("benchfmt: %s at %d B: statistics out of order", r.Coll, r.Bytes)
	}
	return nil
}
