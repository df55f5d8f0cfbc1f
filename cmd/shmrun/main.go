// Command shmrun starts the ranks of a shmcoll job on this node.
//
// Usage:
//
//	shmrun -n N [-bind auto|core|socket|none] [-map compact|spread] [-timeout D]
//	       [-arena memfd|named] [-slot BYTES] [-heap BYTES] prog [args...]
//
// It starts N copies of prog (-n and -np are the same flag), prefixes every
// line the ranks print with "[rank] ", forwards signals to them, and ends as
// soon as one rank fails: the others are sent SIGTERM, then SIGKILL after
// -grace. Nothing of the job is left behind in /dev/shm.
//
// Environment: each rank gets SHMCOLL_RANK (0..N-1), SHMCOLL_SIZE (N) and
// SHMCOLL_ARENA (fd:3, or a name with -arena named); a bound rank also gets
// SHMCOLL_CPU, the first CPU of its set as planned (and SHMCOLL_TOPOLOGY
// when the plan was made on a fake topology). A program joins with
// collectives.JoinEnv (or shm.JoinEnv).
//
// Signals: SIGINT, SIGTERM, SIGHUP, SIGQUIT (a Go rank then prints its
// goroutines), SIGUSR1 and SIGUSR2 are forwarded to every rank. SIGTSTP
// (Ctrl-Z) stops the ranks and then shmrun; SIGCONT (fg, bg) resumes them.
// Each rank runs in its own process group, so a terminal's signals reach the
// ranks only through shmrun, once.
//
// Binding: -bind auto (the default) shares the CPUs shmrun may use out
// among the ranks. With at least N physical cores, each rank is bound to
// its own set of whole cores (all their hardware threads), C/N of the C
// cores rounded up or down, neighbours in package order; a Go rank's
// GOMAXPROCS is the number of CPUs in its set, so a rank that runs
// goroutines in parallel keeps its share of the machine (N=1: all of it).
// With more ranks than cores, each rank is bound to one CPU, the CPUs dealt
// out in turn so that each keeps the same ranks, and GOMAXPROCS is 1. -bind
// core binds each rank to one CPU (GOMAXPROCS 1), socket to all CPUs of a
// package, none leaves ranks unbound (GOMAXPROCS: every CPU). -map orders
// the ranks: compact fills one package first, spread deals ranks across
// packages. SHMCOLL_TOPOLOGY (e.g. 2x4) plans on a fake topology, whose CPUs
// map onto the host's modulo their count.
//
// Arena: with -arena memfd (the default) shmrun creates the arena in a memfd
// with -slot bytes per rank (K, M and G suffixes allowed; default 4M) and a
// heap of -heap bytes per rank (default 0: none; collectives.Alloc hands out
// buffers from it, and the ranks must join with Options.HeapBytes 0 or the
// same size) that the ranks inherit as descriptor 3 (SHMCOLL_ARENA=fd:3);
// nothing appears in /dev/shm and its size limit does not apply. With
// -arena named, SHMCOLL_ARENA is a fresh name: rank 0 creates the segment
// with its own slot size and the last rank to join unlinks it.
//
// Exit status: 0 when every rank exits with 0; the status of the first rank
// that failed, or 128+signal if it was killed by a signal; 124 when -timeout
// expires; 127 when prog cannot be found; 2 for bad usage; 1 otherwise.
//
// Example:
//
//	shmrun -n 4 ./train -epochs 10
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/shmcoll/shmcoll/launch"
	"github.com/shmcoll/shmcoll/numa"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usageLine = "usage: shmrun -n N [flags] prog [args...] (shmrun -h for help)"

// helpText follows the flags in shmrun -h.
const helpText = `
Each rank's environment:
  SHMCOLL_RANK      the rank, 0..N-1
  SHMCOLL_SIZE      N
  SHMCOLL_ARENA     the arena: fd:3 (-arena memfd) or a name (-arena named)
  SHMCOLL_CPU       a bound rank's first CPU, as planned
  SHMCOLL_TOPOLOGY  the fake topology of the plan, when one is set
A program joins with collectives.JoinEnv (or shm.JoinEnv).

Binding: -bind auto gives each rank its own set of whole cores, C/N of the
C cores shmrun may use, when there are at least N cores; a Go rank's
GOMAXPROCS is the size of its set. With more ranks than cores, each rank
gets one CPU (GOMAXPROCS 1). -bind core: one CPU each; socket: its
package's CPUs; none: unbound.

Exit status:
  0         every rank exited with 0
  S         the status of the first rank that failed
  128+SIG   the first rank that failed was killed by signal SIG
  124       -timeout expired
  127       prog not found
  2         bad usage
  1         any other failure of shmrun

Example:
  shmrun -n 4 ./train -epochs 10
`

