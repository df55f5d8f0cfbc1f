// Package probe measures where the hypervisor has placed this machine's
// CPUs, cheaply enough to record next to every benchmark block: the one-way
// latency of handing a cache line from one CPU to another.
//
// Two threads, pinned to the two CPUs, take turns storing a counter that the
// other spins on (separate cache lines, like anchors/bench/pingpong.c). A
// round trip is two handoffs; the reported one-way time is the round trip
// over two, the median over several short trials. The value tells SMT
// siblings, one L3 and different CCDs apart (each class several times the
// one before), and small-message collective times follow it;
// docs/PERFORMANCE.md gives the project machine's readings.
package probe

import (
	"errors"
	"fmt"
	"time"
)

// Result is one handoff measurement.
type Result struct {
	CPUA, CPUB int
	OneWayNS   float64 // median over trials of round trip / 2
	MinNS      float64 // fastest trial: the least disturbed, best to classify placement under load
	MaxNS      float64 // slowest trial
	Trials     int
	RoundTrips int // per trial
}

func (r Result) String() string {
	return fmt.Sprintf("cpu%d<->cpu%d one-way %.1f ns (min %.1f, max %.1f, %d trials of %d round trips)",
		r.CPUA, r.CPUB, r.OneWayNS, r.MinNS, r.MaxNS, r.Trials, r.RoundTrips)
}

// ErrTimeout is returned when the peer thread never answered: its CPU was
// not available to run it.
var ErrTimeout = errors.New("probe: the peer thread did not answer")

// DefaultDuration is the measuring time when a caller passes 0.
const DefaultDuration = 50 * time.Millisecond

const trials = 7
