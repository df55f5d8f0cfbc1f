package main

import (
	"bufio"
	"encoding/json"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/shmcoll/shmcoll/internal/benchfmt"
	"github.com/shmcoll/shmcoll/mpi"
)

func TestCompareBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-coll", "scan"}, "not one the MPI benchmark measures"},
		{[]string{"-dtype", "bfloat16"}, "-dtype"},
		{[]string{"-rounds", "0"}, "-rounds"},
		{[]string{"-impls", "openmpi,mpich"}, "must take part"},
		{[]string{"-impls", "hier-lam"}, "unknown implementation"},
		{[]string{"-impls", "openmpi,hier-openmpi", "-node-size", "2,x"}, "-node-size"},
		{[]string{"-impls", "intelmpi,shmcoll"}, "unknown implementation"},
		{[]string{"-sizes", "4:2"}, "-sizes"},
		{[]string{"-format", "csv"}, "-format"},
		{[]string{"-barrier", "served"}, "-barrier"},
	} {
		code, _, errOut := shmbench(t, append([]string{"compare"}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("compare %v: exit %d, %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
}

// TestCompareBarrier: -barrier picks the MPI benchmark's timing barrier,
// the MPI's own (PMPI_Barrier) unless it says mpi.
func TestCompareBarrier(t *testing.T) {
	for _, c := range []struct {
		args   []string
		served bool
	}{{nil, false}, {[]string{"-barrier", "pmpi"}, false}, {[]string{"-barrier", "mpi"}, true}} {
		cfg, err := parseCompare(c.args, io.Discard)
		if err != nil {
			t.Fatalf("compare %v: %v", c.args, err)
		}
		if cfg.servedBarrier != c.served {
			t.Errorf("compare %v: served barrier %v, want %v", c.args, cfg.servedBarrier, c.served)
		}
	}
}

// TestCompareNoMPI hides both MPIs: compare names every missing command
// and its package, installs nothing and fails.
func TestCompareNoMPI(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	code, out, errOut := shmbench(t, "compare", "-sizes", "8", "-rounds", "1")
	if code != 1 || out != "" {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	for _, want := range []string{
		"mpicc.openmpi (Debian package libopenmpi-dev)", "mpirun.openmpi (Debian package openmpi-bin)",
		"mpicc.mpich (Debian package libmpich-dev)", "mpirun.mpich (Debian package mpich)", "no MPI to compare with",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

// TestCompare runs a short interleaved comparison when both MPIs are
// installed and checks the structure of its JSON output.
func TestCompare(t *testing.T) {
	if testing.Short() {
		t.Skip("starts MPI jobs")
	}
	for _, impl := range mpi.Impls {
		if err := mpi.Lookup(impl).Err(); err != nil {
			t.Skipf("%v", err)
		}
	}
	dir := t.TempDir()
	code, out, errOut := shmbench(t, "compare", "-block", "sweep", "-np", "2", "-sizes", "8,4K", "-rounds", "2", "-time", "20ms", "-warmup", "5ms", "-format", "json", "-plot", dir)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	var types []string
	var rows []compareRow
	blocks := map[string]int{}
	for sc.Scan() {
		var kind struct{ Type string }
		if err := json.Unmarshal(sc.Bytes(), &kind); err != nil {
			t.Fatalf("%v: %s", err, sc.Text())
		}
		types = append(types, kind.Type)
		switch kind.Type {
		case "block":
			var b block
			json.Unmarshal(sc.Bytes(), &b)
			blocks[b.Impl]++
			if len(b.Results) != 2 || b.Results[0].Bytes != 8 || b.Results[1].Bytes != 4096 || b.Results[0].Check != "ok" {
				t.Errorf("block %s round %d: %+v", b.Impl, b.Round, b.Results)
			}
		case "compare":
			var r compareRow
			json.Unmarshal(sc.Bytes(), &r)
			rows = append(rows, r)
		}
	}
	if types[0] != "run" || len(types) != 1+6+2 {
		t.Fatalf("line types %v", types)
	}
	if blocks["openmpi"] != 2 || blocks["mpich"] != 2 || blocks["shmcoll"] != 2 {
		t.Errorf("blocks %v", blocks)
	}
	if st, err := os.Stat(filepath.Join(dir, "allreduce_np2_latency.png")); err != nil || st.Size() == 0 {
		t.Errorf("compare plot: %v", err)
	}
	for _, r := range rows {
		if r.Coll != "allreduce" || r.NP != 2 || r.Rounds != 2 || len(r.Ratios) != 2 || r.Ratio <= 0 || len(r.Steady) != 2 ||
			r.Median["openmpi"] <= 0 || r.Median["mpich"] <= 0 || r.Median["shmcoll"] <= 0 {
			t.Errorf("row %+v", r)
		}
		for i, ratio := range r.Ratios {
			best := r.PerRnd[r.Best[i]][i]
			if got := r.PerRnd["shmcoll"][i] / best; got != ratio {
				t.Errorf("%d B round %d: ratio %v, want %v", r.Bytes, i+1, ratio, got)
			}
		}
	}
}

func TestSteadyRounds(t *testing.T) {
	blocks := []*block{
		{Round: 1, ProbeNS: 50}, {Round: 1, ProbeNS: 55}, // one placement
		{Round: 2, ProbeNS: 50}, {Round: 2, ProbeNS: 190}, // moved between blocks
		{Round: 3, ProbeNS: 50}, {Round: 3}, // a probe failed
		{Round: 4, Group: 1, ProbeNS: 50}, {Round: 4, Group: 1, ProbeNS: 52}, // -block size: each size's blocks
		{Round: 4, Group: 2, ProbeNS: 190}, {Round: 4, Group: 2, ProbeNS: 50},
	}
	got := steadyRounds(blocks)
	want := map[[2]int]bool{{1, 0}: true, {2, 0}: false, {3, 0}: false, {4, 1}: true, {4, 2}: false}
	if !maps.Equal(got, want) {
		t.Fatalf("steadyRounds = %v, want %v", got, want)
	}
	key := compareKey{"allreduce", 8}
	res := func(us float64) []benchfmt.Result {
		return []benchfmt.Result{{Coll: "allreduce", Bytes: 8, MedianUS: us}}
	}
	impls := []compareImpl{{name: "openmpi", inst: &mpi.Installation{Impl: mpi.OpenMPI}}, {name: "mpich", inst: &mpi.Installation{Impl: mpi.MPICH}}, {name: "shmcoll"}}
	var bs []*block
	for r, us := range [][3]float64{{1, 2, 0.5}, {4, 2, 2}, {1, 1, 3}} {
		for i, p := range impls {
			probe := 50.0
			if r == 2 && i == 1 {
				probe = 200 // round 3 is not steady
			}
			b := &block{Round: r + 1, Impl: p.name, ProbeNS: probe, Results: res(us[i])}
			b.byKey = map[compareKey]int{key: 0}
			bs = append(bs, b)
		}
	}
	rows := compareRows(bs, impls, 3)
	if len(rows) != 1 {
		t.Fatalf("%d rows", len(rows))
	}
	r := rows[0]
	// Ratios 0.5/1, 2/2, 3/1; steady rounds 1 and 2.
	if !slices.Equal(r.Ratios, []float64{0.5, 1, 3}) || r.Ratio != 1 || r.SteadyRatio != 0.75 ||
		!slices.Equal(r.Steady, []bool{true, true, false}) ||
		!slices.Equal(r.Best, []string{"openmpi", "mpich", "openmpi"}) || r.Median["openmpi"] != 1 || r.Median["shmcoll"] != 2 {
		t.Fatalf("row %+v", r)
	}
}

// TestCompareBySize alternates the implementations every size (-block
// size) and reads the table.
func TestCompareBySize(t *testing.T) {
	if testing.Short() {
		t.Skip("starts MPI jobs")
	}
	for _, impl := range mpi.Impls {
		if err := mpi.Lookup(impl).Err(); err != nil {
			t.Skipf("%v", err)
		}
	}
	code, out, errOut := shmbench(t, "compare", "-block", "size", "-np", "2", "-sizes", "8,4K", "-rounds", "1", "-time", "20ms", "-warmup", "5ms")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var blocks, rows int
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "# round 1 "):
			blocks++
		case len(f) > 5 && f[0] == "allreduce":
			rows++
			if ratio, err := strconv.ParseFloat(f[5], 64); err != nil || ratio <= 0 {
				t.Errorf("row %q: ratio %q", line, f[5])
			}
		}
	}
	if blocks != 6 || rows != 2 {
		t.Fatalf("%d blocks, %d rows, want 6 and 2:\n%s", blocks, rows, out)
	}
}

// TestCompareHier sets the hierarchical allreduce of both MPIs beside
// their own on 4 ranks in 2 emulated nodes (hiercoll built on demand).
func TestCompareHier(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts MPI jobs")
	}
	for _, impl := range mpi.Impls {
		if err := mpi.Lookup(impl).Err(); err != nil {
			t.Skipf("%v", err)
		}
	}
	code, out, errOut := shmbench(t, "compare", "-impls", "openmpi,hier-openmpi,mpich,hier-mpich", "-np", "4", "-node-size", "2",
		"-sizes", "8,4K", "-rounds", "1", "-time", "10ms", "-warmup", "2ms", "-format", "json")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	var rows int
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r compareRow
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if r.Type != "compare" {
			continue
		}
		rows++
		for _, h := range []string{"hier-openmpi", "hier-mpich"} {
			base := strings.TrimPrefix(h, "hier-")
			want := r.PerRnd[h][0] / r.PerRnd[base][0]
			if got := r.PairRatio[h+"/"+base]; r.Median[h] <= 0 || got != want || r.Ratio != 0 {
				t.Errorf("%d B: %s median %v, ratio %v (want %v), shmcoll ratio %v", r.Bytes, h, r.Median[h], got, want, r.Ratio)
			}
		}
	}
	if rows != 2 {
		t.Errorf("%d rows, want 2:\n%s", rows, out)
	}
}

func TestCompareBadImpls(t *testing.T) {
	dir := t.TempDir()
	notExe := filepath.Join(dir, "lib.so")
	os.WriteFile(notExe, nil, 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-impls", "shmcoll@" + filepath.Join(dir, "none")}, "is not an executable shmbench"},
		{[]string{"-impls", "shmcoll@" + notExe}, "is not an executable shmbench"},
		{[]string{"-impls", "openmpi+shmcoll"}, "name the library"},
		{[]string{"-impls", "openmpi+shmcoll@" + filepath.Join(dir, "none.so")}, "no such file"},
		{[]string{"-impls", "lam+shmcoll", "-libshmcoll", notExe}, `unknown MPI "lam"`},
		{[]string{"-impls", "openmpi+shmcollx"}, "unknown implementation"},
		{[]string{"-impls", "shmcoll,shmcoll"}, "given twice"},
		{[]string{"-mpicc", "mpicc.openmpi"}, "give both"},
		{[]string{"-mpi-name", "x"}, "give them"},
		{[]string{"-mpi", "x"}, "NAME=PREFIX"},
		{[]string{"-mpi", "x=" + dir}, "no " + filepath.Join(dir, "bin", "mpicc")},
		{[]string{"-mpi", "shmcoll=" + dir}, "a name of its own"},
		{[]string{"-mpi-name", "a+b", "-mpicc", "cc", "-mpirun", "run"}, "a name of its own"},
		{[]string{"-mpicc", filepath.Join(dir, "none"), "-mpirun", filepath.Join(dir, "none")}, "MPI site"},
		{[]string{"-mpicc", "/bin/true", "-mpirun", "/bin/echo"}, "neither Open MPI nor Hydra"},
	} {
		code, _, errOut := shmbench(t, append([]string{"compare"}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("compare %v: exit %d, %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
}

// TestSiteInstallation tells the launch line of Debian's MPIs from their
// launchers' --version, as for an MPI given by path.
func TestSiteInstallation(t *testing.T) {
	for _, impl := range mpi.Impls {
		deb := mpi.Lookup(impl)
		if err := deb.Err(); err != nil {
			t.Skipf("%v", err)
		}
		in, err := siteInstallation(deb.MPICC, deb.MPIRun)
		if err != nil || in.Impl != impl || in.MPICC != deb.MPICC || in.MPIRun != deb.MPIRun || !in.OK() {
			t.Errorf("%s: %+v, %v", impl, in, err)
		}
	}
}

// TestCompareSiteMPI compares with Debian's MPIs given as site MPIs: Open
// MPI by an installation prefix (a bin directory of links named mpicc and
// mpirun), MPICH by its compiler wrapper and launcher.
func TestCompareSiteMPI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts MPI jobs")
	}
	ompi, mpich := mpi.Lookup(mpi.OpenMPI), mpi.Lookup(mpi.MPICH)
	for _, in := range []mpi.Installation{ompi, mpich} {
		if err := in.Err(); err != nil {
			t.Skipf("%v", err)
		}
	}
	prefix := t.TempDir()
	os.Mkdir(filepath.Join(prefix, "bin"), 0o755)
	for name, target := range map[string]string{"mpicc": ompi.MPICC, "mpirun": ompi.MPIRun} {
		if err := os.Symlink(target, filepath.Join(prefix, "bin", name)); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := shmbench(t, "compare", "-mpi", "ompi="+prefix, "-mpi-name", "hydra", "-mpicc", mpich.MPICC, "-mpirun", mpich.MPIRun,
		"-impls", "shmcoll,ompi,hydra", "-np", "2", "-sizes", "8,4K", "-rounds", "1", "-n", "20", "-warmup", "1ms")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"# ompi: " + filepath.Join(prefix, "bin", "mpicc") + ", " + filepath.Join(prefix, "bin", "mpirun") + " (launch line of openmpi)",
		"# hydra: " + mpich.MPICC + ", " + mpich.MPIRun + " (launch line of mpich)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 5 && f[0] == "allreduce" {
			rows++
			for i, impl := range []string{"shmcoll", "ompi", "hydra"} {
				if us, err := strconv.ParseFloat(f[2+i], 64); err != nil || us <= 0 {
					t.Errorf("row %q: %s time %q", line, impl, f[2+i])
				}
			}
		}
	}
	if rows != 2 {
		t.Errorf("%d rows, want 2:\n%s", rows, out)
	}
}

// TestCompareOtherBuild builds this shmbench into a temporary directory
// and compares it, as another build, with itself: no MPI is needed, every
// result is checked, and the per-round ratio shmcoll / shmcoll@PATH is the
// ratio of the two implementations' times in that round.
func TestCompareOtherBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds shmbench and starts its ranks")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build shmbench with")
	}
	other := filepath.Join(t.TempDir(), "shmbench")
	if out, err := exec.Command(goCmd, "build", "-o", other, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	name := "shmcoll@" + other
	code, out, errOut := shmbench(t, "compare", "-impls", "shmcoll,"+name, "-np", "2", "-sizes", "8,64K", "-rounds", "2",
		"-n", "30", "-warmup", "1ms", "-format", "json")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	blocks := map[string]int{}
	var rows int
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var kind struct{ Type string }
		if err := json.Unmarshal([]byte(line), &kind); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		switch kind.Type {
		case "block":
			var b block
			json.Unmarshal([]byte(line), &b)
			blocks[b.Impl]++
			if len(b.Results) != 1 || b.Results[0].Check != "ok" || b.Results[0].Iters != 30 {
				t.Errorf("block %s round %d: %+v", b.Impl, b.Round, b.Results)
			}
		case "compare":
			var r compareRow
			json.Unmarshal([]byte(line), &r)
			rows++
			k := "shmcoll/" + name
			for i := range 2 {
				want := r.PerRnd["shmcoll"][i] / r.PerRnd[name][i]
				if got := r.PairRatios[k][i]; !(want > 0) || got != want {
					t.Errorf("%d B round %d: ratio %v, want %v", r.Bytes, i+1, got, want)
				}
			}
			if r.PairRatio[k] <= 0 || r.Ratio != 0 {
				t.Errorf("%d B: median ratio %v, ratio to MPI %v", r.Bytes, r.PairRatio[k], r.Ratio)
			}
		}
	}
	if blocks["shmcoll"] != 4 || blocks[name] != 4 || rows != 2 {
		t.Errorf("blocks %v, %d rows", blocks, rows)
	}
}

