package probe

import (
	"math"
	"runtime"
	"testing"
	"time"
)

func TestPlacement(t *testing.T) {
	if runtime.NumCPU() < 2 || runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs two CPUs")
	}
	r, err := Placement(30 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if r.CPUA == r.CPUB || r.Trials != trials || r.RoundTrips < 1 {
		t.Errorf("result %+v", r)
	}
	if !(r.MinNS > 0 && r.MinNS <= r.OneWayNS && r.OneWayNS <= r.MaxNS) || math.IsInf(r.MaxNS, 0) {
		t.Errorf("inconsistent statistics %v", r)
	}
	t.Log(r)
}

func TestHandoffErrors(t *testing.T) {
	if _, err := Handoff(0, 0, time.Millisecond); err == nil {
		t.Error("same CPU accepted")
	}
	if _, err := Handoff(0, 1<<20, time.Millisecond); err == nil {
		t.Error("CPU outside the mask accepted")
	}
	if _, err := Handoff(-1, 0, time.Millisecond); err == nil {
		t.Error("negative CPU accepted")
	}
	if runtime.NumCPU() >= 2 {
		old := runtime.GOMAXPROCS(1)
		_, err := Handoff(0, 1, time.Millisecond)
		runtime.GOMAXPROCS(old)
		if err == nil {
			t.Error("GOMAXPROCS 1 accepted")
		}
	}
}

func BenchmarkPlacement(b *testing.B) {
	if runtime.NumCPU() < 2 {
		b.Skip("needs two CPUs")
	}
	var r Result
	for b.Loop() {
		var err error
		if r, err = Placement(0); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(r.OneWayNS, "oneway-ns")
}
