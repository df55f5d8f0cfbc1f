package tests

// Load: a randomized soak across real processes under shmrun. Every call is
// drawn from a seed shared by the ranks (collective, type, operator, size,
// root, in-place), the algorithm of each collective is pinned at random per
// run, and every element of every result is checked. RSS and goroutine
// counts must stay flat. A second run puts 16 ranks on this two-core
// machine and requires progress on every rank (no livelock).
//
// Duration: 20s and 15s (-short: 8s and 6s); SHMCOLL_SOAK=<duration> sets
// both; SHMCOLL_LONG=1 runs 100,000 collectives on 4 ranks and 2 minutes on
// 16.

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shmcoll/shmcoll/collectives"
	"github.com/shmcoll/shmcoll/tests/internal/callmix"
)

type soakResult struct {
	calls    int64
	secs     float64
	rssEarly int64 // KiB, first sample after a quarter of the run
	rssEnd   int64
	gorEarly int64
	gorEnd   int64
}

// soak runs np ranks for d (or calls calls) and checks every rank's DONE.
func soak(t *testing.T, np int, d time.Duration, calls int, maxN int, seed uint64) []soakResult {
	t.Helper()
	shmrun, rank := tool(t, "cmd/shmrun"), tool(t, "tests/internal/faultrank")
	before := shmSnapshot()
	args := []string{"-np", strconv.Itoa(np), "-bind", "none", "-slot", "256K", "-timeout", "2h",
		rank, "-mode", "stream", "-seed", strconv.FormatUint(seed, 10), "-maxn", strconv.Itoa(maxN), "-slot", "262144"}
	if calls > 0 {
		args = append(args, "-calls", strconv.Itoa(calls))
	} else {
		args = append(args, "-duration", d.String())
	}
	cmd := exec.Command(shmrun, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		t.Errorf("np=%d seed=%d: shmrun: %v\nstdout:\n%s\nstderr:\n%s", np, seed, err, lastLines(stdout.String(), 40), stderr.String())
	}
	res := make([]soakResult, np)
	done := map[int]bool{}
	pids := map[int]bool{}
	samples := map[int][]rankLine{}
	for _, l := range parseLines(stdout.String()) {
		switch l.kind {
		case "READY":
			pid, _ := strconv.Atoi(l.fields["pid"])
			pids[pid] = true
		case "SAMPLE":
			samples[l.rank] = append(samples[l.rank], l)
		case "DONE":
			done[l.rank] = true
			r := &res[l.rank]
			r.calls = l.int(t, "calls")
			r.secs, _ = strconv.ParseFloat(l.fields["secs"], 64)
			r.rssEnd, r.gorEnd = l.int(t, "rss"), l.int(t, "gor")
		case "WRONG", "FAIL", "JOINFAIL":
			t.Errorf("np=%d seed=%d: rank %d: %s %s", np, seed, l.rank, l.kind, l.text)
		}
	}
	for r := range np {
		if !done[r] {
			t.Errorf("np=%d seed=%d: rank %d did not finish", np, seed, r)
			continue
		}
		ss := samples[r]
		res[r].rssEarly, res[r].gorEarly = res[r].rssEnd, res[r].gorEnd
		for _, s := range ss {
			secs, _ := strconv.ParseFloat(s.fields["secs"], 64)
			if secs >= res[r].secs/4 {
				res[r].rssEarly, res[r].gorEarly = s.int(t, "rss"), s.int(t, "gor")
				break
			}
		}
		x := res[r]
		// Flat: the end within 25% + 16 MiB of the early sample (buffers of
		// the largest call drawn so far and the GC's pacing account for
		// the rest), goroutines within 2.
		if x.rssEnd > x.rssEarly+x.rssEarly/4+16<<10 {
			t.Errorf("np=%d rank %d: RSS grew from %d KiB to %d KiB", np, r, x.rssEarly, x.rssEnd)
		}
		if x.gorEnd > x.gorEarly+2 {
			t.Errorf("np=%d rank %d: goroutines grew from %d to %d", np, r, x.gorEarly, x.gorEnd)
		}
		if x.calls != res[0].calls {
			t.Errorf("np=%d: rank %d made %d calls, rank 0 %d", np, r, x.calls, res[0].calls)
		}
	}
	noLeak(t, before, pids)
	return res
}

func lastLines(s string, n int) string {
	l := strings.Split(s, "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

func soakDuration(t *testing.T, def time.Duration) time.Duration {
	if s := os.Getenv("SHMCOLL_SOAK"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("SHMCOLL_SOAK=%q: %v", s, err)
		}
		return d
	}
	if testing.Short() {
		return def * 2 / 5
	}
	return def
}

func report(t *testing.T, name string, res []soakResult) {
	if len(res) == 0 || res[0].secs == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d collectives in %.1fs = %.0f/s per rank;", name, res[0].calls, res[0].secs, float64(res[0].calls)/res[0].secs)
	for r, x := range res {
		fmt.Fprintf(&b, " r%d rss %d->%d KiB gor %d->%d;", r, x.rssEarly, x.rssEnd, x.gorEarly, x.gorEnd)
	}
	t.Log(b.String())
}

// TestSoakProcesses: 4 processes, random calls, every result checked.
func TestSoakProcesses(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	calls := 0
	if longMode() && os.Getenv("SHMCOLL_SOAK") == "" {
		calls = 100000
	}
	res := soak(t, 4, soakDuration(t, 20*time.Second), calls, 1<<16, seed)
	report(t, "4 ranks", res)
}

// TestSoakOversubscribed: 16 ranks on two cores keep making progress.
func TestSoakOversubscribed(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	d := soakDuration(t, 15*time.Second)
	if longMode() && os.Getenv("SHMCOLL_SOAK") == "" {
		d = 2 * time.Minute
	}
	res := soak(t, 16, d, 0, 4096, seed)
	report(t, "16 ranks", res)
	if len(res) > 0 && res[0].calls < 64 {
		t.Errorf("16 ranks made only %d calls", res[0].calls)
	}
}

// TestSoakInProcess: the same random mix on goroutine ranks for p = 2..7
// (odd and non-power-of-two counts included), a fresh random pin of every
// collective's algorithm per p, every result checked. It runs under the
// race detector, which sees the in-process arena.
func TestSoakInProcess(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SHMCOLL_SOAK_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	calls := 500
	if testing.Short() {
		calls = 150
	}
	if longMode() {
		calls = 5000
	}
	for p := 2; p <= 7; p++ {
		rng := rand.New(rand.NewPCG(seed, uint64(p)))
		pins := callmix.RandomPins(rng)
		opt := collectives.Options{SlotBytes: 16 << 10, Algorithms: pins}
		err := collectives.Run(p, opt, func(c *collectives.Comm) error {
			rng := rand.New(rand.NewPCG(seed, uint64(100+p)))
			for k := range calls {
				if err := callmix.Run(bg, c, callmix.Gen(rng, p, k, 20000)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Errorf("p=%d pins %s (SHMCOLL_SOAK_SEED=%d reruns): %v", p, callmix.Format(pins), seed, err)
		}
	}
}
