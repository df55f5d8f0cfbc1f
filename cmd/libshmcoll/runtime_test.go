//go:build mpi

package main

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
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
// documentation quotes (idle_gap.c, barrier_skew.c), preloaded, and checks
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
	} {
		exe := compile(t, in, dir, filepath.Join("..", "..", "docs", tc.src))
		out, errs := runArgs(t, in, 2, exe, lib, tc.args, "SHMCOLL_MPI_STATS=1")
		if !tc.want.MatchString(out) {
			t.Errorf("%s %v: output does not match %v:\n%s\n%s", tc.src, tc.args, tc.want, out, errs)
		}
		if st := stats(errs); len(tc.args) == 1 && st["allreduce"][0]+st["barrier"][0] == 0 {
			t.Errorf("%s %v: nothing served: %v", tc.src, tc.args, st)
		}
	}
}
