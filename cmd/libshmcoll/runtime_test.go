//go:build mpi

package main

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestMinProcs checks that the library raises GOMAXPROCS 1 (a rank bound
// to one core) to 2, and leaves a value set in the environment alone.
func TestMinProcs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	if v, ok := os.LookupEnv("GOMAXPROCS"); ok {
		defer os.Setenv("GOMAXPROCS", v)
	} else {
		defer os.Unsetenv("GOMAXPROCS")
	}
	os.Unsetenv("GOMAXPROCS")
	runtime.GOMAXPROCS(1)
	minProcs()
	if got := runtime.GOMAXPROCS(0); got != 2 {
		t.Errorf("GOMAXPROCS 1, unset in the environment: minProcs left %d, want 2", got)
	}
	runtime.GOMAXPROCS(3)
	minProcs()
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Errorf("GOMAXPROCS 3: minProcs made it %d", got)
	}
	os.Setenv("GOMAXPROCS", "1")
	runtime.GOMAXPROCS(1)
	minProcs()
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("GOMAXPROCS=1 in the environment: minProcs made it %d", got)
	}
}

// TestBoundRank runs two ranks bound to a core each (the launch of
// mpi.Installation.Args for 2 ranks on a node with 2 CPUs or more) and
// checks, from the library's debug output, that each rank's Go runtime was
// raised to 2 Ps.
func TestBoundRank(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU: 2 ranks are oversubscribed and not bound")
	}
	in, dir, lib := library(t)
	exe := compile(t, in, dir, "progress.c")
	out, errs := run(t, in, 2, exe, lib, "SHMCOLL_MPI_DEBUG=1")
	if !strings.Contains(out, "No Errors") {
		t.Fatalf("no \"No Errors\":\n%s\n%s", out, errs)
	}
	if n := strings.Count(errs, "GOMAXPROCS 1 raised to 2"); n != 2 {
		t.Errorf("%d ranks report GOMAXPROCS 1 raised to 2, want 2:\n%s", n, errs)
	}
}

// TestDocPrograms builds and runs the MPI programs of docs/ that the
// documentation quotes (idle_gap.c, barrier_skew.c, call_loop.c), preloaded, and checks
// that they print their results.
func TestDocPrograms(t *testing.T) {
	in, dir, lib := library(t)
	for _, tc := range []struct {
		src  string
		args []string
		want *regexp.Regexp
	}{
		{"idle_gap.c", []string{"100"}, regexp.MustCompile(`(?m)^rank 0, gap 100 us: first call [0-9.]+ us, second [0-9.]+ us \(medians\)$`)},
		{"barrier_skew.c", []string{"1000"}, regexp.MustCompile(`(?m)^rank 1 leaves MPI_Barrier after rank 0 by -?[0-9.]+ us \(median; p10 -?[0-9.]+, p90 -?[0-9.]+\)$`)},
		{"barrier_skew.c", []string{"1000", "pmpi"}, regexp.MustCompile(`(?m)^rank 1 leaves PMPI_Barrier after rank 0 by -?[0-9.]+ us`)},
		{"call_loop.c", []string{"bcast", "8", "1000"}, regexp.MustCompile(`(?m)^bcast 8 bytes: [0-9.]+ us per call$`)},
	} {
		exe := compile(t, in, dir, filepath.Join("..", "..", "docs", tc.src))
		out, errs := runArgs(t, in, 2, exe, lib, tc.args, "SHMCOLL_MPI_STATS=1", farPair)
		if !tc.want.MatchString(out) {
			t.Errorf("%s %v: output does not match %v:\n%s\n%s", tc.src, tc.args, tc.want, out, errs)
		}
		if st := stats(errs); len(tc.args) == 1 && st["allreduce"][0]+st["barrier"][0] == 0 {
			t.Errorf("%s %v: nothing served: %v", tc.src, tc.args, st)
		}
	}
}

