// Command shmbench is the benchmark and inspection tool of shmcoll.
//
// Usage:
//
//	shmbench <command> [flags]
//
// Without a command it runs "run" with its defaults: an allreduce sweep on
// min(cores, 8) local processes with a short summary.
//
//	shmbench run      time collectives (-coll, -algo, -dtype, -op, -sizes,
//	                  -iters or -time, -check, -format table|csv|json, -plot DIR)
//	                  on -np processes it starts itself, or as one rank
//	                  under shmrun or mpirun; nccl-tests' -b -e -f -n -w -c -d
//	                  -o -r and OSU's -m -i -x are accepted too
//	shmbench topo     topology, core-to-core latency through the channels,
//	                  copy bandwidth per NUMA node, heatmap (-plot DIR)
//	shmbench compare  MPIs (Debian's, or any named by path), shmcoll, another
//	                  shmbench build and MPIs with libshmcoll preloaded,
//	                  interleaved in blocks with the placement probe; median
//	                  of per-round ratios
//	shmbench tune     every algorithm of each collective over sizes on -np
//	                  processes (a list), in interleaved rounds; writes the
//	                  selection table auto uses (-o) and a report (docs/TUNING.md)
//
// Timing follows docs/DESIGN.md: each iteration is a barrier and then the
// collective; its time is the slowest rank's; min, median, mean, max and
// p99 over iterations and the span on CLOCK_MONOTONIC; bandwidths as
// nccl-tests define them. The MPI side of compare (internal/mpibench)
// measures the same way.
//
// Each command lives in its own file and registers itself in init.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
)

// command is one subcommand of shmbench.
type command struct {
	name    string
	summary string
	// run executes the command with its arguments (after the command name).
	// It writes results to stdout, diagnostics to stderr, and returns the
	// process exit code.
	run func(args []string, stdout, stderr io.Writer) int
}

var commands = map[string]*command{}

// defaultCommand runs when shmbench is started without arguments.
var defaultCommand string

func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("shmbench: command registered twice: " + c.name)
	}
	commands[c.name] = c
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: shmbench <command> [flags]")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'shmbench <command> -h' for the flags of a command.")
}

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		if c, ok := commands[defaultCommand]; ok {
			return c.run(nil, stdout, stderr)
		}
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "shmbench: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	return c.run(args[1:], stdout, stderr)
}
