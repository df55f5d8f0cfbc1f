//go:build linux

package shm

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// pinTo locks the goroutine to its thread and binds the thread to cpu; it
// returns false if that is not possible. The thread stays locked: when the
// goroutine ends, the runtime ends the thread with it, so no thread bound
// to one CPU goes back to the pool, where a later fork would hand its mask
// (and a runtime.NumCPU of 1) to the child. The CPU is checked against the
// online CPUs, not runtime.NumCPU, which counts only the CPUs of the mask
// this process inherited.
func pinTo(cpu int) bool {
	if cpu < 0 || cpu >= onlineCPUs() {
		return false
	}
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	return unix.SchedSetaffinity(0, &set) == nil
}

func waitOptions() Options {
	opt := Options{SlotBytes: 1 << 20}
	if d, err := time.ParseDuration(os.Getenv("SHMCOLL_TEST_SPIN")); err == nil {
		opt.SpinFor = d
	}
	if d, err := time.ParseDuration(os.Getenv("SHMCOLL_TEST_YIELD")); err == nil {
		opt.YieldFor = d
	}
	opt.fixedSpin = os.Getenv("SHMCOLL_TEST_FIXED") == "true"
	if d, err := time.ParseDuration(os.Getenv("SHMCOLL_TEST_SLEEP")); err == nil {
		opt.sleepFor = d
	}

	return opt
}

const stopValue = math.MaxUint64

// waitModes are the wait strategies the benchmarks compare: the default
// (adaptive spin, then yield, then futex), a fixed 50us spin, yield only,
// and sleep only (futex for processes, parking for goroutines).
var waitModes = []struct {
	name        string
	spin, yield time.Duration
	fixed       bool
}{
	{"default", 0, 0, false},
	{"spin50us-fixed", 50 * time.Microsecond, 0, true},
	{"yield", -1, time.Hour, false},
	{"sleep", -1, -1, false},
}

// benchChild runs the benchmark roles in a child process.
func benchChild(role string, e *Endpoint) error {
	ctx := context.Background()
	switch role {
	case "pong":
		// Answer ping k (rank 0's counter 0) with pong k (own counter 0).
		if cpu, err := strconv.Atoi(os.Getenv("SHMCOLL_TEST_CPU")); err == nil {
			pinTo(cpu)
		}
		for k := uint64(1); ; k++ {
			if err := e.Wait(ctx, 0, 0, k); err != nil {
				return err
			}
			if e.Load(0, 0) == stopValue {
				return nil
			}
			e.Post(0, k)
		}
	case "ringhop":
		return ringHops(e)
	}
	return fmt.Errorf("unknown role %q", role)
}

// ringHops passes a token around the ring until rank 0 posts stopValue;
// each rank records the time of each of its posts in its slot.
func ringHops(e *Endpoint) error {
	ctx := context.Background()
	p, r := e.Size(), e.Rank()
	left := (r + p - 1) % p
	times := unsafe.Slice((*int64)(unsafe.Pointer(&e.Slot(r)[0])), e.SlotBytes()/8)
	for k := uint64(1); ; k++ {
		if err := e.Wait(ctx, left, 0, k); err != nil {
			return err
		}
		if e.Load(left, 0) == stopValue {
			e.Post(0, stopValue)
			return nil
		}
		if int(k) < len(times) {
			times[k] = nanotime()
		}
		e.Post(0, k)
	}
}

// spawn starts ranks 1..p-1 of role on arena name and joins as rank 0.
func spawn(b *testing.B, role string, p int, opt Options, env ...string) (*Endpoint, []*exec.Cmd) {
	name := testName()
	var cmds []*exec.Cmd
	for r := 1; r < p; r++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envRole+"="+role, fmt.Sprintf("%s=%d", EnvRank, r),
			fmt.Sprintf("%s=%d", EnvSize, p), EnvArena+"="+name, fmt.Sprint("SHMCOLL_TEST_SLOT=", opt.SlotBytes),
			fmt.Sprint("SHMCOLL_TEST_SPIN=", opt.SpinFor), fmt.Sprint("SHMCOLL_TEST_YIELD=", opt.YieldFor),
			fmt.Sprint("SHMCOLL_TEST_FIXED=", opt.fixedSpin))
		cmd.Env = append(cmd.Env, env...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	e, err := Join(context.Background(), name, 0, p, opt)
	if err != nil {
		b.Fatal(err)
	}
	return e, cmds
}

