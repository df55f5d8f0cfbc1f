package main

import (
	"bufio"
	"encoding/json"
	"maps"
	"os"
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
	} {
		code, _, errOut := shmbench(t, append([]string{"compare"}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("compare %v: exit %d, %q; want 2 and %q", c.args, code, errOut, c.want)
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
	impls := []compareImpl{{name: "openmpi", mpi: mpi.OpenMPI}, {name: "mpich", mpi: mpi.MPICH}, {name: "shmcoll"}}
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
			want := r.PerRnd[h][0] / r.PerRnd[strings.TrimPrefix(h, "hier-")][0]
			if r.Median[h] <= 0 || r.HierRatio[h] != want || r.Ratio != 0 {
				t.Errorf("%d B: %s median %v, ratio %v (want %v), shmcoll ratio %v", r.Bytes, h, r.Median[h], r.HierRatio[h], want, r.Ratio)
			}
		}
	}
	if rows != 2 {
		t.Errorf("%d rows, want 2:\n%s", rows, out)
	}
}
