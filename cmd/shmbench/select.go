package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"

	"github.com/shmcoll/shmcoll/collectives"
	"github.com/shmcoll/shmcoll/internal/benchfmt"
	"github.com/shmcoll/shmcoll/shm"
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
	cma := fs.Bool("cma", os.Getenv(shm.EnvCMA) != "off", "cross-memory attach is on (false: as where SHMCOLL_CMA=off or the kernel refuses it)")
	op := fs.String("op", "sum", "built-in operator (all commute)")
	nonComm := fs.Bool("noncommutative", false, "a user-defined operator that does not commute (instead of -op)")
	cpus := fs.String("cpus", "auto", "fit, over (the ranks are processes that outnumber the CPUs), or auto (-np against the CPUs shmbench may use)")
	table := fs.String("table", "", "selection table file (default: SHMCOLL_TUNE_FILE, else the built-in table)")
	place := fs.String("placement", "unknown", "two ranks: near (they share a cache), far, or unknown (not probed), as the communicator's placement probe finds it")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: shmbench select [-coll C] [-bytes N] [-np P] [-arena] [-cma=false] [-op OP | -noncommutative] [-cpus fit|over|auto] [-placement near|far|unknown] [-table FILE]")
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
	call := collectives.Call{Coll: c, Bytes: int(n), P: *np, NonCommutative: *nonComm, Arena: *arena, CrossMemory: *cma}
	switch *cpus {
	case "fit":
	case "over":
		call.Oversubscribed = true
	case "auto":
		call.Oversubscribed = *np > runtime.NumCPU()
	default:
		return bad("-cpus %q: want fit, over or auto", *cpus)
	}
	switch *place {
	case "unknown":
	case "near":
		call.Placement = collectives.PlacementNear
	case "far":
		call.Placement = collectives.PlacementFar
	default:
		return bad("-placement %q: want near, far or unknown", *place)
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

// writeOverrides appends to tune's report the built-in overrides
// (collectives/tune/overrides.txt) that the library applies over the
// measured table tab, each with what tab measured in its range and its
// reason, and the table that results.
func writeOverrides(rep *bytes.Buffer, tab *collectives.Table) {
	o, err := collectives.DefaultOverrides()
	if err != nil || len(o.Entries) == 0 {
		return
	}
	ps := tab.Ps()
	fmt.Fprintln(rep)
	fmt.Fprintln(rep, "## Overrides")
	fmt.Fprintln(rep)
	fmt.Fprintln(rep, "The library applies these hand-made entries (collectives/tune/overrides.txt) over the measured table:")
	fmt.Fprintln(rep)
	n := 0
	for _, e := range o.Entries {
		if !slices.Contains(ps, e.P) {
			continue
		}
		n++
		var measured []string
		for _, m := range tab.Entries {
			if m.Coll == e.Coll && m.P == e.P && m.Over == e.Over && m.From < e.To && e.From < m.To {
				measured = append(measured, m.Alg.String())
			}
		}
		to := "inf"
		if e.To != math.MaxInt64 {
			to = benchfmt.FormatSize(e.To)
		}
		if len(measured) == 0 {
			measured = []string{"nothing"}
		}
		fmt.Fprintf(rep, "- %v p=%d [%s, %s): %v (measured: %s) — %s\n", e.Coll, e.P, benchfmt.FormatSize(e.From), to, e.Alg, strings.Join(measured, ", "), e.Reason)
	}
	if n == 0 {
		fmt.Fprintln(rep, "- none for the measured values of p")
	}
	merged, _ := tab.Override(o).MarshalText()
	fmt.Fprintln(rep)
	fmt.Fprintln(rep, "The table auto uses with this measurement:")
	fmt.Fprintln(rep)
	fmt.Fprintln(rep, "```")
	rep.Write(merged)
	fmt.Fprintln(rep, "```")
}
