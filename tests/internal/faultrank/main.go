// Command faultrank is the rank program of the fault, soak and signal tests
// of package tests. Started by shmrun (or package launch), each rank joins
// with collectives.JoinEnv and runs a stream of random collectives that every
// rank derives from -seed (package callmix), checking every result exactly.
//
// It prints one line per event on stdout (shmrun prefixes them with the
// rank):
//
//	READY pid=P arena=A pins=...      joined
//	KILL t=NS                          the victim, just before SIGKILL to itself
//	FAIL call=K t=NS peer=Q dead=B later=B err=...
//	                                   a call failed (t: CLOCK_MONOTONIC ns);
//	                                   peer is the AbortError's, dead is
//	                                   errors.Is(err, ErrPeerDead), later is
//	                                   whether a later call returned ErrAborted
//	                                   (exit status 4)
//	LATE call=K                        (panic mode) the call succeeded with a
//	                                   correct result; the next one must fail
//	WRONG ...                          a result was wrong (exit status 3)
//	SAMPLE calls=N secs=S rss=KB gor=G   about ten times per run
//	DONE calls=N secs=S rss0=KB rss=KB gor0=G gor=G
//	                                   the stream ended without failure
//
// Modes (-mode):
//
//	stream   run -calls calls (or for -duration); the -victim rank kills
//	         itself with SIGKILL -killdelay after starting call -killcall;
//	         survivors ignore SIGTERM/SIGINT so that they can report
//	panic    like stream, but rank -victim's call -killcall uses a user
//	         operator that panics
//	cancel   like stream, but rank -victim's call -killcall runs with a
//	         cancelled context
//	loop     run calls (and a Dup every -dupevery calls) until killed; the
//	         default signal handling applies
//	attach   (security tests, run as another user) try to open -path and to
//	         join its arena by name; print "ATTACH open err=..." and
//	         "ATTACH join err=..."
//	plant    (security tests, run as another user) create -path with the
//	         bytes of -from, mode 0600; print "PLANTED" or "PLANTFAIL err=..."
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/shmcoll/shmcoll/collectives"
	"github.com/shmcoll/shmcoll/shm"
	"github.com/shmcoll/shmcoll/tests/internal/callmix"
	"golang.org/x/sys/unix"
)

func main() {
	os.Exit(run())
}

func mono() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// rssKB returns the resident set size of this process in KiB.
func rssKB() int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return -1
}

