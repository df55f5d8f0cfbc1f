//go:build mpi

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shmcoll/shmcoll/mpi"
)

// These tests build libshmcoll for the MPI this package is built against
// (-tags mpi: Open MPI, -tags mpi,mpich: MPICH), compile the C and Fortran
// programs of testdata with that MPI's wrappers, and run them plain and
// with the library preloaded: every run prints "No Errors", and the
// preloaded run's statistics show the calls served.

var build struct {
	once sync.Once
	dir  string
	lib  string
	err  error
}

func tags() string {
	if mpi.Linked() == mpi.MPICH {
		return "mpi,mpich"
	}
	return "mpi"
}

// library builds libshmcoll.so once per test binary.
func library(t *testing.T) (mpi.Installation, string, string) {
	t.Helper()
	in := mpi.Lookup(mpi.Linked())
	if err := in.Err(); err != nil {
		t.Fatal(err)
	}
	build.once.Do(func() {
		build.dir, build.err = os.MkdirTemp("", "libshmcoll-test-")
		if build.err != nil {
			return
		}
		build.lib = filepath.Join(build.dir, "libshmcoll.so")
		cmd := exec.Command("go", "build", "-buildmode=c-shared", "-tags", tags(), "-o", build.lib, ".")
		if out, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("building libshmcoll: %v\n%s", err, out)
		}
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return in, build.dir, build.lib
}

func TestMain(m *testing.M) {
	rc := m.Run()
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
	os.Exit(rc)
}

// compile builds testdata/src (or src, when it is a path) with the MPI's C
// or Fortran wrapper.
func compile(t *testing.T, in mpi.Installation, dir, src string) string {
	t.Helper()
	path := src
	if !strings.Contains(src, "/") {
		path = filepath.Join("testdata", src)
	}
	base := filepath.Base(src)
	exe := filepath.Join(dir, strings.TrimSuffix(base, filepath.Ext(base))+"-"+string(in.Impl))
	if _, err := os.Stat(exe); err == nil {
		return exe
	}
	cc, args := in.MPICC, []string{"-O1", "-o", exe, path}
	if strings.HasSuffix(src, ".f90") {
		cc = strings.Replace(in.MPICC, "mpicc", "mpif90", 1)
		if _, err := exec.LookPath(cc); err != nil {
			t.Skipf("no Fortran compiler wrapper %s", cc)
		}
		args = append([]string{"-w"}, args...)
	}
	if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", cc, strings.Join(args, " "), err, out)
	}
	return exe
}

// run starts np ranks of exe, with lib preloaded unless it is "", and env
// given to every rank; it returns stdout and stderr.
func run(t *testing.T, in mpi.Installation, np int, exe, lib string, env ...string) (string, string) {
	t.Helper()
	return runArgs(t, in, np, exe, lib, nil, env...)
}

// runArgs is run with arguments for exe.
func runArgs(t *testing.T, in mpi.Installation, np int, exe, lib string, args []string, env ...string) (string, string) {
	t.Helper()
	argv := in.Args(np, exe)
	var flags []string
	if lib != "" {
		env = append(env, "LD_PRELOAD="+lib)
	}
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		if in.Impl == mpi.OpenMPI {
			flags = append(flags, "-x", e)
		} else {
			flags = append(flags, "-genv", k, v)
		}
	}
	argv = append(append(append(append([]string{}, argv[:len(argv)-1]...), flags...), exe), args...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(argv, " "), err, out.String(), errb.String())
	}
	return out.String(), errb.String()
}

var statLine = regexp.MustCompile(`(?m)^shmcoll: ([a-z_]+) served=(\d+) passed=(\d+)(.*)$`)

// stats parses the SHMCOLL_MPI_STATS table: served and passed per collective.
func stats(stderr string) map[string][2]int {
	m := map[string][2]int{}
	for _, f := range statLine.FindAllStringSubmatch(stderr, -1) {
		s, _ := strconv.Atoi(f[2])
		p, _ := strconv.Atoi(f[3])
		m[f[1]] = [2]int{s, p}
	}
	return m
}

func shmEntries(t *testing.T) map[string]bool {
	t.Helper()
	es, err := os.ReadDir("/dev/shm")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]bool{}
	for _, e := range es {
		if strings.HasPrefix(e.Name(), "shmcoll.") {
			m[e.Name()] = true
		}
	}
	return m
}

