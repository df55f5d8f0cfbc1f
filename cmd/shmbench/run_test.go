package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shmcoll/shmcoll/internal/benchfmt"
	"github.com/shmcoll/shmcoll/launch"
	"github.com/shmcoll/shmcoll/mpi"
)

// envTestDispatch makes the test binary act as shmbench, so that the ranks
// shmbench run starts by re-executing itself are the test binary too.
const envTestDispatch = "SHMBENCH_TEST_DISPATCH"

func TestMain(m *testing.M) {
	if os.Getenv(envTestDispatch) == "1" {
		os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// shmbench runs a command in this process, with ranks re-executing the
// test binary. It fails the test if the command leaves a segment behind.
func shmbench(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	t.Setenv(envTestDispatch, "1")
	before := segments()
	var o, e bytes.Buffer
	code = dispatch(args, &o, &e)
	noLeaks(t, before)
	return code, o.String(), e.String()
}

// segments lists shmbench's own segments in /dev/shm: those of the arenas
// it names (the launcher's arena is a memfd, never in /dev/shm). Other
// packages' tests, running at the same time, have segments of their own.
func segments() []string {
	s, _ := filepath.Glob(fmt.Sprintf("/dev/shm/shmcoll.%d.%s*", os.Getuid(), arenaPrefix))
	return s
}

// noLeaks fails the test when a segment that was not there before is
// still there. A segment lives only until every rank has attached, so one
// still present after a grace period is a leak.
func noLeaks(t *testing.T, before []string) {
	t.Helper()
	var added []string
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		added = added[:0]
		for _, s := range segments() {
			if !slices.Contains(before, s) {
				added = append(added, s)
			}
		}
		if len(added) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(added) > 0 {
		t.Errorf("segments left in /dev/shm: %v", added)
	}
}

func TestRunBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-np", "0"}, "-np 0"},
		{[]string{"-coll", "allreduce,bogus"}, `unknown collective "bogus"`},
		{[]string{"-algo", "bogus"}, `unknown algorithm "bogus"`},
		{[]string{"-dtype", "float128"}, "-dtype"},
		{[]string{"-op", "avg"}, "-op"},
		{[]string{"-dtype", "float32", "-op", "band"}, "not defined for float32"},
		{[]string{"-dtype", "float32_int32"}, "pair types"},
		{[]string{"-sizes", "8:4"}, "-sizes"},
		{[]string{"-sizes", "12Q"}, "-sizes"},
		{[]string{"-format", "xml"}, `-format "xml"`},
		{[]string{"-iters", "-1"}, "-iters -1"},
		{[]string{"-time", "0s"}, "-time"},
		{[]string{"-bind", "numa"}, "-bind"},
		{[]string{"-nosuchflag"}, "nosuchflag"},
		{[]string{"extra"}, "unexpected arguments"},
	} {
		code, out, errOut := shmbench(t, append([]string{"run"}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) || out != "" {
			t.Errorf("run %v: exit %d, stderr %q, stdout %q; want exit 2 and %q", c.args, code, errOut, out, c.want)
		}
	}
	if code, _, errOut := shmbench(t, "run", "-h"); code != 0 || !strings.Contains(errOut, "usage: shmbench run") {
		t.Errorf("run -h: exit %d, %q", code, errOut)
	}
	if code, _, errOut := shmbench(t, "nosuchcommand"); code != 2 || !strings.Contains(errOut, "unknown command") {
		t.Errorf("unknown command: exit %d, %q", code, errOut)
	}
}

func TestParseRun(t *testing.T) {
	cfg, err := parseRun([]string{"-coll", "allreduce,barrier,allgather", "-algo", "all", "-sizes", "8,16,64", "-np", "4"}, os.Stderr, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.colls, []string{"allreduce", "barrier", "allgather"}) || cfg.np != 4 || cfg.npSet != 4 {
		t.Fatalf("parsed %+v", cfg)
	}
	cases := cfg.cases(4)
	var got []string
	for _, c := range cases {
		if c.algo == cfg.algos[c.coll][0] {
			got = append(got, fmt.Sprintf("%s:%d", c.coll, c.lay.bytes(8)))
		}
	}
	// allgather: 8 and 16 B round up to one float64 per rank (32 B) once.
	want := []string{"allreduce:8", "allreduce:16", "allreduce:64", "barrier:0", "allgather:32", "allgather:64"}
	if !slices.Equal(got, want) {
		t.Fatalf("cases %v, want %v", got, want)
	}
	for _, coll := range cfg.colls {
		if len(cfg.algos[coll]) == 0 || slices.Contains(cfg.algos[coll], "auto") {
			t.Errorf("-algo all for %s: %v", coll, cfg.algos[coll])
		}
	}
}

// TestRunFormats runs a short sweep on two processes in every format and
// parses each back.
func TestRunFormats(t *testing.T) {
	for _, format := range benchfmt.Formats {
		t.Run(format, func(t *testing.T) {
			code, out, errOut := shmbench(t, "run", "-np", "2", "-sizes", "8,4K", "-iters", "20", "-warmup", "0s", "-format", format)
			if code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
			}
			h, rs, err := benchfmt.Read(format, strings.NewReader(out))
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if len(rs) != 2 {
				t.Fatalf("%d results, want 2\n%s", len(rs), out)
			}
			for i, want := range []int64{8, 4096} {
				r := rs[i]
				if r.Coll != "allreduce" || r.Algo != "auto" || r.NP != 2 || r.Bytes != want || r.Iters != 20 ||
					r.Dtype != "float64" || r.Op != "sum" || r.Check != "ok" || r.MinUS <= 0 {
					t.Errorf("result %d: %+v", i, r)
				}
			}
			if format == "json" {
				if h == nil || h.NP != 2 || h.Launcher != "shmbench" || h.SIMD == "" || h.Tool != "shmbench" {
					t.Errorf("header %+v", h)
				}
			}
			summary := out
			if format != "table" {
				summary = errOut
			}
			if !strings.Contains(summary, "2 cases, every result checked: ok") {
				t.Errorf("no summary:\n%s", summary)
			}
		})
	}
}