// TestComparePreload builds libshmcoll for Open MPI from this source tree
// and compares Open MPI with and without it preloaded: the ranks start
// with the library, every result is checked, and the per-round ratio
// openmpi+shmcoll / openmpi is that of the two times.
func TestComparePreload(t *testing.T) {
	if testing.Short() {
		t.Skip("builds libshmcoll and starts MPI jobs")
	}
	if err := mpi.Lookup(mpi.OpenMPI).Err(); err != nil {
		t.Skipf("%v", err)
	}
	if src, _ := filepath.Glob("../libshmcoll/*.go"); len(src) == 0 {
		t.Skip("no cmd/libshmcoll in this tree")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build libshmcoll with")
	}
	lib := filepath.Join(t.TempDir(), "libshmcoll.so")
	build := exec.Command(goCmd, "build", "-buildmode=c-shared", "-tags", "mpi", "-o", lib, "../libshmcoll")
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(build.Args, " "), err, out)
	}
	code, out, errOut := shmbench(t, "compare", "-impls", "openmpi,openmpi+shmcoll@"+lib, "-coll", "allreduce,bcast",
		"-np", "2", "-sizes", "8,64K", "-rounds", "1", "-n", "30", "-warmup", "1ms", "-format", "json")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	rows := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r compareRow
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if r.Type != "compare" {
			continue
		}
		rows++
		want := r.PerRnd["openmpi+shmcoll"][0] / r.PerRnd["openmpi"][0]
		if got := r.PairRatio["openmpi+shmcoll/openmpi"]; !(want > 0) || got != want {
			t.Errorf("%s %d B: ratio %v, want %v", r.Coll, r.Bytes, got, want)
		}
	}
	if rows != 4 {
		t.Errorf("%d rows, want 4:\n%s", rows, out)
	}
}
