package mpibench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/shmcoll/shmcoll/internal/mpi"
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