var threadLine = regexp.MustCompile(`(?m)^rank (\d+): host nice (-?\d+), main thread nice (-?\d+), (\d+) threads: (\d+) at the host's nice, (\d+) at 19, (\d+) other$`)

// threadCounts parses testdata/threads.c's lines: per rank, the host's
// nice value, the main thread's, and the threads at the host's nice, at 19
// and at neither.
func threadCounts(t *testing.T, out string, np int) map[int][5]int {
	t.Helper()
	m := map[int][5]int{}
	for _, f := range threadLine.FindAllStringSubmatch(out, -1) {
		var v [7]int
		for i := range v {
			v[i], _ = strconv.Atoi(f[i+1])
		}
		m[v[0]] = [5]int{v[1], v[2], v[4], v[5], v[6]}
	}
	if len(m) != np {
		t.Fatalf("%d ranks reported their threads, want %d:\n%s", len(m), np, out)
	}
	return m
}

// TestRuntimeThreads checks that the Go runtime's threads run at nice 19
// and the host's threads keep their priority (threads.c): testdata/threads.c
// counts its threads by nice value after a served call. Preloaded, the
// threads at the host's nice are exactly those of the plain run (the main
// thread and the MPI's own), and the rest, at least the runtime's first
// thread and sysmon, are at 19; SHMCOLL_MPI_NICE=0 leaves every thread at
// the host's nice; a bad value is reported and every call passes.
func TestRuntimeThreads(t *testing.T) {
	in, dir, lib := library(t)
	exe := compile(t, in, dir, "threads.c")
	for _, np := range []int{2, 3} {
		out, _ := run(t, in, np, exe, "")
		plain := threadCounts(t, out, np)
		out, errs := run(t, in, np, exe, lib, "SHMCOLL_MPI_STATS=1", farPair)
		if !strings.Contains(out, "No Errors") {
			t.Fatalf("np=%d: no \"No Errors\":\n%s\n%s", np, out, errs)
		}
		if st := stats(errs); st["allreduce"][0] == 0 {
			t.Errorf("np=%d: allreduce not served: %v", np, st)
		}
		for r, v := range threadCounts(t, out, np) {
			host, main, atHost, at19, other := v[0], v[1], v[2], v[3], v[4]
			if main != host || other != 0 {
				t.Errorf("np=%d rank %d: host nice %d, main thread %d, %d threads at neither the host's nice nor 19", np, r, host, main, other)
			}
			if want := plain[r][2]; atHost != want {
				t.Errorf("np=%d rank %d: %d threads at the host's nice preloaded, %d plain (the main thread and the MPI's)", np, r, atHost, want)
			}
			if at19 < 2 {
				t.Errorf("np=%d rank %d: %d threads at nice 19, want the Go runtime's (at least 2)", np, r, at19)
			}
		}
	}
	out, errs := run(t, in, 2, exe, lib, "SHMCOLL_MPI_NICE=0", farPair)
	for r, v := range threadCounts(t, out, 2) {
		if v[3] != 0 && v[0] != 19 {
			t.Errorf("SHMCOLL_MPI_NICE=0: rank %d has %d threads at nice 19:\n%s", r, v[3], errs)
		}
	}
	out, errs = run(t, in, 2, exe, lib, "SHMCOLL_MPI_NICE=20", "SHMCOLL_MPI_STATS=1", farPair)
	if !strings.Contains(out, "No Errors") {
		t.Fatalf("SHMCOLL_MPI_NICE=20: no \"No Errors\":\n%s\n%s", out, errs)
	}
	if n := strings.Count(errs, `SHMCOLL_MPI_NICE="20": want a nice value from 0 to 19`); n != 2 {
		t.Errorf("SHMCOLL_MPI_NICE=20: %d ranks report it, want 2:\n%s", n, errs)
	}
	if st := stats(errs); st["allreduce"][0] != 0 || st["allreduce"][1] == 0 {
		t.Errorf("SHMCOLL_MPI_NICE=20: allreduce served %d passed %d, want every call passed", st["allreduce"][0], st["allreduce"][1])
	}
}