// TestRunAllCollectives runs every collective with every algorithm on
// three processes (not a power of two) and checks every element of every
// result.
func TestRunAllCollectives(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every collective and algorithm")
	}
	dir := t.TempDir()
	code, out, errOut := shmbench(t, "run", "-np", "3", "-coll", "all", "-algo", "all", "-sizes", "8,1000", "-iters", "6",
		"-warmup", "0s", "-check", "-format", "json", "-dtype", "int32", "-op", "bxor", "-plot", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	_, rs, err := benchfmt.ReadJSON(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range rs {
		seen[r.Coll] = true
		if r.Check != "ok" || r.Iters != 6 || r.NP != 3 {
			t.Errorf("%+v", r)
		}
	}
	for _, c := range benchColls {
		if !seen[c] {
			t.Errorf("no result for %s", c)
		}
	}
	for _, f := range []string{"allreduce_np3_latency.png", "allreduce_np3_bandwidth.svg", "alltoallv_np3_latency.svg"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("plot %s: %v", f, err)
		}
	}
}

// TestRunCheckFails spoils rank 0's result once and expects every format
// of failure: the check field, a loud message, exit status 1.
func TestRunCheckFails(t *testing.T) {
	t.Setenv(envInject, "3")
	for _, full := range []bool{false, true} {
		args := []string{"run", "-np", "2", "-coll", "allreduce,allgather", "-sizes", "64", "-iters", "10", "-warmup", "0s", "-format", "csv"}
		if full {
			args = append(args, "-check")
		}
		code, out, errOut := shmbench(t, args...)
		if code != 1 || !strings.Contains(errOut, "CHECK FAILED: allreduce/auto at 64 B") {
			t.Fatalf("-check=%v: exit %d\n%s\n%s", full, code, out, errOut)
		}
		_, rs, err := benchfmt.Read("csv", strings.NewReader(out))
		if err != nil || len(rs) != 2 {
			t.Fatalf("%v: %v", err, rs)
		}
		for _, r := range rs {
			if !strings.Contains(r.Check, "rank 0: iteration 3: element") {
				t.Errorf("-check=%v: %s check %q", full, r.Coll, r.Check)
			}
		}
	}
}

