package collectives

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/shmcoll/shmcoll/shm"
	"github.com/shmcoll/shmcoll/simd"
)

// The algorithms on read schedules, tested live: the matrix of counts and
// roots over the collectives each implements, every type and operator,
// non-commutative operators on the ordered ones, bitwise identical floats,
// instrumented counts, real processes.

var schedAlgs = []Algorithm{Rabenseifner, Rabenseifner21, RecDoubling, RabenseifnerOdd, Ring, BDE, MST, Bruck}

// testSchedMatrix runs the matrix of alg over the communicator sizes.
func testSchedMatrix(t *testing.T, alg Algorithm) {
	for _, p := range testSizes() {
		t.Run(fmt.Sprintf("p=%d", p), func(t *testing.T) {
			if err := Run(p, pinAll(alg), func(c *Comm) error { return matrixCalls(t, c, alg, true, nil) }); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestRabenseifnerMatrix(t *testing.T) {
	// With 4 KiB slots a segment has at most 1 KiB: a low threshold makes
	// the counts of the matrix run halving, mixed and whole exchanges.
	old := rabHalvingMinBytes
	defer func() { rabHalvingMinBytes = old }()
	rabHalvingMinBytes = 64
	for _, alg := range []Algorithm{Rabenseifner, Rabenseifner21, RecDoubling} {
		t.Run(alg.String(), func(t *testing.T) { testSchedMatrix(t, alg) })
	}
}

// TestRabenseifnerMixed runs allreduce with every number of halving
// levels: the mixed protocol's threshold is lowered so that the 4 KiB
// slots see pure halving, mixed and pure whole-range exchange.
func TestRabenseifnerMixed(t *testing.T) {
	old := rabHalvingMinBytes
	defer func() { rabHalvingMinBytes = old }()
	for _, min := range []int{1, 128, 256, 1 << 20} {
		rabHalvingMinBytes = min
		for _, p := range []int{3, 4, 7, 8, 12} {
			for _, alg := range []Algorithm{Rabenseifner, Rabenseifner21} {
				err := Run(p, pinAll(alg), func(c *Comm) error {
					r := c.Rank()
					for _, n := range []int{1, p, 37, 300, 1009} {
						got := make([]int32, n)
						if err := Allreduce(bg, c, vec(r, n), got, Sum); err != nil {
							return err
						}
						expect(t, fmt.Sprintf("%v min=%d p=%d n=%d rank %d", alg, min, p, n, r), got, sumAll(p, n))
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// TestSchedTypesAndOperators runs every type and operator (allreduce,
// reduce_scatter_block, reduce) on the reducing algorithms.
func TestSchedTypesAndOperators(t *testing.T) {
	ps := []int{3, 4}
	if long {
		ps = append(ps, 2, 5, 8, 13)
	}
	if testing.Short() {
		ps = []int{3}
	}
	for _, alg := range []Algorithm{Rabenseifner, Rabenseifner21, RecDoubling, RabenseifnerOdd, Ring, BDE, MST, Bruck} {
		for _, p := range ps {
			for _, f := range typeTests {
				f(t, p, alg)
			}
		}
	}
}

// TestSchedNonCommutative: the ordered algorithms reduce in rank order
// (the affine operator of errors_test.go composes maps, so any reordering
// shows); the others refuse a non-commutative operator on every rank.
func TestSchedNonCommutative(t *testing.T) {
	ps := []int{2, 3, 5, 6, 7, 8}
	if long {
		ps = append(ps, 9, 11, 12, 13, 15, 16, 17)
	}
	for _, alg := range []Algorithm{Rabenseifner, Rabenseifner21, RecDoubling, RabenseifnerOdd, MST, Bruck} {
		for _, p := range ps {
			n := 200 // several segments in 4 KiB slots
			in := make([][]simd.Int64Int64, p)
			for r := range in {
				in[r] = affineIn(r, p*n)
			}
			want := refReduce(t, affine, in)
			err := Run(p, pinAll(alg), func(c *Comm) error { return affineCalls(t, c, alg, in, want) })
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, alg := range []Algorithm{Ring, BDE} {
		errs := runAll(t, 3, Options{Algorithms: map[Collective]Algorithm{CollAllreduce: alg}}, func(c *Comm) error {
			return Allreduce(bg, c, affineIn(c.Rank(), 6), make([]simd.Int64Int64, 6), affine)
		})
		for r, err := range errs {
			if !errors.Is(err, ErrNotCommutative) {
				t.Errorf("%v rank %d: %v, want ErrNotCommutative", alg, r, err)
			}
		}
	}
}

// affineCalls makes the calls of the reducing collectives alg implements
// with the affine operator on rank r's input in[r] (p blocks of n
// elements) and checks them against want, the reduction in rank order.
func affineCalls(t *testing.T, c *Comm, alg Algorithm, in [][]simd.Int64Int64, want []simd.Int64Int64) error {
	p, r := c.Size(), c.Rank()
	n := len(want) / p
	what := fmt.Sprintf("%v p=%d rank %d", alg, p, r)
	if implements(alg, CollAllreduce) {
		got := make([]simd.Int64Int64, p*n)
		if err := Allreduce(bg, c, in[r], got, affine); err != nil {
			return err
		}
		expect(t, what+" allreduce", got, want)
		// In place: the schedules' reductions whose result overwrites
		// their right operand.
		copy(got, in[r])
		if err := Allreduce(bg, c, nil, got, affine); err != nil {
			return err
		}
		expect(t, what+" allreduce in place", got, want)
	}
	if implements(alg, CollReduceScatterBlock) {
		blk := make([]simd.Int64Int64, n)
		if err := ReduceScatterBlock(bg, c, in[r], blk, affine); err != nil {
			return err
		}
		expect(t, what+" reduce_scatter_block", blk, want[r*n:(r+1)*n])
	}
	for _, root := range []int{0, p - 1, p / 2} {
		if !implements(alg, CollReduce) {
			break
		}
		var out []simd.Int64Int64
		if r == root {
			out = make([]simd.Int64Int64, p*n)
		}
		if err := Reduce(bg, c, in[r], out, affine, root); err != nil {
			return err
		}
		if out != nil {
			expect(t, fmt.Sprintf("%s reduce root %d", what, root), out, want)
		}
	}
	return nil
}

// TestSchedCounts asserts the instrumented per-call counts of live calls:
// S segments of the schedule's per-step counts, and for p = 8 the papers'
// numbers (001 butterfly: 2 log2 p rounds, 2(p-1) blocks received, p-1
// reduced; 003 ring: 2(p-1) rounds; BDE and Bruck: log2 p rounds, p-1
// blocks).
func TestSchedCounts(t *testing.T) {
	old := rabHalvingMinBytes
	defer func() { rabHalvingMinBytes = old }()
	rabHalvingMinBytes = 0 // the pure butterfly
	p := 8
	err := Run(p, Options{SlotBytes: 4096}, func(c *Comm) error {
		check := func(what string, want Stats) {
			last, _ := c.Stats()
			if last != want {
				t.Errorf("rank %d %s: %+v, want %+v", c.Rank(), what, last, want)
			}
		}
		pin := func(coll Collective, alg Algorithm) { setPin(c, coll, alg) }
		// 600 float64 in 4 KiB slots: rabenseifner's segments hold 128
		// (buffer X takes the other half of the 2 KiB slot half), so 5.
		pin(CollAllreduce, Rabenseifner)
		if err := Allreduce(bg, c, make([]float64, 600), make([]float64, 600), Sum); err != nil {
			return err
		}
		check("rabenseifner allreduce", Stats{Calls: 1, Steps: 5, Rounds: 5 * 6, Sent: 5 * 14, Received: 5 * 14, Reduced: 5 * 7})
		pin(CollAllreduce, RecDoubling)
		if err := Allreduce(bg, c, make([]float64, 16), make([]float64, 16), Sum); err != nil {
			return err
		}
		check("recdoubling allreduce", Stats{Calls: 1, Steps: 1, Rounds: 3, Sent: 3 * 8, Received: 3 * 8, Reduced: 3 * 8})
		pin(CollAllreduce, Ring)
		if err := Allreduce(bg, c, make([]float64, 16), make([]float64, 16), Sum); err != nil {
			return err
		}
		check("ring allreduce", Stats{Calls: 1, Steps: 1, Rounds: 14, Sent: 14, Received: 14, Reduced: 7})
		pin(CollReduceScatterBlock, BDE)
		if err := ReduceScatterBlock(bg, c, make([]float64, 16), make([]float64, 2), Sum); err != nil {
			return err
		}
		check("bde reduce_scatter_block", Stats{Calls: 1, Steps: 1, Rounds: 3, Sent: 7, Received: 7, Reduced: 7})
		pin(CollAllgather, Bruck)
		if err := Allgather(bg, c, make([]float64, 2), make([]float64, 16)); err != nil {
			return err
		}
		check("bruck allgather", Stats{Calls: 1, Steps: 1, Rounds: 3, Sent: 7, Received: 7})
		pin(CollAllreduce, Bruck)
		if err := Allreduce(bg, c, make([]float64, 16), make([]float64, 16), Sum); err != nil {
			return err
		}
		check("bruck allreduce", Stats{Calls: 1, Steps: 1, Rounds: 4, Sent: 14, Received: 14, Reduced: 7})
		pin(CollReduceScatterBlock, Rabenseifner21)
		if err := ReduceScatterBlock(bg, c, make([]float64, 16), make([]float64, 2), Sum); err != nil {
			return err
		}
		check("rabenseifner21 reduce_scatter_block", Stats{Calls: 1, Steps: 1, Rounds: 3, Sent: 7, Received: 7, Reduced: 7})
		pin(CollBcast, MST)
		if err := Bcast(bg, c, make([]float64, 16), 0); err != nil {
			return err
		}
		last, _ := c.Stats()
		if c.Rank() != 0 && (last.Rounds != 1 || last.Received != 1) {
			t.Errorf("rank %d mst bcast: %+v, want one round, one block", c.Rank(), last)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Any p: the live counts are the schedule's.
	rabHalvingMinBytes = 0
	for _, p := range []int{3, 5, 6, 7, 12} {
		err := Run(p, Options{SlotBytes: 4096}, func(c *Comm) error {
			for _, alg := range []Algorithm{Rabenseifner, Rabenseifner21, Ring, BDE} {
				setPin(c, CollAllreduce, alg)
				if err := Allreduce(bg, c, make([]float64, 100), make([]float64, 100), Sum); err != nil {
					return err
				}
				last, _ := c.Stats()
				var s *schedule
				switch alg {
				case Ring:
					s = ringSchedule(p, 0, CollAllreduce)
				case BDE:
					s = bdeSchedule(p, CollAllreduce)
				default:
					s = rabSchedule(p, alg == Rabenseifner21, floorLog2(p), CollAllreduce, 0)
				}
				want := s.ranks[c.Rank()].stats
				want.Calls, want.Steps = 1, 1
				if last != want {
					t.Errorf("%v p=%d rank %d: %+v, want %+v", alg, p, c.Rank(), last, want)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestSchedProcesses runs the matrix of every algorithm among real
// processes (the test binary re-executed as TestSchedProcessChild).
func TestSchedProcesses(t *testing.T) {
	if os.Getenv(shm.EnvArena) != "" {
		t.Skip("in a child")
	}
	ps := []int{3, 4}
	if long {
		ps = []int{2, 3, 4, 5, 6, 7, 8}
	}
	if testing.Short() {
		ps = []int{3}
	}
	for _, p := range ps {
		t.Run(fmt.Sprintf("p=%d", p), func(t *testing.T) {
			name := shm.NewName()
			out := make([][]byte, p)
			errs := make([]error, p)
			var wg sync.WaitGroup
			for r := range p {
				cmd := exec.Command(os.Args[0], "-test.run=^TestSchedProcessChild$", "-test.count=1", "-test.v")
				cmd.Env = append(os.Environ(),
					shm.EnvRank+"="+strconv.Itoa(r), shm.EnvSize+"="+strconv.Itoa(p), shm.EnvArena+"="+name)
				wg.Go(func() { out[r], errs[r] = cmd.CombinedOutput() })
			}
			wg.Wait()
			for r := range p {
				if errs[r] != nil || !strings.Contains(string(out[r]), "--- PASS: TestSchedProcessChild") {
					t.Errorf("rank %d: %v\n%s", r, errs[r], out[r])
				}
			}
			// Other tests of the machine may hold segments of their own:
			// look for this one's only.
			if left, _ := filepath.Glob(fmt.Sprintf("/dev/shm/shmcoll.%d.%s*", os.Getuid(), name)); len(left) > 0 {
				t.Errorf("segment left in /dev/shm: %v", left)
			}
		})
	}
}

// TestSchedProcessChild is one rank of TestSchedProcesses: the matrix of
// each algorithm in turn on one communicator.
func TestSchedProcessChild(t *testing.T) {
	if os.Getenv(shm.EnvArena) == "" {
		t.Skip("run by TestSchedProcesses")
	}
	c, err := JoinEnv(bg, Options{SlotBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, alg := range schedAlgs {
		for coll, a := range pinAll(alg).Algorithms {
			setPin(c, coll, a)
		}
		if err := matrixCalls(t, c, alg, true, nil); err != nil {
			t.Fatalf("%v: %v", alg, err)
		}
	}
	_, total := c.Stats()
	t.Logf("rank %d of %d (pid %d): %d calls, %d steps, %d rounds", c.Rank(), c.Size(), os.Getpid(), total.Calls, total.Steps, total.Rounds)
}

// TestSchedMismatch: ranks that pass different counts or roots or choose
// different algorithms of the family fail with the same ErrMismatch on
// every rank.
func TestSchedMismatch(t *testing.T) {
	for _, p := range []int{4, 5, 7} {
		for _, alg := range []Algorithm{Rabenseifner, Rabenseifner21, RecDoubling, RabenseifnerOdd, Ring, BDE, Bruck} {
			other := Rabenseifner21
			if alg == Rabenseifner21 {
				other = Rabenseifner
			}
			errs := runAll(t, p, Options{}, func(c *Comm) error {
				setPin(c, CollAllreduce, alg)
				if c.Rank() == p-1 {
					setPin(c, CollAllreduce, other)
				}
				return Allreduce(bg, c, make([]float64, 64), make([]float64, 64), Sum)
			})
			sameAbort(t, fmt.Sprintf("%v p=%d algorithms", alg, p), errs, ErrMismatch)
			errs = runAll(t, p, Options{}, func(c *Comm) error {
				setPin(c, CollAllreduce, alg)
				n := 64
				if c.Rank() == 1 {
					n = 65
				}
				return Allreduce(bg, c, make([]float64, n), make([]float64, n), Sum)
			})
			sameAbort(t, fmt.Sprintf("%v p=%d counts", alg, p), errs, ErrMismatch)
		}
		for _, alg := range []Algorithm{MST, Ring, Tree, Nblock} {
			root := func(c *Comm) int { return min(c.Rank()/2, 1) } // rank 2 and later: 1
			errs := runAll(t, p, Options{}, func(c *Comm) error {
				setPin(c, CollBcast, alg)
				return Bcast(bg, c, make([]float64, 64), root(c))
			})
			sameAbort(t, fmt.Sprintf("%v p=%d bcast roots", alg, p), errs, ErrMismatch)
			if !implements(alg, CollReduce) {
				continue
			}
			errs = runAll(t, p, Options{}, func(c *Comm) error {
				setPin(c, CollReduce, alg)
				var out []float64
				if c.Rank() == root(c) {
					out = make([]float64, 64)
				}
				return Reduce(bg, c, make([]float64, 64), out, Sum, root(c))
			})
			sameAbort(t, fmt.Sprintf("%v p=%d reduce roots", alg, p), errs, ErrMismatch)
		}
	}
}
