package probe

import (
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// line is a counter alone on its cache line pair (adjacent-line prefetch
// pulls lines in 128-byte pairs).
type line struct {
	v atomic.Uint64
	_ [120]byte
}

type flags struct {
	_    [128]byte
	ping line
	pong line
}

const stop = ^uint64(0)

// Handoff measures the one-way cache-line handoff latency between cpuA and
// cpuB over about d (DefaultDuration when 0). Both CPUs must be in the
// process's affinity mask and GOMAXPROCS must be at least 2. The two pinned
// threads exit afterwards, so no thread of the process keeps their affinity.
func Handoff(cpuA, cpuB int, d time.Duration) (Result, error) {
	if d <= 0 {
		d = DefaultDuration
	}
	if cpuA == cpuB {
		return Result{}, fmt.Errorf("probe: both CPUs are %d", cpuA)
	}
	var mask unix.CPUSet
	if err := unix.SchedGetaffinity(0, &mask); err != nil {
		return Result{}, fmt.Errorf("probe: sched_getaffinity: %w", err)
	}
	for _, c := range []int{cpuA, cpuB} {
		if c < 0 || c >= len(mask)*64 || !mask.IsSet(c) {
			return Result{}, fmt.Errorf("probe: CPU %d is not in this process's affinity mask", c)
		}
	}
	if runtime.GOMAXPROCS(0) < 2 {
		return Result{}, fmt.Errorf("probe: GOMAXPROCS is %d; two threads must run at once", runtime.GOMAXPROCS(0))
	}

	f := new(flags)
	peerErr := make(chan error, 1)
	giveUp := time.Now().Add(20*d + 5*time.Second) // a loaded machine may not run a pinned thread for seconds
	go func() {
		// Never unlocked: the thread exits with the goroutine, affinity and all.
		runtime.LockOSThread()
		if err := pin(cpuB); err != nil {
			f.pong.v.Store(stop)
			peerErr <- err
			return
		}
		var last uint64
		for spins := 0; ; spins++ {
			v := f.ping.v.Load()
			if v == last {
				if spins&0xffff == 0 && time.Now().After(giveUp) {
					peerErr <- ErrTimeout
					return
				}
				continue
			}
			if v == stop {
				peerErr <- nil
				return
			}
			f.pong.v.Store(v)
			last = v
		}
	}()

	type outcome struct {
		res Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		runtime.LockOSThread()
		res, err := measure(f, cpuA, cpuB, d, giveUp)
		f.ping.v.Store(stop)
		done <- outcome{res, err}
	}()
	o := <-done
	if err := <-peerErr; err != nil && o.err == nil {
		o.err = fmt.Errorf("probe: peer on CPU %d: %w", cpuB, err)
	}
	return o.res, o.err
}

// measure runs on the locked thread of CPU A.
func measure(f *flags, cpuA, cpuB int, d time.Duration, giveUp time.Time) (Result, error) {
	if err := pin(cpuA); err != nil {
		return Result{}, err
	}
	var seq uint64
	roundTrips := func(n int) (time.Duration, error) {
		t0 := time.Now()
		for i := 0; i < n; i++ {
			seq++
			f.ping.v.Store(seq)
			for spins := 1; ; spins++ {
				v := f.pong.v.Load()
				if v == seq {
					break
				}
				if v == stop {
					return 0, fmt.Errorf("probe: peer on CPU %d failed", cpuB)
				}
				if spins&0xffff == 0 && time.Now().After(giveUp) {
					return 0, ErrTimeout
				}
			}
		}
		return time.Since(t0), nil
	}
	// Calibrate: double until a batch lasts a trial's share of d.
	per := d / (trials + 1)
	n := 256
	for {
		el, err := roundTrips(n)
		if err != nil {
			return Result{}, err
		}
		if el >= per/4 || n >= 1<<24 {
			n = max(1, int(float64(n)*float64(per)/float64(max(el, 1))))
			break
		}
		n *= 2
	}
	ns := make([]float64, trials)
	for i := range ns {
		el, err := roundTrips(n)
		if err != nil {
			return Result{}, err
		}
		ns[i] = float64(el.Nanoseconds()) / float64(2*n)
	}
	slices.Sort(ns)
	return Result{CPUA: cpuA, CPUB: cpuB, OneWayNS: ns[trials/2], MinNS: ns[0], MaxNS: ns[trials-1],
		Trials: trials, RoundTrips: n}, nil
}

func pin(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("probe: pinning to CPU %d: %w", cpu, err)
	}
	return nil
}

// Placement measures Handoff between the first two CPUs this process may run
// on (CPUs 0 and 1 on the project's VM).
func Placement(d time.Duration) (Result, error) {
	var mask unix.CPUSet
	if err := unix.SchedGetaffinity(0, &mask); err != nil {
		return Result{}, fmt.Errorf("probe: sched_getaffinity: %w", err)
	}
	var cpus []int
	for c := 0; c < len(mask)*64 && len(cpus) < 2; c++ {
		if mask.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) < 2 {
		return Result{}, fmt.Errorf("probe: this process may run on %d CPU; a handoff needs 2", len(cpus))
	}
	return Handoff(cpus[0], cpus[1], d)
}