func TestDefaultCommand(t *testing.T) {
	if defaultCommand != "run" {
		t.Fatalf("default command %q", defaultCommand)
	}
}

// TestRunAsRank runs shmbench run as the ranks of other launchers: the
// launch package as shmrun uses it, and mpirun of each installed MPI. Rank
// 0 formats the results itself.
func TestRunAsRank(t *testing.T) {
	if testing.Short() {
		t.Skip("starts several jobs")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(envTestDispatch, "1")
	args := []string{"run", "-sizes", "8,1K", "-iters", "10", "-warmup", "0s", "-format", "json", "-algo", "auto,flat"}
	check := func(t *testing.T, launcher, out, errOut string) {
		t.Helper()
		h, rs, err := benchfmt.ReadJSON(strings.NewReader(out))
		if err != nil {
			t.Fatalf("%v\n%s\n%s", err, out, errOut)
		}
		if h == nil || h.Launcher != launcher || h.NP != 2 || len(rs) != 4 {
			t.Fatalf("header %+v, %d results\n%s\n%s", h, len(rs), out, errOut)
		}
		for _, r := range rs {
			if r.Check != "ok" || r.Iters != 10 || r.NP != 2 {
				t.Errorf("%+v", r)
			}
		}
	}
	t.Run("launch", func(t *testing.T) {
		before := segments()
		var o, e bytes.Buffer
		job, err := launch.Start(context.Background(), launch.Config{NP: 2, Prog: exe, Args: args, Stdout: &o, Stderr: &e, NoPrefix: true, Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if err := job.Wait(); err != nil {
			t.Fatalf("%v\n%s", err, e.String())
		}
		noLeaks(t, before)
		check(t, "shmrun", o.String(), e.String())
	})
	for _, impl := range mpi.Impls {
		t.Run(string(impl), func(t *testing.T) {
			in := mpi.Lookup(impl)
			if err := in.Err(); err != nil {
				t.Skip(err)
			}
			before := segments()
			cmd, err := in.Command(context.Background(), 2, exe, args...)
			if err != nil {
				t.Fatal(err)
			}
			var o, e bytes.Buffer
			cmd.Stdout, cmd.Stderr = &o, &e
			if err := cmd.Run(); err != nil {
				t.Fatalf("%v\n%s\n%s", err, o.String(), e.String())
			}
			noLeaks(t, before)
			check(t, string(impl), o.String(), e.String())
		})
	}
}

// TestRunTypes checks every collective of the selection table in the
// half-precision and complex types, with operators whose results must stay
// exact there.
func TestRunTypes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts several jobs")
	}
	for _, c := range [][2]string{{"bfloat16", "sum"}, {"float16", "prod"}, {"complex128", "sum"}, {"uint8", "max"}} {
		code, out, errOut := shmbench(t, "run", "-np", "3", "-coll", "all", "-sizes", "6,2000", "-iters", "4",
			"-warmup", "0s", "-check", "-format", "csv", "-dtype", c[0], "-op", c[1])
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s\n%s", c, code, out, errOut)
		}
		_, rs, err := benchfmt.Read("csv", strings.NewReader(out))
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) < 2*len(benchColls)-3 {
			t.Errorf("%v: %d results", c, len(rs))
		}
		for _, r := range rs {
			if r.Check != "ok" || (r.Coll != "barrier" && r.Dtype != c[0]) {
				t.Errorf("%v: %+v", c, r)
			}
		}
	}
}
