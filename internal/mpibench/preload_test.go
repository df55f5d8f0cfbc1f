package mpibench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/shmcoll/shmcoll/mpi"
)

// markerLib is a shared library whose constructor writes, into the
// directory PRELOAD_TEST_DIR names, a file named by the process id that
// holds the path of the process's executable: which processes loaded it.
const markerLib = `#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
__attribute__((constructor)) static void mark(void)
{
	const char *dir = getenv("PRELOAD_TEST_DIR");
	char exe[4096], path[4096];
	ssize_t n;
	FILE *f;
	if (!dir) return;
	n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	exe[n < 0 ? 0 : n] = 0;
	snprintf(path, sizeof path, "%s/%d", dir, (int)getpid());
	if ((f = fopen(path, "w"))) { fputs(exe, f); fclose(f); }
}
`

// TestRunPreload runs the benchmark with Options.Preload under each
// installed MPI: the library is loaded into every rank, and into no other
// process (the launcher and its daemons get it through their own options
// for the ranks only).
func TestRunPreload(t *testing.T) {
	if testing.Short() {
		t.Skip("starts MPI jobs")
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler")
	}
	dir := t.TempDir()
	src, lib := filepath.Join(dir, "marker.c"), filepath.Join(dir, "libmarker.so")
	if err := os.WriteFile(src, []byte(markerLib), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", lib, src).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, impl := range mpi.Impls {
		t.Run(string(impl), func(t *testing.T) {
			in := mpi.Lookup(impl)
			if err := in.Err(); err != nil {
				t.Skipf("%v", err)
			}
			bin, err := BuildWith(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			marks := t.TempDir()
			o := Options{NP: 2, Colls: []string{"allreduce"}, Sizes: []int64{8}, Iters: 5, Warmup: -1,
				Env: []string{"PRELOAD_TEST_DIR=" + marks}, Preload: lib}
			if _, err := RunWith(context.Background(), in, o); err != nil {
				t.Fatal(err)
			}
			files, _ := os.ReadDir(marks)
			want, _ := filepath.EvalSymlinks(bin)
			ranks := 0
			for _, f := range files {
				exe, _ := os.ReadFile(filepath.Join(marks, f.Name()))
				if got, _ := filepath.EvalSymlinks(string(exe)); got == want {
					ranks++
				} else {
					t.Errorf("process %s (%s) loaded the preloaded library", f.Name(), exe)
				}
			}
			if ranks != 2 {
				t.Errorf("%d ranks loaded the library, want 2", ranks)
			}
		})
	}
}

// counter is an MPI interposer that counts the collective calls made
// through the MPI_ names and writes the counts of each rank at
// MPI_Finalize into the directory PRELOAD_TEST_DIR names.
const counter = `#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
static long barrier, allreduce, reduce, bcast;
int MPI_Barrier(MPI_Comm c) { barrier++; return PMPI_Barrier(c); }
int MPI_Allreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op o, MPI_Comm c)
{ allreduce++; return PMPI_Allreduce(s, r, n, t, o, c); }
int MPI_Reduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op o, int root, MPI_Comm c)
{ reduce++; return PMPI_Reduce(s, r, n, t, o, root, c); }
int MPI_Bcast(void *b, int n, MPI_Datatype t, int root, MPI_Comm c)
{ bcast++; return PMPI_Bcast(b, n, t, root, c); }
int MPI_Finalize(void)
{
	int rank;
	char path[4096];
	FILE *f;
	PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
	snprintf(path, sizeof path, "%s/%d", getenv("PRELOAD_TEST_DIR"), rank);
	if ((f = fopen(path, "w"))) {
		fprintf(f, "barrier %ld allreduce %ld reduce %ld bcast %ld", barrier, allreduce, reduce, bcast);
		fclose(f);
	}
	return PMPI_Finalize();
}
`

// TestTimingCallsPMPI preloads a counting interposer: of the collectives
// the benchmark calls, only the measured one goes through the MPI_ names
// (1 warm-up and 5 timed iterations); its barriers and bookkeeping call
// PMPI, so that an interposer such as libshmcoll serves only what is
// measured. With ServedBarrier the barrier before each of those 6
// iterations goes through MPI_Barrier too, and the bookkeeping still not.
func TestTimingCallsPMPI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts MPI jobs")
	}
	for _, impl := range mpi.Impls {
		t.Run(string(impl), func(t *testing.T) {
			in := mpi.Lookup(impl)
			if err := in.Err(); err != nil {
				t.Skipf("%v", err)
			}
			dir := t.TempDir()
			src, lib := filepath.Join(dir, "counter.c"), filepath.Join(dir, "libcounter.so")
			if err := os.WriteFile(src, []byte(counter), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(in.MPICC, "-shared", "-fPIC", "-o", lib, src).CombinedOutput(); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			for _, c := range []struct {
				coll   string
				served bool
				want   string
			}{
				{"allreduce", false, "barrier 0 allreduce 6 reduce 0 bcast 0"},
				{"bcast", false, "barrier 0 allreduce 0 reduce 0 bcast 6"},
				{"barrier", false, "barrier 6 allreduce 0 reduce 0 bcast 0"},
				{"allreduce", true, "barrier 6 allreduce 6 reduce 0 bcast 0"},
				{"barrier", true, "barrier 12 allreduce 0 reduce 0 bcast 0"},
			} {
				counts := t.TempDir()
				o := Options{NP: 2, Colls: []string{c.coll}, Sizes: []int64{8}, Iters: 5, Warmup: -1,
					Env: []string{"PRELOAD_TEST_DIR=" + counts}, Preload: lib, ServedBarrier: c.served}
				if _, err := RunWith(context.Background(), in, o); err != nil {
					t.Fatal(err)
				}
				for r := range 2 {
					got, err := os.ReadFile(filepath.Join(counts, strconv.Itoa(r)))
					if err != nil || string(got) != c.want {
						t.Errorf("%s (served barrier %v), rank %d: %q, %v; want %q", c.coll, c.served, r, got, err, c.want)
					}
				}
			}
		})
	}
}