// Exit codes besides the ranks' own.
const (
	exitFailure  = 1
	exitUsage    = 2
	exitTimeout  = 124
	exitNotFound = 127
)

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("shmrun", flag.ContinueOnError)
	fs.SetOutput(stderr)
	np := fs.Int("np", 0, "number of ranks (required; same as -n)")
	n := fs.Int("n", 0, "number of ranks (required; same as -np)")
	bindFlag := fs.String("bind", "auto", "CPU binding `mode`: auto, core, socket or none (see Binding below)")
	mapFlag := fs.String("map", "compact", "`order` of bound ranks: compact or spread")
	timeout := fs.Duration("timeout", 0, "kill the job after this `duration` (0: never)")
	grace := fs.Duration("grace", launch.DefaultKillGrace, "time between SIGTERM and SIGKILL when killing ranks")
	noPrefix := fs.Bool("noprefix", false, "do not prefix output lines with the rank")
	arenaFlag := fs.String("arena", "memfd", "arena handoff: `memfd` (inherited descriptor) or named")
	slotFlag := fs.String("slot", "4M", "slot `bytes` per rank of a memfd arena (K, M, G suffixes)")
	heapFlag := fs.String("heap", "0", "heap `bytes` per rank of a memfd arena, for collectives.Alloc (K, M, G suffixes)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: shmrun -n N [flags] prog [args...]")
		fmt.Fprintln(fs.Output(), "\nStarts N ranks of prog on this node.\n\nFlags:")
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), helpText)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitUsage
	}
	usageError := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "shmrun: "+format+"\n", a...)
		fmt.Fprintln(stderr, usageLine)
		return exitUsage
	}
	npFlag := "-np"
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case set["n"] && set["np"] && *n != *np:
		return usageError("-n %d and -np %d: give the number of ranks once", *n, *np)
	case set["n"]:
		npFlag, *np = "-n", *n
	}
	if *np < 1 || *np > launch.MaxRanks {
		return usageError("%s %d: need 1 to %d ranks", npFlag, *np, launch.MaxRanks)
	}
	if fs.NArg() == 0 {
		return usageError("missing program to run")
	}
	bind, err := launch.ParseBind(*bindFlag)
	if err != nil {
		return usageError("-bind %q: want core, socket, none or auto", *bindFlag)
	}
	policy, err := numa.ParsePolicy(*mapFlag)
	if err != nil || policy == numa.None {
		return usageError("-map %q: want compact or spread", *mapFlag)
	}
	arenaKind, err := launch.ParseArenaKind(*arenaFlag)
	if err != nil {
		return usageError("-arena %q: want memfd or named", *arenaFlag)
	}
	slot, err := parseBytes(*slotFlag)
	if err != nil {
		return usageError("-slot %q: %v", *slotFlag, err)
	}
	heap := 0
	if *heapFlag != "0" {
		if heap, err = parseBytes(*heapFlag); err != nil {
			return usageError("-heap %q: %v", *heapFlag, err)
		}
	}
	if *timeout < 0 || *grace < 0 {
		return usageError("-timeout and -grace must not be negative")
	}

	// Catch the signals before the ranks exist, so that none is lost.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	job, err := launch.Start(context.Background(), launch.Config{
		NP:        *np,
		Prog:      fs.Arg(0),
		Args:      fs.Args()[1:],
		Bind:      bind,
		Map:       policy,
		Stdout:    stdout,
		Stderr:    stderr,
		NoPrefix:  *noPrefix,
		Timeout:   *timeout,
		KillGrace: *grace,
		ArenaKind: arenaKind,
		SlotBytes: slot,
		HeapBytes: heap,
	})
	if err != nil {
		fmt.Fprintln(stderr, "shmrun:", err)
		switch {
		case errors.Is(err, exec.ErrNotFound), errors.Is(err, os.ErrNotExist):
			return exitNotFound
		case errors.Is(err, launch.ErrBadConfig):
			fmt.Fprintln(stderr, usageLine)
			return exitUsage
		}
		return exitFailure
	}
	for done := false; !done; {
		select {
		case s := <-sigs:
			forward(job, s.(syscall.Signal))
		case <-job.Done():
			done = true
		}
	}
	err = job.Wait()
	var re *launch.RankError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &re):
		fmt.Fprintf(stderr, "shmrun: %v\n", re)
		return re.ExitCode()
	case errors.Is(err, launch.ErrTimeout):
		fmt.Fprintf(stderr, "shmrun: %v\n", err)
		return exitTimeout
	}
	fmt.Fprintf(stderr, "shmrun: %v\n", err)
	return exitFailure
}

// parseBytes parses a size such as 65536, 64K, 4M or 1G (binary units).
func parseBytes(s string) (int, error) {
	mult := 1
	switch {
	case strings.HasSuffix(s, "K"):
		mult = 1 << 10
	case strings.HasSuffix(s, "M"):
		mult = 1 << 20
	case strings.HasSuffix(s, "G"):
		mult = 1 << 30
	}
	if mult > 1 {
		s = s[:len(s)-1]
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > (1<<40)/mult {
		return 0, fmt.Errorf("want a positive size such as 65536, 64K or 4M")
	}
	return n * mult, nil
}

// forwarded are the signals shmrun passes on to the ranks.
var forwarded = []os.Signal{
	syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTSTP, syscall.SIGCONT,
}

// forward passes sig on to the ranks. SIGTSTP, which shmrun catches, stops
// the ranks (SIGSTOP) and then shmrun itself, as the terminal asked; the
// SIGCONT that resumes shmrun is forwarded like the others.
func forward(job *launch.Job, sig syscall.Signal) {
	if sig == syscall.SIGTSTP {
		job.Signal(syscall.SIGSTOP)
		syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		return
	}
	job.Signal(sig)
}
