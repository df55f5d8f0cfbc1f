package tests

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"golang.org/x/sys/unix"
)

// TestFloorPrograms builds the C programs of docs/floors, which
// docs/PERFORMANCE.md quotes as the floors of the cells that miss their
// targets, and runs each once: allgather_floor and allgather_cma_floor
// check their results, bcast_rule each value it receives, rooted_floor
// each call's changed element and descriptor and the last call's whole
// result, rsb_cma_floor every element of its result, oversub_floor every counter each rank sees when it leaves a
// barrier, collapse_cost every byte of the buffers it collapses, and all
// must print their figures.
// Their timings are not judged here. The programs pin a thread to each of
// CPUs 0 and 1 (oversub_floor runs its processes there), which disturbs
// whatever else runs there, so plain go test skips them: SHMCOLL_LONG=1
// runs them (.ci/run does, alone on its CPUs).
func TestFloorPrograms(t *testing.T) {
	if !longMode() {
		t.Skip("SHMCOLL_LONG=1 runs the programs of docs/floors (they pin threads to CPUs 0 and 1)")
	}
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc")
	}
	var cpus unix.CPUSet
	if err := unix.SchedGetaffinity(0, &cpus); err != nil || !cpus.IsSet(0) || !cpus.IsSet(1) {
		t.Skip("the programs pin a thread to each of CPUs 0 and 1, which this process may not use")
	}
	runs := []struct {
		prog string
		args []string
		want string
	}{
		{"allgather_floor", []string{"512", "2"}, `^512 KiB blocks, 2 slots: slowest rank median [0-9.]+ us\n  rank 0: publish`},
		{"allgather_floor", []string{"600", "2"}, `^600 KiB blocks, 2 slots: `},
		{"allgather_floor", []string{"512", "4", "unread"}, `^512 KiB blocks, 4 slots, copy-out from the own slot: `},
		{"allgather_cma_floor", []string{"512", "chunk-write", "50"}, `^chunk-write 512 KiB blocks \(allgather of 1024 KiB\): slower process median [0-9.]+ us, [0-9.]+ GB/s moved; CPU time `},
		{"allgather_cma_floor", []string{"64", "own-read", "50"}, `^own-read 64 KiB blocks `},
		{"allgather_cma_floor", []string{"64", "copies", "50"}, `^copies 64 KiB blocks `},
		{"allgatherv_cma_split", []string{"64", "192", "96", "50"}, `^blocks 64 and 192 KiB, 96 KiB written: slower process median [0-9.]+ us; CPU time [0-9.]+ us; process 0 [0-9.]+ us, process 1 [0-9.]+ us\n$`},
		{"allgatherv_cma_split", []string{"64", "192", "0", "50"}, `^blocks 64 and 192 KiB, 0 KiB written: `},
		{"bcast_rule", []string{"waits", "symmetric", "5000"}, `^symmetric +barrier, root waits  : slower rank +[0-9]+ ns`},
		{"bcast_rule", []string{"returns", "root-first", "5000"}, `^root-first +barrier, root returns: slower rank +[0-9]+ ns`},
		{"bcast_rule", []string{"waits", "receiver-first", "5000"}, `^receiver-first barrier, root waits  : slower rank +[0-9]+ ns`},
		{"rooted_floor", []string{"bcast", "eager", "root-first", "8", "5000"}, `^bcast  eager root-first        8 B: slower rank +[0-9]+ ns \(median\); root +[0-9]+, non-root +[0-9]+; handoff +[0-9]+ ns\n$`},
		{"rooted_floor", []string{"bcast", "early", "symmetric", "4096", "5000"}, `^bcast  early symmetric      4096 B: slower rank `},
		{"rooted_floor", []string{"reduce", "early", "nonroot-first", "1000", "5000"}, `^reduce early nonroot-first  1000 B: slower rank `},
		{"rooted_floor", []string{"reduce", "waits", "symmetric", "64", "5000"}, `^reduce waits symmetric        64 B: slower rank `},
		{"rsb_cma_floor", []string{"64", "direct", "32", "50"}, `^direct +64 KiB blocks \(rsb of +128 KiB\), +32 KiB pieces: slower process median +[0-9.]+ us; CPU time +[0-9.]+ us\n$`},
		{"rsb_cma_floor", []string{"64", "allreduce", "32", "50"}, `^allreduce +64 KiB blocks `},
		{"collapse_cost", []string{"8", "3"}, `^(8 MiB: collapse median [0-9]+ us \([0-9]+-[0-9]+\), memcpy median [0-9]+ us \([0-9]+-[0-9]+\), 3 reps|MADV_COLLAPSE refused: .*)\n$`},
		{"oversub_floor", []string{"yield", "free", "2000"}, `^8 processes on 2 CPUs, free   wait yield    : iteration median +[0-9.]+ us, p99 +[0-9.]+ us, mean +[0-9.]+ us \(2000 iterations after 1 ms\)\n$`},
		{"oversub_floor", []string{"futex", "spread", "2000"}, `^8 processes on 2 CPUs, spread wait futex    : iteration median `},
		{"oversub_floor", []string{"yield", "one", "2000", "5"}, `^8 processes on 2 CPUs, one    wait yield    : iteration median .*\(2000 iterations after 5 ms\)\n$`},
	}
	dir := t.TempDir()
	built := map[string]bool{}
	for _, r := range runs {
		bin := filepath.Join(dir, r.prog)
		if !built[r.prog] {
			out, err := exec.Command(cc, "-O2", "-Wall", "-Werror", "-pthread", "-o", bin, filepath.Join("..", "docs", "floors", r.prog+".c")).CombinedOutput()
			if err != nil {
				t.Fatalf("gcc %s.c: %v\n%s", r.prog, err, out)
			}
			built[r.prog] = true
		}
		out, err := exec.Command(bin, r.args...).CombinedOutput()
		if err != nil {
			t.Errorf("%s %v: %v\n%s", r.prog, r.args, err, out)
			continue
		}
		if !regexp.MustCompile(r.want).Match(out) {
			t.Errorf("%s %v printed\n%s\nwant it to match %q", r.prog, r.args, out, r.want)
		}
	}
	// A wrong use is refused with the usage line.
	for _, r := range []struct{ prog, arg string }{{"allgather_floor", "0"}, {"allgather_cma_floor", "0"}, {"allgatherv_cma_split", "0"}, {"bcast_rule", "sometimes"}, {"rooted_floor", "bcast"}, {"rsb_cma_floor", "0"}, {"oversub_floor", "often"}, {"collapse_cost", "0"}} {
		out, err := exec.Command(filepath.Join(dir, r.prog), r.arg, "2").CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !regexp.MustCompile(`^usage: `+r.prog).Match(out) {
			t.Errorf("%s %s 2: %v, %s; want exit 2 and the usage line", r.prog, r.arg, err, out)
		}
	}
}
