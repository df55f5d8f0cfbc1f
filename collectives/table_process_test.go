package collectives

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/shmcoll/shmcoll/shm"
)

// TestTableMismatchProcesses: three processes join, the last with another
// SHMCOLL_TUNE_FILE; every one fails with the same clear error.
func TestTableMismatchProcesses(t *testing.T) {
	if os.Getenv(shm.EnvArena) != "" {
		t.Skip("in a child")
	}
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.txt"), filepath.Join(dir, "b.txt")
	for file, alg := range map[string]string{a: "ring", b: "flat"} {
		text := "allreduce 3 over 0 inf " + alg + " -\nallreduce 3 fit 0 inf " + alg + " -\n"
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const p = 3
	name := shm.NewName()
	out := make([][]byte, p)
	errs := make([]error, p)
	var wg sync.WaitGroup
	for r := range p {
		file := a
		if r == p-1 {
			file = b
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestTableMismatchChild$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), shm.EnvRank+"="+strconv.Itoa(r), shm.EnvSize+"="+strconv.Itoa(p),
			shm.EnvArena+"="+name, TuneFileEnv+"="+file)
		wg.Go(func() { out[r], errs[r] = cmd.CombinedOutput() })
	}
	wg.Wait()
	for r := range p {
		if errs[r] != nil || !strings.Contains(string(out[r]), "--- PASS: TestTableMismatchChild") {
			t.Errorf("rank %d: %v\n%s", r, errs[r], out[r])
		}
	}
	if path, _ := shm.SegmentPath(name); path != "" {
		if _, err := os.Stat(path); err == nil {
			t.Errorf("segment %s left behind", path)
		}
	}
}

// TestTableMismatchChild is one rank of TestTableMismatchProcesses.
func TestTableMismatchChild(t *testing.T) {
	if os.Getenv(shm.EnvArena) == "" {
		t.Skip("run by TestTableMismatchProcesses")
	}
	c, err := JoinEnv(context.Background(), Options{})
	if err == nil {
		c.Close()
		t.Fatal("joined with different selection tables")
	}
	want := "rank 2 loaded a different selection table (hash "
	if !errors.Is(err, ErrTableMismatch) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), ") than rank 0 (hash ") ||
		!strings.Contains(err.Error(), ".txt") {
		t.Fatalf("error %v, want %v naming rank 2 and its file", err, ErrTableMismatch)
	}
}