func reap(b *testing.B, e *Endpoint, cmds []*exec.Cmd) {
	for _, c := range cmds {
		if err := c.Wait(); err != nil {
			b.Error(err)
		}
	}
	e.Close()
}

// BenchmarkPingPong measures the one-way post-to-wait latency between two
// processes pinned to CPUs 0 and 1 (ns/oneway), beside the C probe of
// shared/anchors/bench/pingpong.c run in the same benchmark.
func BenchmarkPingPong(b *testing.B) {
	if runtime.NumCPU() < 2 {
		b.Skip("needs 2 CPUs")
	}
	b.Run("impl=c-probe", benchCProbe)
	for _, w := range waitModes {
		b.Run("impl=shm/wait="+w.name, func(b *testing.B) {
			opt := Options{SlotBytes: 4096, SpinFor: w.spin, YieldFor: w.yield, fixedSpin: w.fixed}
			e, cmds := spawn(b, "pong", 2, opt, "SHMCOLL_TEST_CPU=1")
			pinTo(0)
			ctx := context.Background()
			k := uint64(0)
			// Warm up, then time b.N round trips.
			for range 1000 {
				k++
				e.Post(0, k)
				if err := e.Wait(ctx, 1, 0, k); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				k++
				e.Post(0, k)
				if err := e.Wait(ctx, 1, 0, k); err != nil {
					b.Fatal(err)
				}
			}
			el := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(el.Nanoseconds())/float64(b.N)/2, "ns/oneway")
			e.Post(0, stopValue)
			reap(b, e, cmds)
		})
	}
}

var probeSummary = regexp.MustCompile(`one-way ns min ([0-9.]+) median ([0-9.]+)`)

// buildProbe compiles the C probe into a temporary directory, or skips.
func buildProbe(b *testing.B) string {
	src, _ := filepath.Abs("../../shared/anchors/bench/pingpong.c")
	if _, err := os.Stat(src); err != nil {
		b.Skipf("probe source: %v", err)
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		b.Skip("gcc not installed")
	}
	bin := filepath.Join(b.TempDir(), "pingpong")
	if out, err := exec.Command(gcc, "-O2", "-o", bin, src).CombinedOutput(); err != nil {
		b.Skipf("building the probe: %v: %s", err, out)
	}
	return bin
}

// runProbe runs the probe (CPUs 0 and 1) for n round trips per trial and
// returns its median one-way latency in ns.
func runProbe(b *testing.B, bin string, n, trials int) float64 {
	out, err := exec.Command(bin, "-n", strconv.Itoa(n), "-t", strconv.Itoa(trials)).CombinedOutput()
	if err != nil {
		b.Fatalf("probe: %v: %s", err, out)
	}
	m := probeSummary.FindSubmatch(out)
	if m == nil {
		b.Fatalf("probe output: %s", out)
	}
	med, _ := strconv.ParseFloat(string(m[2]), 64)
	return med
}

func benchCProbe(b *testing.B) {
	bin := buildProbe(b)
	b.ReportMetric(runProbe(b, bin, max(b.N, 1000), 3), "ns/oneway")
}

