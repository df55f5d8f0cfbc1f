package collectives

import (
	"errors"
	"os"
	"testing"
	"unsafe"

	"github.com/shmcoll/shmcoll/shm"
	"github.com/shmcoll/shmcoll/simd"
)

// TestOpsProcesses runs Avg on every floating type, Gatherv and Scatterv,
// and int, uint, uintptr and defined element types among 3 and 4
// processes.
func TestOpsProcesses(t *testing.T) {
	if os.Getenv(shm.EnvArena) != "" {
		t.Skip("in a child")
	}
	for _, p := range []int{3, 4} {
		runRanks(t, "TestOpsChild", p, func(int) []string { return nil })
	}
}

// TestOpsChild is one rank of TestOpsProcesses.
func TestOpsChild(t *testing.T) {
	if os.Getenv(shm.EnvArena) == "" {
		t.Skip("run by TestOpsProcesses")
	}
	c, err := JoinEnv(bg, Options{SlotBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, n := range []int{5, 700} {
		if err := avgAll(c, n); err != nil {
			t.Fatal(err)
		}
	}
	p := c.Size()
	for _, n := range []int{9, 1500} {
		for kind := range 3 {
			counts := vcounts(p, n, kind)
			for _, packed := range []bool{true, false} {
				for root := range p {
					for _, mode := range []string{"blocking", "nonblocking", "in place"} {
						if err := gathervCase(c, counts, packed, root, mode, -5); err != nil {
							t.Fatalf("gatherv n=%d kind=%d root %d %s: %v", n, kind, root, mode, err)
						}
						if err := scattervCase(c, counts, packed, root, mode, -5); err != nil {
							t.Fatalf("scatterv n=%d kind=%d root %d %s: %v", n, kind, root, mode, err)
						}
					}
				}
			}
		}
	}
	intT := [9]simd.Type{4: simd.Int32, 8: simd.Int64}[unsafe.Sizeof(int(0))]
	uintT := [9]simd.Type{4: simd.Uint32, 8: simd.Uint64}[unsafe.Sizeof(uint(0))]
	for _, n := range []int{3, 600} {
		err := errors.Join(
			kindFamilies[int](c, n, intT),
			kindFamilies[uint](c, n, uintT),
			kindFamilies[uintptr](c, n, uintT),
			kindFamilies[tick](c, n, intT),
			kindFamilies[weight](c, n, simd.Float32),
			kindFamilies[flags16](c, n, simd.Uint16),
		)
		if err != nil {
			t.Fatal(err)
		}
	}
}
