//go:build mpi

package cgocost

import (
	"fmt"
	"testing"
)

// BenchmarkCall reports ns/call: the time inside the call from C, clock
// reads included, for a call into Go and into C, after gaps of C work
// shorter and longer than the Go runtime's sysmon takes to retake the
// caller's P and, with every P idle, to sleep until it is woken: the first
// call after such a gap wakes it (exitsyscall), which on this machine's
// virtual CPUs costs microseconds.
func BenchmarkCall(b *testing.B) {
	for _, from := range []string{"cthread", "gothread"} {
		for _, gap := range []int{0, 2000, 50000, 300000} {
			for _, into := range []string{"C", "Go"} {
				b.Run(fmt.Sprintf("from=%s/into=%s/gap=%dns", from, into, gap), func(b *testing.B) {
					ns := Calls(b.N, into == "Go", from == "cthread", gap)
					if ns <= 0 {
						b.Fatal("no thread for the calls")
					}
					b.ReportMetric(float64(ns)/float64(b.N), "ns/call")
				})
			}
		}
	}
}

// TestCalls checks that a call into Go returns what the Go function
// computes, so that the benchmark times a call that happened.
func TestCalls(t *testing.T) {
	for _, cThread := range []bool{false, true} {
		if Calls(10, true, cThread, 0) <= 0 {
			t.Fatalf("ten calls into Go (from a thread C made: %v) took no time", cThread)
		}
	}
	if got := cgocostAdd1(41); got != 42 {
		t.Fatalf("cgocostAdd1(41) = %d, want 42", got)
	}
}