// BenchmarkPingPongVsProbe alternates blocks of the C probe and of shm
// post/wait (default wait, processes pinned to CPUs 0 and 1), so that both
// see the same vCPU placement and foreign load; each b.N is one pair of
// blocks. It reports both medians and the median of the per-block ratios
// (shm/probe; the target is at most 1.5).
func BenchmarkPingPongVsProbe(b *testing.B) {
	if runtime.NumCPU() < 2 {
		b.Skip("needs 2 CPUs")
	}
	const block = 20000
	bin := buildProbe(b)
	e, cmds := spawn(b, "pong", 2, Options{SlotBytes: 4096}, "SHMCOLL_TEST_CPU=1")
	pinTo(0)
	ctx := context.Background()
	k := uint64(0)
	roundTrips := func(n int) time.Duration {
		start := time.Now()
		for range n {
			k++
			e.Post(0, k)
			if err := e.Wait(ctx, 1, 0, k); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	roundTrips(1000)
	var probe, own, ratio []float64
	for range b.N {
		p := runProbe(b, bin, block, 1)
		roundTrips(1000) // the pong side wakes from its futex sleep
		s := float64(roundTrips(block).Nanoseconds()) / block / 2
		probe, own, ratio = append(probe, p), append(own, s), append(ratio, s/p)
	}
	e.Post(0, stopValue)
	reap(b, e, cmds)
	med := func(x []float64) float64 { slices.Sort(x); return x[len(x)/2] }
	b.ReportMetric(med(probe), "probe-ns/oneway")
	b.ReportMetric(med(own), "shm-ns/oneway")
	b.ReportMetric(med(ratio), "shm/probe")
}

// BenchmarkRing passes a token around a ring of processes (more ranks than
// CPUs: the oversubscribed case) and reports the median and p99 of the
// time per hop, measured from each post to the next rank's post.
func BenchmarkRing(b *testing.B) {
	for _, p := range []int{2, 4, 16} {
		for _, w := range waitModes {
			b.Run(fmt.Sprintf("impl=process/ranks=%d/wait=%s", p, w.name), func(b *testing.B) {
				opt := Options{SlotBytes: 1 << 20, SpinFor: w.spin, YieldFor: w.yield, fixedSpin: w.fixed}
				e, cmds := spawn(b, "ringhop", p, opt)
				ringBench(b, e)
				reap(b, e, cmds)
			})
			b.Run(fmt.Sprintf("impl=goroutine/ranks=%d/wait=%s", p, w.name), func(b *testing.B) {
				opt := Options{SlotBytes: 1 << 20, SpinFor: w.spin, YieldFor: w.yield, fixedSpin: w.fixed}
				eps, err := NewLocal(p, opt)
				if err != nil {
					b.Fatal(err)
				}
				done := make(chan error, p)
				for _, e := range eps[1:] {
					go func() { done <- ringHops(e) }()
				}
				ringBench(b, eps[0])
				for range p - 1 {
					if err := <-done; err != nil {
						b.Error(err)
					}
				}
			})
		}
	}
}

// ringBench runs b.N laps from rank 0 and reports per-hop statistics.
func ringBench(b *testing.B, e *Endpoint) {
	ctx := context.Background()
	p := e.Size()
	maxLaps := e.SlotBytes()/8 - 1
	n := min(b.N, maxLaps)
	times := unsafe.Slice((*int64)(unsafe.Pointer(&e.Slot(0)[0])), e.SlotBytes()/8)
	b.ResetTimer()
	start := time.Now()
	for k := uint64(1); k <= uint64(n); k++ {
		times[k] = nanotime()
		e.Post(0, k)
		if err := e.Wait(ctx, p-1, 0, k); err != nil {
			b.Fatal(err)
		}
	}
	el := time.Since(start)
	b.StopTimer()
	e.Post(0, stopValue)
	if err := e.Wait(ctx, p-1, 0, stopValue); err != nil {
		b.Fatal(err)
	}
	// Hop into rank r in lap k: its post time minus rank r-1's.
	var hops []float64
	for k := 1; k <= n; k++ {
		for r := 1; r < p; r++ {
			t := func(r int) int64 { return *(*int64)(unsafe.Pointer(&e.Slot(r)[8*k])) }
			hops = append(hops, float64(t(r)-t(r-1)))
		}
		if k < n {
			hops = append(hops, float64(times[k+1]-*(*int64)(unsafe.Pointer(&e.Slot(p - 1)[8*k]))))
		}
	}
	slices.Sort(hops)
	b.ReportMetric(float64(el.Nanoseconds())/float64(n)/float64(p), "ns/hop")
	if len(hops) > 0 {
		b.ReportMetric(hops[len(hops)/2], "p50-ns/hop")
		b.ReportMetric(hops[min(len(hops)-1, len(hops)*99/100)], "p99-ns/hop")
	}
}
