//go:build mpi

package main

import (
	"os"
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