// checkShm fails the test for every shmcoll.* entry of /dev/shm that was
// not there before and is still there after ten seconds: go test runs
// other packages' tests at the same time (collectives/hier's make arenas
// of their own), whose entries go when they end, where a leak stays.
func checkShm(t *testing.T, before map[string]bool) {
	t.Helper()
	var left []string
	for try := 0; try < 100; try++ {
		left = left[:0]
		for n := range shmEntries(t) {
			if !before[n] {
				left = append(left, n)
			}
		}
		if len(left) == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, n := range left {
		t.Errorf("left in /dev/shm: %s", n)
	}
}

// farPair makes a communicator of two ranks count as far apart, so that
// the shipped bands serve its small calls whatever the placement (a near
// pair passes some of them: TestNearPair).
const farPair = "SHMCOLL_MPI_PAIR=far"

// long reports whether SHMCOLL_LONG=1 asks for the long test modes.
func long() bool { return os.Getenv("SHMCOLL_LONG") == "1" }

// TestSmoke runs every intercepted collective (testdata/smoke.c) at np
// 2 to 4 (5 with SHMCOLL_LONG=1): exact results plain and preloaded,
// every collective served.
func TestSmoke(t *testing.T) {
	in, dir, lib := library(t)
	exe := compile(t, in, dir, "smoke.c")
	before := shmEntries(t)
	last := 4
	if long() {
		last = 5
	}
	for np := 2; np <= last; np++ {
		t.Run(fmt.Sprintf("np=%d", np), func(t *testing.T) {
			if np == 2 {
				if out, _ := run(t, in, np, exe, ""); !strings.Contains(out, "No Errors") {
					t.Fatalf("plain run: no \"No Errors\":\n%s", out)
				}
			}
			out, errs := run(t, in, np, exe, lib, "SHMCOLL_MPI_STATS=1", "SHMCOLL_MPI_BANDS=all")
			if !strings.Contains(out, "No Errors") {
				t.Fatalf("preloaded run: no \"No Errors\":\n%s\n%s", out, errs)
			}
			if strings.Contains(errs, "pass:fallback=") {
				t.Errorf("served calls fell back to the MPI:\n%s", errs)
			}
			st := stats(errs)
			for _, c := range []string{"allreduce", "reduce_scatter_block", "reduce_scatter", "allgather", "allgatherv",
				"bcast", "reduce", "barrier", "alltoall", "alltoallv", "scatter", "gather", "scan", "exscan"} {
				if st[c][0] == 0 {
					t.Errorf("%s: no call served (statistics %v)\n%s", c, st[c], errs)
				}
			}
			if st["allgather"][1] != 0 || st["bcast"][1] != 0 && np > 2 {
				t.Errorf("allgather or bcast passed calls (derived datatypes are served packed): %v\n%s", st, errs)
			}
		})
	}
	// The shipped bands serve a collective at some sizes and pass it at
	// others (Open MPI: reduce_scatter_block; MPICH: bcast).
	out, errs := run(t, in, 3, exe, lib, "SHMCOLL_MPI_STATS=1")
	if !strings.Contains(out, "No Errors") {
		t.Fatalf("shipped bands: no \"No Errors\":\n%s\n%s", out, errs)
	}
	if !regexp.MustCompile(`(?m)^shmcoll: \w+ served=[1-9][0-9]* .*pass:size=`).MatchString(errs) {
		t.Errorf("shipped bands: want a collective served at some sizes and passed by size at others:\n%s", errs)
	}
	checkShm(t, before)
}

// TestOff checks that SHMCOLL_MPI=off passes every call through.
func TestOff(t *testing.T) {
	in, dir, lib := library(t)
	exe := compile(t, in, dir, "smoke.c")
	out, errs := run(t, in, 3, exe, lib, "SHMCOLL_MPI_STATS=1", "SHMCOLL_MPI=off")
	if !strings.Contains(out, "No Errors") {
		t.Fatalf("no \"No Errors\":\n%s\n%s", out, errs)
	}
	st := stats(errs)
	if len(st) == 0 {
		t.Fatalf("no statistics:\n%s", errs)
	}
	for c, v := range st {
		if v[0] != 0 || v[1] == 0 {
			t.Errorf("%s: served %d passed %d with SHMCOLL_MPI=off", c, v[0], v[1])
		}
	}
}

// TestProgress runs testdata/progress.c: a rank waiting in a served
// collective must let a pending MPI_Isend (and an MPI_Ibarrier) progress.
func TestProgress(t *testing.T) {
	in, dir, lib := library(t)
	exe := compile(t, in, dir, "progress.c")
	for _, np := range []int{2, 3} {
		out, errs := run(t, in, np, exe, lib, "SHMCOLL_MPI_STATS=1", farPair)
		if !strings.Contains(out, "No Errors") {
			t.Fatalf("np=%d: no \"No Errors\":\n%s\n%s", np, out, errs)
		}
		if st := stats(errs); st["allreduce"][0] < 4 {
			t.Errorf("np=%d: allreduce not served: %v", np, st)
		}
	}
}

// TestFortran runs MPI_ALLREDUCE from Fortran. MPICH's Fortran library
// calls the C entry points, so the calls are served; Open MPI's calls
// PMPI_Allreduce directly, so they pass by the library unseen.
func TestFortran(t *testing.T) {
	in, dir, lib := library(t)
	exe := compile(t, in, dir, "allreduce.f90")
	out, errs := run(t, in, 3, exe, lib, "SHMCOLL_MPI_STATS=1")
	if !strings.Contains(out, "No Errors") {
		t.Fatalf("no \"No Errors\":\n%s\n%s", out, errs)
	}
	st := stats(errs)
	if in.Impl == mpi.MPICH && st["allreduce"][0] != 4 {
		t.Errorf("MPICH: want 4 allreduces served, statistics %v\n%s", st, errs)
	}
	if in.Impl == mpi.OpenMPI && len(st) != 0 {
		t.Errorf("Open MPI: the library saw Fortran calls: %v", st)
	}
}

// TestNodes runs testdata/smoke.c on emulated nodes (SHMCOLL_NODE_SIZE=2,
// so the last node is smaller; also np=4 with SHMCOLL_LONG=1): the
// collectives collectives/hier has are served by it, the others pass.
func TestNodes(t *testing.T) {
	in, dir, lib := library(t)
	exe := compile(t, in, dir, "smoke.c")
	before := shmEntries(t)
	nps := []int{5}
	if long() {
		nps = []int{4, 5}
	}
	for _, np := range nps {
		out, errs := run(t, in, np, exe, lib, "SHMCOLL_MPI_STATS=1", "SHMCOLL_MPI_BANDS=all", "SHMCOLL_NODE_SIZE=2")
		if !strings.Contains(out, "No Errors") {
			t.Fatalf("np=%d: no \"No Errors\":\n%s\n%s", np, out, errs)
		}
		st := stats(errs)
		for _, c := range []string{"allreduce", "reduce_scatter_block", "reduce_scatter", "allgather", "allgatherv", "bcast", "reduce"} {
			if st[c][0] == 0 || !strings.Contains(errs, "shmcoll: "+c+" served") {
				t.Errorf("np=%d: %s not served: %v\n%s", np, c, st[c], errs)
			}
		}
		if !regexp.MustCompile(`(?m)^shmcoll: allreduce .*alg:hier=`).MatchString(errs) {
			t.Errorf("np=%d: no allreduce served by hier:\n%s", np, errs)
		}
		for _, c := range []string{"alltoall", "scan", "gather"} {
			if st[c][0] != 0 {
				t.Errorf("np=%d: %s served across nodes: %v", np, c, st[c])
			}
		}
	}
	checkShm(t, before)
}

// TestAlltoallvBand runs testdata/a2avband.c at np 2 to 4 with the band
// alltoallv=1:4K: the calls in which one rank sends more (and only that
// rank and its receiver know it from their counts) are declined on every
// rank in the served call's first step and pass, the others are served,
// and all results are exact.
func TestAlltoallvBand(t *testing.T) {
	in, dir, lib := library(t)
	exe := compile(t, in, dir, "a2avband.c")
	before := shmEntries(t)
	for np := 2; np <= 4; np++ {
		out, errs := run(t, in, np, exe, lib, "SHMCOLL_MPI_STATS=1", "SHMCOLL_MPI_BANDS=alltoallv=1:4K")
		if !strings.Contains(out, "No Errors") {
			t.Fatalf("np=%d: no \"No Errors\":\n%s\n%s", np, out, errs)
		}
		if !regexp.MustCompile(`(?m)^shmcoll: alltoallv served=6 passed=6 .*pass:declined=6$`).MatchString(errs) {
			t.Errorf("np=%d: want 6 alltoallv calls served and 6 declined in the call:\n%s", np, errs)
		}
	}
	checkShm(t, before)
}

// TestNearPair runs testdata/smoke.c at np = 2 with a band for near pairs
// (allreduce@near=1K:inf): a pair taken as near (SHMCOLL_MPI_PAIR=near)
// passes the smaller allreduces by size and serves the larger, a far one
// serves them all, and ranks that disagree (one near, one far: a wrapper
// sets the variable per rank) agree on far, with exact results throughout.
func TestNearPair(t *testing.T) {
	in, dir, lib := library(t)
	exe := compile(t, in, dir, "smoke.c")
	before := shmEntries(t)
	wrap := filepath.Join(dir, "pair.sh")
	script := "#!/bin/sh\nr=${OMPI_COMM_WORLD_RANK:-$PMI_RANK}\n" +
		"if [ \"$r\" = 0 ]; then SHMCOLL_MPI_PAIR=near; else SHMCOLL_MPI_PAIR=far; fi\n" +
		"export SHMCOLL_MPI_PAIR\nexec \"$@\"\n"
	if err := os.WriteFile(wrap, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		exe  string
		args []string
		pair string
		near bool
	}{
		{"near", exe, nil, "near", true},
		{"far", exe, nil, "far", false},
		{"disagree", wrap, []string{exe}, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := []string{"SHMCOLL_MPI_STATS=1", "SHMCOLL_MPI_BANDS=allreduce@near=1K:inf"}
			if c.pair != "" {
				env = append(env, "SHMCOLL_MPI_PAIR="+c.pair)
			}
			out, errs := runArgs(t, in, 2, c.exe, lib, c.args, env...)
			if !strings.Contains(out, "No Errors") {
				t.Fatalf("no \"No Errors\":\n%s\n%s", out, errs)
			}
			st := stats(errs)["allreduce"]
			passed := regexp.MustCompile(`(?m)^shmcoll: allreduce .*pass:size=[1-9]`).MatchString(errs)
			if st[0] == 0 || passed != c.near {
				t.Errorf("allreduce served %d passed %d (by size: %v); want served calls, and passed by size only if near\n%s",
					st[0], st[1], passed, errs)
			}
		})
	}
	checkShm(t, before)
}

