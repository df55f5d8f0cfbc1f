//go:build amd64 && !noasm && !purego

package simd

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedUpToDate reruns the avo generator into a temporary directory and
// compares its output with the committed files (SHMCOLL_LONG=1: it builds the
// generator, which needs its modules).
func TestGeneratedUpToDate(t *testing.T) {
	if !longMode {
		t.Skip("SHMCOLL_LONG=1 runs the generator")
	}
	dir := t.TempDir()
	files := []string{"kernels_amd64.s", "kernels_amd64_stub.go", "dispatch_amd64.go"}
	cmd := exec.Command("go", "run", ".",
		"-out", filepath.Join(dir, files[0]), "-stubs", filepath.Join(dir, files[1]),
		"-pkg", "simd", "-dispatch", filepath.Join(dir, files[2]))
	cmd.Dir = "_gen"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generator: %v\n%s", err, out)
	}
	for _, f := range files {
		want, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// the header names the output paths given on the command line
		if i := bytes.IndexByte(want, '\n'); i >= 0 {
			want = want[i:]
		}
		if i := bytes.IndexByte(got, '\n'); i >= 0 {
			got = got[i:]
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the generator's output: run go generate in simd/", f)
		}
	}
}