func run() int {
	mode := flag.String("mode", "stream", "stream, panic, cancel or loop")
	seed := flag.Uint64("seed", 1, "seed of the call stream (the same on every rank)")
	calls := flag.Int("calls", 1000, "calls to make (stream)")
	duration := flag.Duration("duration", 0, "run for this long instead of -calls (rank 0 decides, by a bcast)")
	victim := flag.Int("victim", -1, "rank that fails")
	killCall := flag.Int("killcall", 0, "call at which the victim fails")
	killDelay := flag.Duration("killdelay", 0, "delay after starting -killcall before SIGKILL")
	maxN := flag.Int("maxn", 1<<16, "largest element count")
	slot := flag.Int("slot", 0, "slot bytes (0: the arena's)")
	randomPins := flag.Bool("randompins", true, "pin a random algorithm (or auto) per collective, from -seed")
	pin := flag.String("pin", "", "coll=alg,... pinned over the random pins")
	dupEvery := flag.Int("dupevery", 0, "Dup (and Close) the communicator every this many calls (0: never)")
	path := flag.String("path", "", "attach, plant: the segment file")
	from := flag.String("from", "", "plant: the file whose bytes to plant")
	flag.Parse()

	switch *mode {
	case "attach":
		return attach(*path)
	case "plant":
		return plant(*path, *from)
	}
	if *mode != "loop" {
		// Survivors must outlive the launcher's SIGTERM long enough to report.
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
	}
	rng := rand.New(rand.NewPCG(*seed, 0x5eed))
	pins := map[collectives.Collective]collectives.Algorithm{}
	if *randomPins {
		pins = callmix.RandomPins(rng)
	}
	for _, kv := range strings.Split(*pin, ",") {
		if kv == "" {
			continue
		}
		cs, as, _ := strings.Cut(kv, "=")
		coll, err := collectives.ParseCollective(cs)
		if err != nil {
			fmt.Println("JOINFAIL err=", err)
			return 2
		}
		a, err := collectives.ParseAlgorithm(as)
		if err != nil {
			fmt.Println("JOINFAIL err=", err)
			return 2
		}
		pins[coll] = a
	}
	ctx := context.Background()
	c, err := collectives.JoinEnv(ctx, collectives.Options{SlotBytes: *slot, Algorithms: pins})
	if err != nil {
		fmt.Printf("JOINFAIL err=%v\n", err)
		return 1
	}
	defer c.Close()
	r, p := c.Rank(), c.Size()
	fmt.Printf("READY pid=%d arena=%s pins=%s\n", os.Getpid(), os.Getenv(shm.EnvArena), callmix.Format(pins))

	rss0, gor0 := rssKB(), runtime.NumGoroutine()
	start := time.Now()
	// boom has the name of the operator the other ranks pass, so that the
	// descriptors agree and the panic happens inside the reduction.
	boom := collectives.NewOp(callmix.OpUserSum, func(dst, src []int64) { panic("operator exploded") }, true)
	var deadline int64 // rank 0's end of a -duration run, shared by a bcast
	if *duration > 0 {
		deadline = time.Now().Add(*duration).UnixNano()
	}
	more := []int64{0}
	lastSample := start
	sample := func(k int) {
		if every := max(*duration, time.Duration(*calls)*time.Millisecond) / 10; time.Since(lastSample) >= every {
			lastSample = time.Now()
			fmt.Printf("SAMPLE calls=%d secs=%.3f rss=%d gor=%d\n", k, time.Since(start).Seconds(), rssKB(), runtime.NumGoroutine())
		}
	}
	for k := 0; ; k++ {
		if k%64 == 0 && (*mode == "stream" || *mode == "loop") {
			sample(k)
		}
		if *duration > 0 {
			// Every 64 calls rank 0 says whether to go on, so that all
			// ranks make the same number of calls.
			if k%64 == 0 {
				more[0] = 0
				if r == 0 && time.Now().UnixNano() >= deadline {
					more[0] = 1
				}
				if err := collectives.Bcast(ctx, c, more, 0); err != nil {
					return report(c, k, err)
				}
				if more[0] == 1 {
					break
				}
			}
		} else if *mode != "loop" && k >= *calls {
			break
		}
		s := callmix.Gen(rng, p, k, *maxN)
		if r == *victim && k == *killCall && *mode == "stream" {
			go func() {
				time.Sleep(*killDelay)
				fmt.Printf("KILL t=%d\n", mono())
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}()
		}
		if *dupEvery > 0 && k%*dupEvery == *dupEvery-1 {
			d, err := c.Dup(ctx)
			if err != nil {
				return report(c, k, err)
			}
			d.Close()
			continue
		}
		callCtx := ctx
		if *mode == "cancel" && k == *killCall && r != *victim {
			// The cancelled rank comes first, so that it waits (and sees
			// its context's end) instead of finding every peer's data
			// already posted.
			time.Sleep(200 * time.Millisecond)
		}
		if r == *victim && k == *killCall {
			switch *mode {
			case "panic":
				err := collectives.Allreduce(ctx, c, make([]int64, 64), make([]int64, 64), boom)
				return report(c, k, err)
			case "cancel":
				cctx, cancel := context.WithCancel(ctx)
				cancel()
				callCtx = cctx
			}
		}
		if *mode == "panic" && k == *killCall {
			// The other ranks make the matching call with a working
			// operator. A rank that needs nothing from the panicking rank
			// once its data was posted may complete the call (with a
			// correct result, checked): it must then fail at its next call.
			s := callmix.Spec{Call: k, Coll: collectives.CollAllreduce, Type: "int64", Op: callmix.OpUserSum, N: 64}
			err := callmix.Run(ctx, c, s)
			if err == nil {
				fmt.Printf("LATE call=%d\n", k)
				err = collectives.Barrier(ctx, c)
			}
			return report(c, k, err)
		}
		if err := callmix.Run(callCtx, c, s); err != nil {
			var ce *callmix.CheckError
			if errors.As(err, &ce) {
				fmt.Printf("WRONG %v\n", err)
				return 3
			}
			return report(c, k, err)
		}
	}
	runtime.GC()
	_, total := c.Stats()
	fmt.Printf("DONE calls=%d secs=%.3f rss0=%d rss=%d gor0=%d gor=%d\n", total.Calls, time.Since(start).Seconds(), rss0, rssKB(), gor0, runtime.NumGoroutine())
	return 0
}

// report prints the FAIL line of a failed call and checks that a later call
// fails with ErrAborted.
func report(c *collectives.Comm, k int, err error) int {
	if err == nil {
		fmt.Printf("WRONG call=%d: no error\n", k)
		return 3
	}
	t := mono()
	peer := -2
	var ae *shm.AbortError
	if errors.As(err, &ae) {
		peer = ae.Peer
	}
	later := collectives.Barrier(context.Background(), c)
	fmt.Printf("FAIL call=%d t=%d peer=%d dead=%v later=%v err=%s\n", k, t, peer,
		errors.Is(err, collectives.ErrPeerDead), errors.Is(later, collectives.ErrAborted), strings.ReplaceAll(err.Error(), "\n", " "))
	return 4
}

func attach(path string) int {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err == nil {
		f.Close()
	}
	fmt.Printf("ATTACH open err=%v\n", err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ep, err := shm.Join(ctx, filepath.Base(path), 1, 2, shm.Options{JoinTimeout: time.Second})
	if err == nil {
		ep.Close()
	}
	fmt.Printf("ATTACH join err=%v\n", err)
	return 0
}

func plant(path, from string) int {
	b, err := os.ReadFile(from)
	if err == nil {
		var f *os.File
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			_, err = f.Write(b)
			f.Close()
		}
	}
	if err != nil {
		fmt.Printf("PLANTFAIL err=%v\n", err)
		return 1
	}
	fmt.Println("PLANTED")
	return 0
}
