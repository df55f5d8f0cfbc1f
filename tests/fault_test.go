package tests

// Fault injection across real processes: shmrun starts the rank program
// tests/internal/faultrank, which runs a random stream of collectives with
// random algorithms (pinned per trial), types, operators and sizes; one rank
// kills itself with SIGKILL at a random moment of a random call. Every
// survivor must return an error naming the dead rank within SHMCOLL_TIMEOUT
// (plus slack for this loaded machine), a later call must return
// ErrAborted, shmrun must exit with 128+9, and nothing of the job may remain
// in /dev/shm.

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	faultTimeout = 2 * time.Second // SHMCOLL_TIMEOUT of the trials (the default)
	// faultSlack is what this two-core, heavily shared machine may add to
	// the detection deadline: scheduling of the survivors and of the
	// victim's death, not the protocol.
	faultSlack = 2 * time.Second
)

// trial is one fault-injection run.
type trial struct {
	seed      uint64
	p         int
	victim    int
	killCall  int
	killDelay time.Duration
	arena     string // memfd or named
	slot      int
	mode      string // stream, panic, cancel
	pin       string // -pin of the rank program
	dupEvery  int    // -dupevery of the rank program
}

func newTrial(seed uint64, mode string) trial {
	rng := rand.New(rand.NewPCG(seed, 99))
	tr := trial{seed: seed, mode: mode, p: 2 + rng.IntN(3)}
	tr.victim = rng.IntN(tr.p)
	tr.killCall = rng.IntN(8)
	tr.killDelay = time.Duration(rng.IntN(4000)) * time.Microsecond
	tr.arena = []string{"memfd", "named"}[rng.IntN(2)]
	tr.slot = 4096 << rng.IntN(7) // 4 KiB .. 256 KiB: many segments per call
	return tr
}

// calls bounds the stream: the victim fails at killCall, so a longer
// stream only means the failure was missed.
func (tr trial) calls() int {
	if tr.mode == "stream" {
		return 1000000 // the SIGKILL comes after a delay, maybe calls later
	}
	return tr.killCall + 20
}

func (tr trial) String() string {
	return fmt.Sprintf("seed=%d mode=%s p=%d victim=%d call=%d delay=%v arena=%s slot=%d",
		tr.seed, tr.mode, tr.p, tr.victim, tr.killCall, tr.killDelay, tr.arena, tr.slot)
}

// trialResult is what one trial measured.
type trialResult struct {
	detect []time.Duration // survivors: failure return minus the victim's kill
	late   int             // panic mode: ranks whose call completed before the abort
	failed bool
}

// runTrial runs tr under shmrun and checks everything the failure semantics
// promise.
func runTrial(t *testing.T, tr trial) (res trialResult) {
	shmrun, rank := tool(t, "cmd/shmrun"), tool(t, "tests/internal/faultrank")
	before := shmSnapshot()
	cmd := exec.Command(shmrun, "-np", strconv.Itoa(tr.p), "-arena", tr.arena, "-slot", strconv.Itoa(tr.slot),
		"-grace", "20s", "-timeout", "2m", "-bind", "none",
		rank, "-mode", tr.mode, "-seed", strconv.FormatUint(tr.seed, 10), "-calls", strconv.Itoa(tr.calls()),
		"-victim", strconv.Itoa(tr.victim), "-killcall", strconv.Itoa(tr.killCall),
		"-killdelay", tr.killDelay.String(), "-maxn", "32768", "-slot", strconv.Itoa(tr.slot), "-pin", tr.pin,
		"-dupevery", strconv.Itoa(tr.dupEvery))
	cmd.Env = append(os.Environ(), "SHMCOLL_TIMEOUT="+faultTimeout.String())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	// The problems of a trial are reported at once, with its output.
	var problems []string
	fail := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	defer func() {
		if len(problems) > 0 {
			res.failed = true
			t.Errorf("%v:\n  %s\nstdout:\n%s\nstderr:\n%s", tr, strings.Join(problems, "\n  "), stdout.String(), stderr.String())
		}
	}()
	code := cmd.ProcessState.ExitCode()
	if err == nil || code == 0 {
		fail("shmrun exited with 0 (%v), want non-zero", err)
	}
	lines := parseLines(stdout.String())
	pids := map[int]bool{}
	var names []string
	var kill int64 = -1
	fails := map[int]rankLine{}
	late := map[int]bool{}
	for _, l := range lines {
		switch l.kind {
		case "READY":
			pid, _ := strconv.Atoi(l.fields["pid"])
			pids[pid] = true
			names = append(names, l.fields["arena"])
		case "LATE":
			late[l.rank] = true
			res.late++
		case "KILL":
			kill = l.int(t, "t")
		case "FAIL":
			if _, dup := fails[l.rank]; dup {
				fail("rank %d reported twice", l.rank)
			}
			fails[l.rank] = l
		case "WRONG", "JOINFAIL", "DONE":
			fail("rank %d: %s %s", l.rank, l.kind, l.text)
		}
	}
	if len(pids) != tr.p {
		fail("%d ranks joined, want %d", len(pids), tr.p)
	}
	// shmrun's status is the first failed rank's: the victim's SIGKILL, or
	// (rarely first to be reaped) a survivor's status 4 after its error.
	if tr.mode == "stream" {
		if code != 128+9 && code != 4 {
			fail("shmrun exit status %d, want %d (the victim's SIGKILL) or 4", code, 128+9)
		}
		if kill < 0 {
			fail("the victim did not kill itself")
		}
	} else if code != 4 {
		fail("shmrun exit status %d, want 4 (a rank's failed call)", code)
	}
	for r := range tr.p {
		if tr.mode == "stream" && r == tr.victim {
			if _, ok := fails[r]; ok {
				fail("the victim reported a failure instead of dying")
			}
			continue
		}
		l, ok := fails[r]
		if !ok {
			fail("rank %d did not report a failure", r)
			continue
		}
		errText := l.fields["err"]
		if l.fields["later"] != "true" {
			fail("rank %d: a later call did not return ErrAborted", r)
		}
		switch tr.mode {
		case "stream":
			if l.fields["peer"] != strconv.Itoa(tr.victim) || l.fields["dead"] != "true" ||
				!strings.Contains(errText, fmt.Sprintf("rank %d (pid", tr.victim)) {
				fail("rank %d: error %q does not name the dead rank %d (peer=%s dead=%s)", r, errText, tr.victim, l.fields["peer"], l.fields["dead"])
			}
			if kill >= 0 {
				d := time.Duration(l.int(t, "t") - kill)
				res.detect = append(res.detect, d)
				if d > time.Second {
					t.Logf("%v: rank %d returned %v after the kill: %s", tr, r, d, errText)
				}
				if d > faultTimeout+faultSlack {
					fail("rank %d returned %v after the kill, want within %v + %v", r, d, faultTimeout, faultSlack)
				}
			}
		case "panic":
			if late[r] && r == tr.victim {
				fail("the panicking rank's call succeeded")
			}
			if !strings.Contains(errText, "operator exploded") || !strings.Contains(errText, "arena aborted") {
				fail("rank %d: error %q does not name the operator's panic", r, errText)
			}
		case "cancel":
			if !strings.Contains(errText, "context canceled") || !strings.Contains(errText, fmt.Sprintf("aborted by rank %d", tr.victim)) {
				fail("rank %d: error %q does not name the cancelled rank %d", r, errText, tr.victim)
			}
		}
	}
	noLeak(t, before, pids, names...)
	return res
}

