package mpibench

import (
	"context"
	"errors"
	"os"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/shmcoll/shmcoll/mpi"
)

func TestOptionsArgs(t *testing.T) {
	cases := []struct {
		o    Options
		want string
	}{
		{Options{}, ""},
		{Options{Colls: []string{"allreduce", "barrier"}, Sizes: []int64{8, 1 << 20}}, "-c allreduce,barrier -s 8,1048576"},
		{Options{Iters: 20, Time: time.Second, Warmup: -1}, "-n 20 -w 0"},
		{Options{Time: 250 * time.Millisecond, Warmup: 5 * time.Millisecond, Dtype: "int32"}, "-t 0.25 -w 0.005 -d int32"},
		{Options{Inject: 4}, "-j 3"},
		{Options{ServedBarrier: true, Inject: 1}, "-b mpi -j 0"},
		{Options{ServedBarrier: true, Hier: true}, ""},
	}
	for _, c := range cases {
		got, err := c.o.Args()
		if err != nil {
			t.Errorf("%+v: %v", c.o, err)
			continue
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("%+v: %q, want %q", c.o, strings.Join(got, " "), c.want)
		}
	}
	bad := []Options{
		{Colls: []string{"scan"}},
		{Sizes: []int64{-1}},
		{Sizes: make([]int64, 257)},
		{Iters: -1},
		{Dtype: "bfloat16"},
	}
	for _, o := range bad {
		if _, err := o.Args(); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

const sample = `{"type":"run","impl":"openmpi-4.1.4","library":"Open MPI v4.1.4, package: Debian OpenMPI","np":2,"dtype":"float64","op":"sum","clock":"CLOCK_MONOTONIC"}

{"type":"result","coll":"allreduce","algo":"mpi","impl":"openmpi-4.1.4","np":2,"dtype":"float64","op":"sum","bytes":8,"count":1,"iters":58784,"min_us":0.3400,"median_us":0.5100,"mean_us":0.5465,"max_us":53.1900,"p99_us":0.9010,"span_us":0.5110,"algbw_GBps":0.0157,"busbw_GBps":0.0157,"check":"ok"}
{"type":"result","coll":"barrier","algo":"mpi","impl":"openmpi-4.1.4","np":2,"dtype":"none","op":"sum","bytes":0,"count":0,"iters":7,"min_us":0.32,"median_us":0.48,"mean_us":0.5358,"max_us":54.861,"p99_us":1.012,"span_us":0.485,"algbw_GBps":0,"busbw_GBps":0,"check":"rank 1: 1 wrong elements, e.g. index 0"}
`

func TestParse(t *testing.T) {
	rep, err := Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	wantHeader := Header{Type: "run", Impl: "openmpi-4.1.4", Library: "Open MPI v4.1.4, package: Debian OpenMPI", NP: 2, Dtype: "float64", Op: "sum", Clock: "CLOCK_MONOTONIC"}
	if rep.Header != wantHeader {
		t.Errorf("header %+v, want %+v", rep.Header, wantHeader)
	}
	want0 := Result{Type: "result", Coll: "allreduce", Algo: "mpi", Impl: "openmpi-4.1.4", NP: 2, Dtype: "float64", Op: "sum",
		Bytes: 8, Count: 1, Iters: 58784, MinUS: 0.34, MedianUS: 0.51, MeanUS: 0.5465, MaxUS: 53.19, P99US: 0.901, SpanUS: 0.511,
		AlgBW: 0.0157, BusBW: 0.0157, Check: "ok"}
	if len(rep.Results) != 2 || !reflect.DeepEqual(rep.Results[0], want0) {
		t.Fatalf("results %+v, want first %+v", rep.Results, want0)
	}
	if bad := rep.Failed(); len(bad) != 1 || bad[0].Coll != "barrier" {
		t.Errorf("Failed() = %+v, want the barrier line", bad)
	}

	lines := strings.Split(sample, "\n")
	broken := map[string]string{
		"no run line":        lines[2],
		"result before run":  lines[2] + "\n" + lines[0],
		"two run lines":      lines[0] + "\n" + lines[0],
		"not json":           lines[0] + "\n{\"type\":",
		"unknown type":       lines[0] + "\n{\"type\":\"summary\"}",
		"unknown field":      lines[0] + "\n" + strings.Replace(lines[2], `"iters"`, `"iterations"`, 1),
		"no check":           lines[0] + "\n" + strings.Replace(lines[2], `"check":"ok"`, `"check":""`, 1),
		"unknown collective": lines[0] + "\n" + strings.Replace(lines[2], "allreduce", "scan", 1),
	}
	for name, text := range broken {
		if _, err := Parse(strings.NewReader(text)); err == nil {
			t.Errorf("%s: parsed without error", name)
		}
	}
}

func installed(t *testing.T, impl mpi.Impl) {
	t.Helper()
	if err := mpi.Lookup(impl).Err(); err != nil {
		t.Skipf("skipping the real %s run: %v", impl, err)
	}
}

// TestRun runs the real benchmark briefly with every installed MPI.
func TestRun(t *testing.T) {
	for _, impl := range mpi.Impls {
		t.Run(string(impl), func(t *testing.T) {
			installed(t, impl)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			sizes := []int64{8, 1000, 65536}
			rep, err := Run(ctx, impl, Options{NP: 2, Sizes: sizes, Iters: 20, Warmup: -1})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(rep.Header.Impl, string(impl)+"-") || rep.Header.NP != 2 || rep.Header.Dtype != "float64" {
				t.Errorf("header %+v", rep.Header)
			}
			// Bytes as docs/DESIGN.md counts them, rounded to whole elements
			// (and to np elements for reduce_scatter_block, allgather and
			// alltoall).
			want := map[string][]int64{
				"allreduce":            {8, 1000, 65536},
				"alltoall":             {16, 992, 65536},
				"reduce_scatter":       {8, 992, 65536}, // blocks of m/2 and m/2+m elements
				"allgatherv":           {8, 992, 65536},
				"alltoallv":            {8, 992, 65536}, // each rank's row of the same blocks, rotated
				"reduce_scatter_block": {16, 992, 65536},
				"allgather":            {16, 992, 65536},
				"bcast":                {8, 1000, 65536},
				"reduce":               {8, 1000, 65536},
				"barrier":              {0},
				"gather":               {16, 992, 65536},
				"scatter":              {16, 992, 65536},
			}
			got := map[string][]int64{}
			for _, r := range rep.Results {
				got[r.Coll] = append(got[r.Coll], r.Bytes)
				if r.Check != "ok" || r.Iters != 20 || r.NP != 2 || r.Algo != "mpi" {
					t.Errorf("%+v", r)
				}
				if !(r.MinUS <= r.MedianUS && r.MedianUS <= r.MaxUS && r.MinUS <= r.MeanUS && r.MeanUS <= r.MaxUS && r.P99US <= r.MaxUS) {
					t.Errorf("%s %d B: inconsistent statistics %+v", r.Coll, r.Bytes, r)
				}
				if r.Coll != "barrier" && r.Count*8 != r.Bytes && r.Count*8*2 != r.Bytes {
					t.Errorf("%s: count %d for %d bytes", r.Coll, r.Count, r.Bytes)
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("sizes run %v, want %v", got, want)
			}
		})
	}
}

// TestRunOversubscribed runs more ranks than CPUs (the oversubscribed launch
// line) with a 32-bit type.
func TestRunOversubscribed(t *testing.T) {
	for _, impl := range mpi.Impls {
		t.Run(string(impl), func(t *testing.T) {
			installed(t, impl)
			np := runtime.NumCPU() + 1
			if np > 8 && os.Getenv("SHMCOLL_LONG") != "1" {
				t.Skipf("oversubscribing needs %d ranks here; set SHMCOLL_LONG=1", np)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			rep, err := Run(ctx, impl, Options{NP: np, Colls: []string{"allreduce", "allgather", "alltoall", "reduce_scatter", "allgatherv", "alltoallv"}, Sizes: []int64{4096}, Iters: 10, Warmup: -1, Dtype: "int32"})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Results) != 6 || rep.Header.NP != np || rep.Header.Dtype != "int32" {
				t.Fatalf("report %+v", rep)
			}
			for _, r := range rep.Results {
				if r.Check != "ok" || r.Iters != 10 {
					t.Errorf("%+v", r)
				}
			}
		})
	}
}

// TestRunDetectsWrongResult corrupts a result inside the benchmark and
// expects the run to fail its check.
func TestRunDetectsWrongResult(t *testing.T) {
	impl := mpi.OpenMPI
	if mpi.Lookup(impl).Err() != nil {
		impl = mpi.MPICH
	}
	installed(t, impl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, coll := range []string{"allreduce", "reduce_scatter_block", "allgather", "alltoall", "reduce_scatter", "allgatherv", "alltoallv", "gather", "scatter"} {
		rep, err := Run(ctx, impl, Options{NP: 2, Colls: []string{coll}, Sizes: []int64{64}, Iters: 10, Warmup: -1, Inject: 4})
		if !errors.Is(err, ErrCheck) {
			t.Fatalf("%s: got %v, want ErrCheck", coll, err)
		}
		if len(rep.Results) != 1 || !strings.Contains(rep.Results[0].Check, "rank 0") {
			t.Fatalf("%s: report %+v", coll, rep)
		}
	}
}

func TestRunBadOptions(t *testing.T) {
	if _, err := Run(context.Background(), mpi.OpenMPI, Options{NP: 0}); err == nil {
		t.Error("NP 0 accepted")
	}
	if _, err := Run(context.Background(), mpi.Impl("lam"), Options{NP: 2}); err == nil || !strings.Contains(err.Error(), "lam") {
		t.Errorf("unknown MPI: %v", err)
	}
}

// TestRunHier builds hiercoll for every installed MPI and runs every
// collective it measures on 4 ranks in 2 emulated nodes (more ranks than
// CPUs here), then corrupts a result and expects the check to fail.
func TestRunHier(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts MPI jobs")
	}
	for _, impl := range mpi.Impls {
		t.Run(string(impl), func(t *testing.T) {
			installed(t, impl)
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute) // the first build compiles cgo
			defer cancel()
			o := Options{NP: 4, Sizes: []int64{8, 1000}, Iters: 5, Warmup: -1, Dtype: "int32", Hier: true, NodeSize: "2"}
			rep, err := Run(ctx, impl, o)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Header.Impl != "hier-"+string(impl) || rep.Header.NP != 4 || !strings.Contains(rep.Header.Library, `SHMCOLL_NODE_SIZE="2"`) {
				t.Errorf("header %+v", rep.Header)
			}
			want := map[string][]int64{ // as mpicoll's, without the barrier
				"allreduce":            {8, 1000},
				"reduce_scatter_block": {16, 992},
				"allgather":            {16, 992},
				"bcast":                {8, 1000},
				"reduce":               {8, 1000},
			}
			got := map[string][]int64{}
			for _, r := range rep.Results {
				got[r.Coll] = append(got[r.Coll], r.Bytes)
				if r.Check != "ok" || r.Iters != 5 || r.NP != 4 || r.Algo != "hier-auto" {
					t.Errorf("%+v", r)
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("sizes run %v, want %v", got, want)
			}
			o.Colls, o.Sizes, o.Iters, o.Inject = []string{"allreduce"}, []int64{64}, 6, 3
			if rep, err = Run(ctx, impl, o); !errors.Is(err, ErrCheck) || len(rep.Results) != 1 || !strings.Contains(rep.Results[0].Check, "rank 0") {
				t.Fatalf("corrupted result: got %v, %+v; want ErrCheck from rank 0", err, rep)
			}
		})
	}
}

// TestBuildHierMissing: without the MPI's pkg-config module, or outside any
// source tree, the build fails with an error naming what is missing.
func TestBuildHierMissing(t *testing.T) {
	installed(t, mpi.OpenMPI)
	t.Setenv("PKG_CONFIG_LIBDIR", t.TempDir())
	t.Setenv("PKG_CONFIG_PATH", "")
	_, err := buildHier(context.Background(), mpi.OpenMPI)
	if err == nil || !strings.Contains(err.Error(), "ompi-c (Debian package libopenmpi-dev)") {
		t.Errorf("no pkg-config module: %v", err)
	}
	if !isModuleRoot("../..") || isModuleRoot(".") || isModuleRoot(t.TempDir()) {
		t.Error("isModuleRoot does not tell the module root")
	}
}