// TestMemo runs testdata/memo.c at np = 2 and 3: calls passed on
// communicators of one rank, then the same calls on a duplicate of
// MPI_COMM_WORLD made after the first is freed (often with its handle),
// and bcasts passed for a derived datatype of mixed types, then of the
// same count with a derived datatype of doubles made after the first is
// freed (often with its handle): the pass memo must not carry over, so
// the later calls are served, with exact results. With -rs, reduce_scatter
// passes below its band and its memo, which keys the counts' total, must
// let the same call with larger counts (from the same array) be served,
// also after a pass on a communicator of one rank.
func TestMemo(t *testing.T) {
	in, dir, lib := library(t)
	exe := compile(t, in, dir, "memo.c")
	before := shmEntries(t)
	for _, np := range []int{2, 3} {
		out, errs := run(t, in, np, exe, lib, "SHMCOLL_MPI_STATS=1", "SHMCOLL_MPI_BANDS=all")
		if !strings.Contains(out, "No Errors") {
			t.Fatalf("np=%d: no \"No Errors\":\n%s\n%s", np, out, errs)
		}
		st := stats(errs)
		// allreduce: 20 served on the duplicates and the last on MPI_COMM_WORLD.
		// bcast: per round 1 served on the duplicate and 2 with the
		// doubles, 3 passed on one rank and 2 with the mixed datatype.
		if st["bcast"] != [2]int{60, 100} || st["allreduce"] != [2]int{21, 20} {
			t.Errorf("np=%d: bcast served/passed %v (want 60/100), allreduce %v (want 21/20)\n%s%s",
				np, st["bcast"], st["allreduce"], out, errs)
		}
		t.Logf("np=%d: %s", np, strings.TrimSpace(strings.Split(out, "\n")[0]))
		out, errs = runArgs(t, in, np, exe, lib, []string{"-rs"}, "SHMCOLL_MPI_STATS=1",
			"SHMCOLL_MPI_BANDS=reduce_scatter=64:inf", "SHMCOLL_MPI_PAIR=far")
		if !strings.Contains(out, "No Errors") {
			t.Fatalf("np=%d -rs: no \"No Errors\":\n%s\n%s", np, out, errs)
		}
		if st := stats(errs); st["reduce_scatter"] != [2]int{40, 60} {
			t.Errorf("np=%d: reduce_scatter served/passed %v, want 40/60\n%s%s", np, st["reduce_scatter"], out, errs)
		}
	}
	checkShm(t, before)
}
