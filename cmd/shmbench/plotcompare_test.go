package main

import (
	"bytes"
	"encoding/json"
	"image"
	_ "image/png"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/shmcoll/shmcoll/internal/benchfmt"
	"github.com/shmcoll/shmcoll/mpi"
)

// syntheticCompare writes what compare -format json writes for np ranks:
// the header, the blocks and the rows compareRows makes of them. Per
// implementation and round, us gives each size's time; probe gives the
// probe of round r's block of impls[i].
func syntheticCompare(t *testing.T, impls []compareImpl, np int, colls []string, sizes []int64, rounds int,
	us func(impl string, round int, coll string, bytes int64) float64, probe func(r, i int) float64) string {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	h := benchfmt.Header{Type: "run", NP: np, Dtype: "float64", Op: "sum"}
	if err := enc.Encode(h); err != nil {
		t.Fatal(err)
	}
	var blocks []*block
	for r := range rounds {
		for i, p := range impls {
			b := &block{Type: "block", Round: r + 1, Impl: p.name, ProbeNS: probe(r, i), byKey: map[compareKey]int{}}
			for _, c := range colls {
				for _, s := range sizes {
					b.byKey[compareKey{c, s}] = len(b.Results)
					b.Results = append(b.Results, benchfmt.Result{Type: "result", Coll: c, Algo: p.name, NP: np, Bytes: s,
						MedianUS: us(p.name, r, c, s), Check: "ok"})
				}
			}
			blocks = append(blocks, b)
			if err := enc.Encode(b); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, row := range compareRows(blocks, impls, rounds) {
		row.NP, row.Dtype = np, "float64"
		if err := enc.Encode(row); err != nil {
			t.Fatal(err)
		}
	}
	f := filepath.Join(t.TempDir(), "compare.json")
	if err := os.WriteFile(f, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

var mpiImpls = []compareImpl{{name: "openmpi", inst: &mpi.Installation{Impl: mpi.OpenMPI}}, {name: "mpich", inst: &mpi.Installation{Impl: mpi.MPICH}}, {name: "shmcoll"}}

// ratioTimes: openmpi takes 10 us, mpich 20, shmcoll 10*np/8 per KiB
// (at least 1) times the round's factor, so the ratio to the faster MPI
// is np/8 * max(1, KiB) * factor[round].
func ratioTimes(np int, factor []float64) func(string, int, string, int64) float64 {
	return func(impl string, r int, _ string, b int64) float64 {
		switch impl {
		case "openmpi":
			return 10
		case "mpich":
			return 20
		}
		return 10 * float64(np) / 8 * max(1, float64(b)/1024) * factor[r]
	}
}

func decodePNG(t *testing.T, file string) image.Rectangle {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, format, err := image.Decode(f)
	if err != nil || format != "png" {
		t.Fatalf("%s: %v (format %q)", file, err, format)
	}
	return img.Bounds()
}

// TestPlotCompare merges the outputs of np 2, 4 and 8 into one image of
// two panels and checks the lines' values and the image's size.
func TestPlotCompare(t *testing.T) {
	colls := []string{"allreduce", "bcast"}
	sizes := []int64{8, 1024, 4096}
	var files []string
	for _, np := range []int{2, 4, 8} {
		files = append(files, syntheticCompare(t, mpiImpls, np, colls, sizes, 3, ratioTimes(np, []float64{1, 1, 2}), roundProbe))
	}
	cfg, err := parsePlot([]string{"-compare", strings.Join(files, ","), "-o", "x.png"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	var runs []*compareRun
	for _, f := range files {
		r, err := readCompareFile(f)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	gotColls, lines, name, err := ratioLines(cfg, runs)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(gotColls, ",") != "allreduce,bcast" || name != mpiRatio {
		t.Fatalf("collectives %v, ratio %v", gotColls, name)
	}
	for _, c := range colls {
		if len(lines[c]) != 3 {
			t.Fatalf("%s: %d lines, want one per np", c, len(lines[c]))
		}
		for k, np := range []int{2, 4, 8} {
			s := lines[c][k]
			if s.np != np || s.label != "np="+strconv.Itoa(np) || len(s.xys) != len(sizes) {
				t.Fatalf("%s line %d: %+v", c, k, s)
			}
			for i, xy := range s.xys {
				// Rounds' factors 1, 1, 2: the median is factor 1.
				want := float64(np) / 8 * max(1, float64(sizes[i])/1024)
				if xy.X != float64(sizes[i]) || !near(xy.Y, want) {
					t.Errorf("%s np=%d point %d: %v, want (%d, %v)", c, np, i, xy, sizes[i], want)
				}
			}
		}
	}

	out := filepath.Join(t.TempDir(), "ratio.png")
	code, _, errOut := shmbench(t, "plot", "-compare", strings.Join(files, ","), "-o", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// Two collectives: two panels side by side.
	want := image.Rect(0, 0, 2*int(ratioPanelW.Dots(ratioDPI)), int(ratioPanelH.Dots(ratioDPI)))
	if got := decodePNG(t, out); got != want {
		t.Errorf("image %v, want %v", got, want)
	}
}

// roundProbe: rounds 1 and 2 see one placement (probes about 50 ns),
// round 3 a farther one that moves between blocks (150 ns, then 300).
func roundProbe(r, i int) float64 {
	switch {
	case r < 2:
		return 50 + float64(i)
	case i == 0:
		return 150
	}
	return 300
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Abs(b) }

// TestPlotComparePlacement splits the rounds at a probe time (roundProbe:
// rounds 1 and 2 below 100 ns, round 3 above) and keeps the steady rounds
// (1 and 2).
func TestPlotComparePlacement(t *testing.T) {
	f := syntheticCompare(t, mpiImpls, 2, []string{"allreduce"}, []int64{8, 2048}, 3, ratioTimes(2, []float64{1, 1.5, 3}), roundProbe)
	run, err := readCompareFile(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args   []string
		labels []string
		factor []float64 // per line: the median factor of its rounds
	}{
		{[]string{"-near", "100"}, []string{"np=2, probe < 100 ns", "np=2, probe >= 100 ns"}, []float64{1.25, 3}},
		{[]string{"-placement", "steady"}, []string{"np=2"}, []float64{1.25}},
	} {
		cfg, err := parsePlot(append([]string{"-compare", f}, c.args...), &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		_, lines, _, err := ratioLines(cfg, []*compareRun{run})
		if err != nil {
			t.Fatal(err)
		}
		ls := lines["allreduce"]
		if len(ls) != len(c.labels) {
			t.Fatalf("%v: %d lines, want %d", c.args, len(ls), len(c.labels))
		}
		for k, s := range ls {
			if s.label != c.labels[k] || len(s.xys) != 2 {
				t.Fatalf("%v line %d: %+v", c.args, k, s)
			}
			for i, b := range []float64{8, 2048} {
				want := 2.0 / 8 * max(1, b/1024) * c.factor[k]
				if !near(s.xys[i].Y, want) {
					t.Errorf("%v %s at %v B: %v, want %v", c.args, s.label, b, s.xys[i].Y, want)
				}
			}
		}
	}
}

// TestPlotCompareOtherBuild: without an MPI, the ratio drawn is the one of
// shmcoll to shmcoll@PATH; a name that no row has is an error.
func TestPlotCompareOtherBuild(t *testing.T) {
	impls := []compareImpl{{name: "shmcoll"}, {name: "shmcoll@/x/shmbench", base: "shmcoll", baseFirst: true}}
	times := func(impl string, _ int, _ string, _ int64) float64 {
		if impl == "shmcoll" {
			return 3
		}
		return 4
	}
	f := syntheticCompare(t, impls, 2, []string{"allreduce"}, []int64{8}, 1, times, roundProbe)
	out := filepath.Join(t.TempDir(), "ratio.png")
	if code, _, errOut := shmbench(t, "plot", "-compare", f, "-o", out); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := image.Rect(0, 0, int(ratioPanelW.Dots(ratioDPI)), int(ratioPanelH.Dots(ratioDPI)))
	if got := decodePNG(t, out); got != want {
		t.Errorf("image %v, want %v", got, want)
	}
	run, _ := readCompareFile(f)
	_, lines, name, err := ratioLines(&plotConfig{placement: "all"}, []*compareRun{run})
	if err != nil || name != "shmcoll/shmcoll@/x/shmbench" || lines["allreduce"][0].xys[0].Y != 0.75 {
		t.Fatalf("%v %v %+v", err, name, lines["allreduce"])
	}
	if code, _, errOut := shmbench(t, "plot", "-compare", f, "-o", out, "-ratio", "hier-mpich/mpich"); code != 1 || !strings.Contains(errOut, "no row of the files has that ratio") {
		t.Errorf("-ratio absent: exit %d, %q", code, errOut)
	}
}

func TestPlotBadInput(t *testing.T) {
	dir := t.TempDir()
	runOut := filepath.Join(dir, "run.json")
	os.WriteFile(runOut, []byte(`{"type":"run","np":2}`+"\n"+`{"type":"result","coll":"allreduce"}`+"\n"), 0o644)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{}, 2, "-compare: name compare's JSON output"},
		{[]string{"-compare", "a.json,"}, 2, "an empty file name"},
		{[]string{"-compare", "a.json", "-o", "x.svg"}, 2, "name it .png"},
		{[]string{"-compare", "a.json", "-placement", "near"}, 2, "want all or steady"},
		{[]string{"-compare", "a.json", "-near", "80", "-placement", "steady"}, 2, "give one"},
		{[]string{"-compare", filepath.Join(dir, "none.json")}, 1, "no such file"},
		{[]string{"-compare", runOut, "-o", filepath.Join(dir, "x.png")}, 1, `type "result": not compare -format json output`},
	} {
		code, _, errOut := shmbench(t, append([]string{"plot"}, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("plot %v: exit %d, %q; want %d and %q", c.args, code, errOut, c.code, c.want)
		}
	}
}

// TestPlotCompareRun charts a real comparison: np 2, two sizes, one
// round, shmcoll against Open MPI or MPICH, whichever is installed.
func TestPlotCompareRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts MPI jobs")
	}
	impl := ""
	for _, i := range mpi.Impls {
		if mpi.Lookup(i).Err() == nil {
			impl = string(i)
			break
		}
	}
	if impl == "" {
		t.Skip("no MPI installed")
	}
	code, out, errOut := shmbench(t, "compare", "-impls", impl+",shmcoll", "-np", "2", "-sizes", "8,4K", "-rounds", "1",
		"-time", "10ms", "-warmup", "2ms", "-format", "json")
	if code != 0 {
		t.Fatalf("compare: exit %d\n%s\n%s", code, out, errOut)
	}
	dir := t.TempDir()
	in, png := filepath.Join(dir, "np2.json"), filepath.Join(dir, "ratio.png")
	if err := os.WriteFile(in, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := shmbench(t, "plot", "-compare", in, "-o", png); code != 0 {
		t.Fatalf("plot: exit %d: %s", code, errOut)
	}
	want := image.Rect(0, 0, int(ratioPanelW.Dots(ratioDPI)), int(ratioPanelH.Dots(ratioDPI)))
	if got := decodePNG(t, png); got != want {
		t.Errorf("image %v, want %v", got, want)
	}
}

// TestPlotCompareChooseRatio: with an MPI the default is shmcoll / faster
// MPI even where another ratio is there; without one and with two others,
// -ratio must name one.
func TestPlotCompareChooseRatio(t *testing.T) {
	times := func(impl string, _ int, _ string, _ int64) float64 {
		switch impl {
		case "shmcoll":
			return 3
		case "openmpi":
			return 6
		case "shmcoll@/a":
			return 4
		}
		return 12
	}
	other := func(p string) compareImpl { return compareImpl{name: "shmcoll@" + p, base: "shmcoll", baseFirst: true} }
	withMPI := syntheticCompare(t, []compareImpl{mpiImpls[0], {name: "shmcoll"}, other("/a")}, 2, []string{"bcast"}, []int64{64}, 1, times, roundProbe)
	twoOthers := syntheticCompare(t, []compareImpl{{name: "shmcoll"}, other("/a"), other("/b")}, 2, []string{"bcast"}, []int64{64}, 1, times, roundProbe)
	for _, c := range []struct {
		file, ratio string
		want        float64
		err         string
	}{
		{withMPI, "", 0.5, ""},
		{withMPI, "shmcoll/shmcoll@/a", 0.75, ""},
		{twoOthers, "", 0, "several others (shmcoll/shmcoll@/a, shmcoll/shmcoll@/b): pick one with -ratio"},
		{twoOthers, "shmcoll/shmcoll@/b", 0.25, ""},
	} {
		run, err := readCompareFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		_, lines, _, err := ratioLines(&plotConfig{ratio: c.ratio, placement: "all"}, []*compareRun{run})
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("-ratio %q: %v, want %q", c.ratio, err, c.err)
			}
		case err != nil:
			t.Errorf("-ratio %q: %v", c.ratio, err)
		case lines["bcast"][0].xys[0].Y != c.want:
			t.Errorf("-ratio %q: %v, want %v", c.ratio, lines["bcast"][0].xys[0].Y, c.want)
		}
	}
}