func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// TestFaultKill9 runs the kill -9 trials: 50 (SHMCOLL_LONG=1: 1000;
// SHMCOLL_FAULT_TRIALS=N overrides), two at a time.
func TestFaultKill9(t *testing.T) {
	n := 50
	if testing.Short() {
		n = 12
	}
	if longMode() {
		n = 1000
	}
	if s := os.Getenv("SHMCOLL_FAULT_TRIALS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	base := uint64(time.Now().UnixNano())
	if s := os.Getenv("SHMCOLL_FAULT_SEED"); s != "" {
		base, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("trials %d, seeds from %d (SHMCOLL_FAULT_SEED reruns them)", n, base)
	var mu sync.Mutex
	var all []time.Duration
	failed, done := 0, 0
	next := make(chan uint64)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for seed := range next {
				res := runTrial(t, newTrial(seed, "stream"))
				mu.Lock()
				all = append(all, res.detect...)
				if res.failed {
					failed++
				}
				if done++; done%100 == 0 {
					t.Logf("%d trials done, %d failed", done, failed)
				}
				mu.Unlock()
			}
		})
	}
	for i := range n {
		if failed > 3 {
			break
		}
		next <- base + uint64(i)
	}
	close(next)
	wg.Wait()
	t.Logf("detection (kill to the survivor's error return) over %d survivors: median %v, p99 %v, max %v",
		len(all), percentile(all, 0.5), percentile(all, 0.99), percentile(all, 1))
}

// TestFaultPanicAndCancel: a user operator that panics on one rank, and a
// cancelled context on one rank, abort the call on every rank of real
// processes; later calls return ErrAborted.
//
// With the flat allreduce every rank's result needs a piece the panicking
// rank reduces, so every rank's call fails. With other algorithms a rank
// that needed nothing from the panicking rank once its data was posted (the
// replicated allreduce: every rank reduces everything itself) may complete
// the call with a correct result (checked) and fails at its next call
// instead; the log counts those.
func TestFaultPanicAndCancel(t *testing.T) {
	late := 0
	for i, mode := range []string{"panic", "cancel", "panic", "cancel", "panic", "panic"} {
		tr := newTrial(uint64(1000+i), mode)
		if i < 2 {
			tr.pin = "allreduce=flat"
		}
		res := runTrial(t, tr)
		if tr.pin != "" && res.late > 0 {
			t.Errorf("%v: %d ranks completed the call of the panic with the flat algorithm", tr, res.late)
		}
		late += res.late
	}
	t.Logf("ranks that completed the panicking call and failed at the next: %d", late)
}

// TestFaultKillDuringDup: the victim dies in the middle of Comm.Dup (a
// Split: one step on the parent arena, then every rank joins a new named
// arena). The survivors must fail within SHMCOLL_TIMEOUT like in any other
// call, and the new arena's segment must not remain in /dev/shm.
func TestFaultKillDuringDup(t *testing.T) {
	n := 4
	if longMode() {
		n = 100
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i := range n {
		tr := newTrial(uint64(5000+i), "stream")
		tr.dupEvery = 2
		tr.killCall = 1 + 2*(i%3) // a Dup
		tr.killDelay = time.Duration(i*37%300) * time.Microsecond
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			runTrial(t, tr)
		})
	}
	wg.Wait()
}
