package collectives

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
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
	runRanks(t, "TestTableMismatchChild", p, func(r int) []string {
		if r == p-1 {
			return []string{TuneFileEnv + "=" + b}
		}
		return []string{TuneFileEnv + "=" + a}
	})
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
