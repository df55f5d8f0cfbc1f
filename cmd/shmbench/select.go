package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"

	"github.com/shmcoll/shmcoll/collectives"
	"github.com/shmcoll/shmcoll/internal/benchfmt"
	"github.com/shmcoll/shmcoll/simd"
)

func init() {
	register(&command{
		name:    "select",
		summary: "the algorithm auto selection chooses for one call, and why",
		run:     runSelect,
	})
}

// runSelect prints collectives.Select's decision for the call the flags
// describe, with the pins (SHMCOLL_ALGO_<COLL>) and the table
// (SHMCOLL_TUNE_FILE, else the built-in one) a communicator would use.
func runSelect(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("shmbench select", flag.ContinueOnError)
	fs.SetOutput(stderr)
	coll := fs.String("coll", "allreduce", "collective")
	size := fs.String("bytes", "8", "bytes of the call as shmbench counts them (K, M, G suffixes)")
	np := fs.Int("np", 2, "number of ranks")
	arena := fs.Bool("arena", false, "every buffer of the call comes from Alloc")
	op := fs.String("op", "sum", "built-in operator (all commute)")
	nonComm := fs.Bool("noncommutative", false, "a user-defined operator that does not commute (instead of -op)")
	cpus := fs.String("cpus", "auto", "fit, over (the ranks are processes that outnumber the CPUs), or auto (-np against this machine's CPUs)")
	table := fs.String("table", "", "selection table file (default: SHMCOLL_TUNE_FILE, else the built-in table)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: shmbench select [-coll C] [-bytes N] [-np P] [-arena] [-op OP | -noncommutative] [-cpus fit|over|auto] [-table FILE]")
		fmt.Fprintln(stderr, "\nPrints the algorithm that auto selection chooses for the call and the reason.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "shmbench select: "+format+"\n", a...)
		return 2
	}
	if fs.NArg() > 0 {
		return bad("unexpected arguments: %q", fs.Args())
	}
	c, err := collectives.ParseCollective(*coll)
	if err != nil {
		return bad("-coll: %v", err)
	}
	n, err := benchfmt.ParseSize(*size)
	if err != nil || n > int64(^uint(0)>>1) {
		return bad("-bytes %q: %v", *size, err)
	}
	if *np < 1 {
		return bad("-np %d: want at least 1", *np)
	}
	if _, err := simd.ParseOp(*op); err != nil {
		return bad("-op: %v", err)
	}
	call := collectives.Call{Coll: c, Bytes: int(n), P: *np, NonCommutative: *nonComm, Arena: *arena}
	switch *cpus {
	case "fit":
	case "over":
		call.Oversubscribed = true
	case "auto":
		call.Oversubscribed = *np > runtime.NumCPU()
	default:
		return bad("-cpus %q: want fit, over or auto", *cpus)
	}
	var opt collectives.Options
	if *table != "" {
		if opt.Table, err = collectives.LoadTable(*table); err != nil {
			return bad("%v", err)
		}
	}
	alg, why, err := collectives.Select(call, opt)
	if err != nil {
		fmt.Fprintf(stderr, "shmbench select: %v\n", err)
		return 1
	}
	over := "fit"
	if call.Oversubscribed {
		over = "over"
	}
	fmt.Fprintf(stdout, "%v of %d bytes on %d ranks (%s): %v\n  because: %s\n", c, call.Bytes, call.P, over, alg, why)
	return 0
}
