//go:build mpi

package hier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shmcoll/shmcoll/collectives"
	"github.com/shmcoll/shmcoll/mpi"
	"github.com/shmcoll/shmcoll/simd"
)

// The TestRank* tests run inside ranks started by mpirun; TestMPIRun starts
// them with several emulated node layouts.

var launched = os.Getenv("OMPI_COMM_WORLD_SIZE") != "" || os.Getenv("PMI_SIZE") != ""

// testPrefix names the node arenas of the ranks TestMPIRun starts, so that
// its leak checks count only theirs (other packages' tests, such as
// internal/mpibench's, may run hier jobs at the same time).
var testPrefix = fmt.Sprintf("hier-test%d-", os.Getpid())

func TestMain(m *testing.M) {
	if !launched {
		os.Exit(m.Run())
	}
	if p := os.Getenv("SHMCOLL_HIER_TEST_PREFIX"); p != "" {
		arenaPrefix = p
	}
	if err := mpi.Init(mpi.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, "mpi.Init:", err)
		os.Exit(3)
	}
	code := m.Run()
	worst := []int32{int32(code)}
	if err := mpi.Allreduce(mpi.World(), nil, worst, mpi.Max); err != nil {
		fmt.Fprintln(os.Stderr, "agreeing on the exit code:", err)
		worst[0] = 1
	}
	if err := mpi.Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, "mpi.Finalize:", err)
		worst[0] = 1
	}
	if dir := os.Getenv("SHMCOLL_HIER_TEST_DIR"); dir != "" {
		rank := os.Getenv("OMPI_COMM_WORLD_RANK") + os.Getenv("PMI_RANK")
		if err := os.WriteFile(filepath.Join(dir, "rank"+rank), []byte(strconv.Itoa(int(worst[0]))), 0o600); err != nil {
			fmt.Fprintln(os.Stderr, err)
			worst[0] = 1
		}
	}
	os.Exit(int(worst[0]))
}

type layout struct {
	np    int
	nodes string // SHMCOLL_NODE_SIZE
	quick bool   // fewer types and sizes (SHMCOLL_HIER_QUICK=1)
	run   string // the rank tests to run; "" means all
}

// TestMPIRun runs the rank tests at 2 to 8 ranks on 1 to 4 emulated nodes,
// even and uneven, under the MPI this binary is linked with (MPICH, which
// spins when oversubscribed, gets the larger layouts with SHMCOLL_LONG=1;
// give that run -timeout 90m), then checks that an aborting rank ends the
// job and leaves no segment.
func TestMPIRun(t *testing.T) {
	if launched {
		t.Skip("inside a rank")
	}
	in := mpi.Lookup(mpi.Linked())
	if err := in.Err(); err != nil {
		t.Fatalf("built with -tags mpi for %s, but: %v", mpi.Linked(), err)
	}
	long := os.Getenv("SHMCOLL_LONG") == "1"
	layouts := []layout{{2, "1", false, ""}, {2, "", false, ""}, {4, "2", false, ""}, {4, "3,1", false, ""}, {4, "1", false, ""},
		{6, "2", false, ""}, {6, "4,2", false, ""}, {8, "4", false, ""}, {8, "3", false, ""}}
	if mpi.Linked() == mpi.MPICH && !long {
		// Each oversubscribed MPICH call waits for a scheduler tick: the
		// larger layouts run only the operator-order and irregular tests.
		const some = "^TestRank(NonCommutative|Irregular)"
		layouts = []layout{{2, "1", false, ""}, {4, "3,1", true, ""}, {4, "2", true, some},
			{6, "4,2", true, some}, {6, "2", true, "^TestRankNonCommutative$"}, {8, "3", true, "^TestRankNonCommutative$"}, {8, "4", true, "^TestRankNonCommutative$"}}
	}
	for _, l := range layouts {
		t.Run(fmt.Sprintf("np=%d/nodes=%s", l.np, l.nodes), func(t *testing.T) {
			before := segments(t)
			dir := t.TempDir()
			env := []string{"SHMCOLL_NODE_SIZE=" + l.nodes, "SHMCOLL_HIER_TEST_DIR=" + dir, "SHMCOLL_HIER_QUICK=" + b2s(l.quick),
				"SHMCOLL_HIER_TEST_PREFIX=" + testPrefix}
			run := l.run
			if run == "" {
				run = "^TestRank"
			}
			out, err := launch(t, in, l.np, env, run)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			for r := 0; r < l.np; r++ {
				b, err := os.ReadFile(filepath.Join(dir, "rank"+strconv.Itoa(r)))
				if err != nil || string(b) != "0" {
					t.Fatalf("rank %d did not finish cleanly (%q, %v):\n%s", r, b, err, out)
				}
			}
			if after := segments(t); after > before {
				t.Errorf("%d segments left in /dev/shm", after-before)
			}
		})
	}
	t.Run("abort", func(t *testing.T) {
		before := segments(t)
		out, err := launch(t, in, 4, []string{"SHMCOLL_NODE_SIZE=2", "SHMCOLL_HIER_TEST_ABORT=1", "SHMCOLL_HIER_TEST_PREFIX=" + testPrefix}, "^TestAbort$")
		// Both launchers exit with the code given to MPI_Abort.
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 7 {
			t.Fatalf("mpirun: got %v, want exit status 7 from rank 1's MPI_Abort\n%s", err, out)
		}
		if after := segments(t); after > before {
			t.Errorf("%d segments left in /dev/shm after the abort", after-before)
		}
	})
}

// segments counts the node-arena segments of this test's ranks in /dev/shm
// (other packages' tests may create other shmcoll segments meanwhile).
func segments(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/dev/shm")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	n := 0
	prefix := "shmcoll." + strconv.Itoa(os.Getuid()) + "." + testPrefix
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			n++
		}
	}
	return n
}

func launch(t *testing.T, in mpi.Installation, np int, env []string, run string) (string, error) {
	t.Helper()
	limit := 4 * time.Minute
	if os.Getenv("SHMCOLL_LONG") == "1" {
		limit = 20 * time.Minute // MPICH spins when oversubscribed: ~40 ms per call at 8 ranks
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := in.Command(ctx, np, exe, "-test.run="+run, "-test.count=1", "-test.v")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(os.Environ(), env...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err = cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%s did not finish in time: %v", strings.Join(cmd.Args, " "), err)
	} else if err != nil {
		err = fmt.Errorf("%s: %w", strings.Join(cmd.Args, " "), err)
	}
	return "\n" + buf.String(), err
}

// must ends the whole job on an error: the other ranks may be waiting for
// this one in MPI, so failing only this rank's test would hang them.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Error(err)
		fmt.Fprintf(os.Stderr, "rank test failed: %v\n", err)
		mpi.World().Abort(1)
	}
}

// newComm forms the hierarchy for a rank test.
func newComm(t *testing.T, alg Algorithm) *Comm {
	return newCommOpt(t, Options{Algorithm: alg})
}

func newCommOpt(t *testing.T, opt Options) *Comm {
	t.Helper()
	if !launched {
		t.Skip("runs inside ranks started by TestMPIRun")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := New(ctx, mpi.World(), opt)
	must(t, err)
	t.Cleanup(func() { must(t, c.Close()) })
	return c
}

// wantLayout is the node layout SHMCOLL_NODE_SIZE asks for on p ranks.
func wantLayout(t *testing.T, p int) []int {
	sizes, err := parseNodeSizes(os.Getenv("SHMCOLL_NODE_SIZE"))
	must(t, err)
	switch len(sizes) {
	case 0:
		return []int{p}
	case 1:
		var out []int
		for left := p; left > 0; left -= sizes[0] {
			out = append(out, min(left, sizes[0]))
		}
		return out
	}
	return sizes
}

func TestRankForm(t *testing.T) {
	c := newComm(t, Auto)
	want := wantLayout(t, c.Size())
	got := c.NodeSizes()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("node sizes %v, want %v", got, want)
	}
	// Emulated nodes are consecutive world ranks.
	idx, nodes, local := c.Node()
	first := 0
	for _, s := range want[:idx] {
		first += s
	}
	if nodes != len(want) || c.Rank() != first+local || c.Local().Size() != want[idx] || c.Local().Rank() != local {
		t.Errorf("rank %d: node %d of %d, local rank %d of %d; want layout %v", c.Rank(), idx, nodes, local, c.Local().Size(), want)
	}
	lanes := want[0]
	for _, s := range want {
		lanes = min(lanes, s)
	}
	if c.lanes != lanes {
		t.Errorf("lanes %d, want %d", c.lanes, lanes)
	}
}

// Test data: small integers, exact in every type and order (|sum| <= 32).
func input(t simd.Type, op simd.Op, r, i int) (int64, int64) {
	switch {
	case op == simd.Prod:
		return 1 + int64(b2i((r+i)%3 == 0)), 0
	case t >= simd.Uint8 && t <= simd.Uint64, op == simd.Band, op == simd.Bor, op == simd.Bxor, op == simd.Land, op == simd.Lor:
		return int64((r*5 + i*3) % 9), int64((r*7 + i) % 9)
	}
	return int64((r*5+i*3)%9) - 4, int64((r*7+i)%9) - 4
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// expect is our own reference: op over ranks 0..p-1 of input.
func expect(t simd.Type, op simd.Op, p, i int) (int64, int64) {
	re, im := input(t, op, 0, i)
	for r := 1; r < p; r++ {
		a, b := input(t, op, r, i)
		switch op {
		case simd.Sum:
			re, im = re+a, im+b
		case simd.Prod:
			re, im = re*a-im*b, re*b+im*a
		case simd.Min:
			re = min(re, a)
		case simd.Max:
			re = max(re, a)
		case simd.Band:
			re &= a
		case simd.Bor:
			re |= a
		case simd.Bxor:
			re ^= a
		case simd.Land:
			re = int64(b2i(re != 0 && a != 0))
		case simd.Lor:
			re = int64(b2i(re != 0 || a != 0))
		}
	}
	return re, im
}

func conv[T simd.Element](re, im int64) T {
	var z T
	switch p := any(&z).(type) {
	case *int8:
		*p = int8(re)
	case *int16:
		*p = int16(re)
	case *int32:
		*p = int32(re)
	case *int64:
		*p = re
	case *uint8:
		*p = uint8(re)
	case *uint16:
		*p = uint16(re)
	case *uint32:
		*p = uint32(re)
	case *uint64:
		*p = uint64(re)
	case *float32:
		*p = float32(re)
	case *float64:
		*p = float64(re)
	case *simd.BFloat16:
		*p = simd.BFloat16FromFloat32(float32(re))
	case *simd.Float16:
		*p = simd.Float16FromFloat32(float32(re))
	case *complex64:
		*p = complex(float32(re), float32(im))
	case *complex128:
		*p = complex(float64(re), float64(im))
	default:
		panic(fmt.Sprintf("conv: %T", z))
	}
	return z
}

func allreduceType[T simd.Element](t *testing.T, c *Comm, sizes []int) {
	typ := simd.TypeOf[T]()
	ctx := context.Background()
	for _, op := range simd.Ops() {
		if !simd.Supports(typ, op) {
			continue
		}
		for _, n := range sizes {
			for _, inPlace := range []bool{false, true} {
				send, recv := make([]T, n), make([]T, n)
				for i := range send {
					send[i] = conv[T](input(typ, op, c.Rank(), i))
				}
				var err error
				if inPlace {
					copy(recv, send)
					err = Allreduce(ctx, c, nil, recv, collectives.Builtin(op))
				} else {
					err = Allreduce(ctx, c, send, recv, collectives.Builtin(op))
				}
				must(t, err)
				for i := range recv {
					if want := conv[T](expect(typ, op, c.Size(), i)); recv[i] != want {
						t.Errorf("%v %v n=%d inPlace=%v: [%d] = %v, want %v", typ, op, n, inPlace, i, recv[i], want)
						break
					}
				}
				// Against the MPI library's own allreduce, where MPI has the type.
				if dt, mop, ok := byMPI(operator{t: typ, builtin: op, isBuiltin: true}); ok && n > 0 && !inPlace {
					ref := make([]T, n)
					must(t, mpi.World().Allreduce(simd.AsBytes(send), simd.AsBytes(ref), dt, mop))
					if !bytes.Equal(simd.AsBytes(ref), simd.AsBytes(recv)) {
						t.Errorf("%v %v n=%d: differs from MPI_Allreduce", typ, op, n)
					}
				}
			}
		}
	}
}

// quick reports whether the launcher asked for fewer types and sizes.
func quick() bool { return os.Getenv("SHMCOLL_HIER_QUICK") == "1" }

func b2s(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func testAllreduce(t *testing.T, alg Algorithm) {
	c := newComm(t, alg)
	if quick() {
		allreduceType[int32](t, c, []int{1, 1000})
		allreduceType[simd.BFloat16](t, c, []int{1000})
		allreduceType[float64](t, c, []int{100003})
		return
	}
	sizes := []int{0, 1, 7, 1000}
	allreduceType[int8](t, c, sizes)
	allreduceType[int16](t, c, sizes)
	allreduceType[int32](t, c, sizes)
	allreduceType[int64](t, c, sizes)
	allreduceType[uint8](t, c, sizes)
	allreduceType[uint16](t, c, sizes)
	allreduceType[uint32](t, c, sizes)
	allreduceType[uint64](t, c, sizes)
	allreduceType[float32](t, c, sizes)
	allreduceType[float64](t, c, []int{0, 1, 7, 1000, 300007})
	allreduceType[simd.BFloat16](t, c, sizes)
	allreduceType[simd.Float16](t, c, sizes)
	allreduceType[complex64](t, c, sizes)
	allreduceType[complex128](t, c, sizes)
}

func TestRankAllreduceLeader(t *testing.T)    { testAllreduce(t, Leader) }
func TestRankAllreduceMultiLane(t *testing.T) { testAllreduce(t, MultiLane) }

// TestRankBitwise reduces random floats (rounding everywhere) and checks
// that every rank got the same bits, with each algorithm and Auto.
func TestRankBitwise(t *testing.T) {
	for _, alg := range []Algorithm{Leader, MultiLane, Auto} {
		c := newComm(t, alg)
		rng := rand.New(rand.NewPCG(uint64(c.Rank()), 42))
		for _, n := range []int{3, 5000, 100003} {
			f64 := make([]float64, n)
			for i := range f64 {
				f64[i] = rng.NormFloat64() * 1e3
			}
			must(t, Allreduce(context.Background(), c, nil, f64, collectives.Sum))
			bf := make([]simd.BFloat16, n)
			for i := range bf {
				bf[i] = simd.BFloat16FromFloat32(float32(rng.NormFloat64()))
			}
			must(t, Allreduce(context.Background(), c, nil, bf, collectives.Sum))
			h := fnv.New64a()
			h.Write(simd.AsBytes(f64))
			h.Write(simd.AsBytes(bf))
			sums := make([]uint64, c.Size())
			must(t, mpi.Allgather(mpi.World(), []uint64{h.Sum64()}, sums))
			for r, s := range sums {
				if s != sums[0] {
					t.Errorf("%v n=%d: rank %d's result differs from rank 0's", alg, n, r)
				}
			}
		}
	}
}

func TestRankArguments(t *testing.T) {
	c := newCommOpt(t, Options{ReturnErrors: true})
	ctx := context.Background()
	if err := Allreduce(ctx, c, make([]float32, 3), make([]float32, 3), collectives.Band); !errors.Is(err, simd.ErrUnsupported) {
		t.Errorf("band on float32: %v", err)
	}
	if err := Allreduce(ctx, c, make([]int32, 3), make([]int32, 4), collectives.Sum); err == nil {
		t.Error("lengths 3 and 4 accepted")
	}
	if _, err := emulatedNode([]int{3, 2}, 0, 4); !errors.Is(err, ErrBadNodeSizes) {
		t.Errorf("sizes 3,2 on 4 ranks: %v", err)
	}
	if _, err := parseNodeSizes("2,x"); !errors.Is(err, ErrBadNodeSizes) {
		t.Errorf("2,x: %v", err)
	}
	if n, err := emulatedNode([]int{3, 1, 2}, 4, 6); n != 2 || err != nil {
		t.Errorf("rank 4 of 3,1,2: node %d, %v", n, err)
	}
	p := c.Size()
	if err := Allgatherv(ctx, c, nil, make([]int32, 10), make([]int, p+1), nil); err == nil {
		t.Error("allgatherv: p+1 counts accepted")
	}
	if err := Allgatherv(ctx, c, nil, make([]int32, 2), irregular(p, 5), nil); err == nil {
		t.Error("allgatherv: counts beyond recv accepted")
	}
	neg := make([]int, p)
	neg[p-1] = -1
	if err := ReduceScatter(ctx, c, nil, make([]int32, 10), neg, collectives.Sum); err == nil {
		t.Error("reduce_scatter: a negative count accepted")
	}
	wrong := collectives.NewOp("i64", func(dst, src []int64) {}, true)
	if err := ReduceScatterBlock(ctx, c, nil, make([]int32, p), wrong); err == nil {
		t.Error("reduce_scatter_block: an int64 operator on int32 accepted")
	}
}

// TestAbort runs only when TestMPIRun asks: rank 1 aborts the job while
// the others wait in a hierarchical allreduce.
func TestAbort(t *testing.T) {
	if os.Getenv("SHMCOLL_HIER_TEST_ABORT") != "1" {
		t.Skip("only under TestMPIRun/abort")
	}
	c := newComm(t, MultiLane)
	if c.Rank() == 1 {
		fmt.Println("rank 1 aborting with code 7")
		os.Stdout.Sync()
		mpi.World().Abort(7)
	}
	_ = Allreduce(context.Background(), c, nil, make([]float64, 1<<16), collectives.Sum)
	t.Error("the allreduce returned although rank 1 aborted")
}

// roots are rank 0, the last rank and one that is not local rank 0.
func roots(c *Comm) []int {
	rs := []int{0, c.Size() - 1}
	for r, w := range c.where {
		if w.local != 0 {
			rs = append(rs, r)
			break
		}
	}
	return rs
}

func bcastType[T simd.Element](t *testing.T, c *Comm, sizes []int) {
	typ := simd.TypeOf[T]()
	for _, root := range roots(c) {
		for _, n := range sizes {
			buf := make([]T, n)
			for i := range buf {
				if c.Rank() == root {
					buf[i] = conv[T](input(typ, simd.Sum, root, i))
				} else {
					buf[i] = conv[T](-1, -1)
				}
			}
			must(t, Bcast(context.Background(), c, buf, root))
			for i := range buf {
				if want := conv[T](input(typ, simd.Sum, root, i)); buf[i] != want {
					t.Errorf("%v root=%d n=%d: [%d] = %v, want %v", typ, root, n, i, buf[i], want)
					break
				}
			}
		}
	}
}

func reduceType[T simd.Element](t *testing.T, c *Comm, op simd.Op, sizes []int) {
	typ := simd.TypeOf[T]()
	for _, root := range roots(c) {
		for _, n := range sizes {
			for _, inPlace := range []bool{false, true} {
				send := make([]T, n)
				for i := range send {
					send[i] = conv[T](input(typ, op, c.Rank(), i))
				}
				var recv []T
				var err error
				switch {
				case c.Rank() != root:
					err = Reduce(context.Background(), c, send, nil, collectives.Builtin(op), root)
				case inPlace:
					recv = append([]T(nil), send...)
					err = Reduce(context.Background(), c, nil, recv, collectives.Builtin(op), root)
				default:
					recv = make([]T, n)
					err = Reduce(context.Background(), c, send, recv, collectives.Builtin(op), root)
				}
				must(t, err)
				for i := range recv {
					if want := conv[T](expect(typ, op, c.Size(), i)); recv[i] != want {
						t.Errorf("%v %v root=%d n=%d inPlace=%v: [%d] = %v, want %v", typ, op, root, n, inPlace, i, recv[i], want)
						break
					}
				}
			}
		}
	}
}

func TestRankBcast(t *testing.T) {
	for _, alg := range []Algorithm{Leader, MultiLane} {
		c := newComm(t, alg)
		if quick() {
			bcastType[int32](t, c, []int{1000})
			continue
		}
		sizes := []int{0, 1, 7, 1000}
		bcastType[int32](t, c, sizes)
		bcastType[simd.Float16](t, c, sizes)
		bcastType[complex128](t, c, sizes)
		bcastType[float64](t, c, []int{300007})
	}
}

func TestRankReduce(t *testing.T) {
	for _, alg := range []Algorithm{Leader, MultiLane} {
		c := newComm(t, alg)
		if quick() {
			reduceType[int32](t, c, simd.Sum, []int{1000})
			reduceType[simd.BFloat16](t, c, simd.Sum, []int{1000})
			continue
		}
		sizes := []int{0, 1, 7, 1000}
		reduceType[int32](t, c, simd.Sum, sizes)
		reduceType[uint8](t, c, simd.Bxor, sizes)
		reduceType[simd.BFloat16](t, c, simd.Sum, sizes)
		reduceType[float64](t, c, simd.Max, sizes)
		reduceType[complex64](t, c, simd.Prod, sizes)
		reduceType[int64](t, c, simd.Land, sizes)
		reduceType[float64](t, c, simd.Sum, []int{300007})
	}
}

// BenchmarkRankAllreduce sets the hierarchical allreduce (leader and
// multi-lane) beside the MPI library's own MPI_Allreduce on the same ranks,
// float64 sum. It runs inside ranks, with a fixed iteration count so that
// every rank runs the same loops:
//
//	go test -c -tags mpi -o hier.test ./collectives/hier
//	SHMCOLL_NODE_SIZE=2 mpirun -np 4 ./hier.test -test.run '^$' -test.bench Rank -test.benchtime 200x
//
// SHMCOLL_HIER_BENCH_SIZES=8,64,4096 (bytes) replaces the sizes. Each
// iteration is an MPI barrier, then the call; the reported median-us and
// min-us are those of the slowest rank per iteration (docs/DESIGN.md's method),
// identical on every rank.
func BenchmarkRankAllreduce(b *testing.B) {
	if !launched {
		b.Skip("runs inside ranks started by mpirun")
	}
	ctx := context.Background()
	comms := map[string]*Comm{}
	for _, a := range []Algorithm{Leader, MultiLane} {
		c, err := New(ctx, mpi.World(), Options{Algorithm: a})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		comms[a.String()] = c
	}
	sizes := []int{8, 1 << 10, 64 << 10, 1 << 20, 16 << 20}
	if s := os.Getenv("SHMCOLL_HIER_BENCH_SIZES"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				b.Fatal(err)
			}
			sizes = append(sizes, n)
		}
	}
	for _, bytes := range sizes {
		n := bytes / 8
		send, recv := make([]float64, n), make([]float64, n)
		for i := range send {
			send[i] = float64(i % 7)
		}
		for _, impl := range []string{"mpi", "leader", "multilane"} {
			b.Run(fmt.Sprintf("impl=%s/bytes=%d/ranks=%d", impl, bytes, mpi.World().Size()), func(b *testing.B) {
				b.SetBytes(int64(bytes))
				times := make([]float64, 0, b.N)
				for b.Loop() {
					if err := mpi.World().Barrier(); err != nil {
						b.Fatal(err)
					}
					t0 := time.Now()
					var err error
					if impl == "mpi" {
						err = mpi.Allreduce(mpi.World(), send, recv, mpi.Sum)
					} else {
						err = Allreduce(ctx, comms[impl], send, recv, collectives.Sum)
					}
					times = append(times, float64(time.Since(t0).Nanoseconds())/1e3)
					if err != nil {
						b.Fatal(err)
					}
				}
				if err := mpi.Allreduce(mpi.World(), nil, times, mpi.Max); err != nil {
					b.Fatal(err)
				}
				slices.Sort(times)
				b.ReportMetric(times[len(times)/2], "median-us")
				b.ReportMetric(times[0], "min-us")
			})
		}
	}
}

func allgatherType[T simd.Element](t *testing.T, c *Comm) {
	typ := simd.TypeOf[T]()
	p, r := c.Size(), c.Rank()
	for _, n := range []int{0, 1, 7, 1000} {
		for _, inPlace := range []bool{false, true} {
			send, recv := make([]T, n), make([]T, p*n)
			for i := range send {
				send[i] = conv[T](input(typ, simd.Sum, r, i))
			}
			if inPlace {
				copy(recv[r*n:], send)
				must(t, Allgather(context.Background(), c, nil, recv))
			} else {
				must(t, Allgather(context.Background(), c, send, recv))
			}
			for k := range recv {
				if want := conv[T](input(typ, simd.Sum, k/n, k%n)); recv[k] != want {
					t.Errorf("%v n=%d inPlace=%v: [%d] = %v, want %v", typ, n, inPlace, k, recv[k], want)
					break
				}
			}
		}
	}
}

func rsbType[T simd.Element](t *testing.T, c *Comm, op simd.Op) {
	typ := simd.TypeOf[T]()
	p, r := c.Size(), c.Rank()
	for _, n := range []int{0, 1, 7, 333} {
		for _, inPlace := range []bool{false, true} {
			send := make([]T, p*n)
			for i := range send {
				send[i] = conv[T](input(typ, op, r, i))
			}
			var got []T
			if inPlace {
				must(t, ReduceScatterBlock(context.Background(), c, nil, send, collectives.Builtin(op)))
				got = send[r*n : (r+1)*n]
			} else {
				got = make([]T, n)
				must(t, ReduceScatterBlock(context.Background(), c, send, got, collectives.Builtin(op)))
			}
			for i := range got {
				if want := conv[T](expect(typ, op, p, r*n+i)); got[i] != want {
					t.Errorf("%v %v n=%d inPlace=%v: [%d] = %v, want %v", typ, op, n, inPlace, i, got[i], want)
					break
				}
			}
		}
	}
}

func gatherSuite(t *testing.T, c *Comm) {
	if quick() {
		allgatherType[int32](t, c)
		rsbType[float64](t, c, simd.Sum)
		rsbType[simd.Float16](t, c, simd.Sum)
		return
	}
	allgatherType[int32](t, c)
	allgatherType[simd.BFloat16](t, c)
	allgatherType[complex128](t, c)
	rsbType[float64](t, c, simd.Sum)
	rsbType[int16](t, c, simd.Max)
	rsbType[simd.Float16](t, c, simd.Sum)
	rsbType[uint32](t, c, simd.Lor)
}

func TestRankAllgatherReduceScatter(t *testing.T) {
	for _, alg := range []Algorithm{Leader, MultiLane} {
		gatherSuite(t, newComm(t, alg))
	}
}

// TestRankNonContiguous puts ranks on emulated nodes round-robin, so that a
// node's ranks are not consecutive, and runs every collective on it.
func TestRankNonContiguous(t *testing.T) {
	for _, alg := range []Algorithm{Leader, MultiLane} {
		c := newCommOpt(t, Options{Algorithm: alg, NodeOf: func(r int) int { return r % 2 }})
		if c.Size() > 2 && c.contiguous {
			t.Fatalf("round-robin nodes reported contiguous: %+v", c.where)
		}
		gatherSuite(t, c)
		allreduceType[int32](t, c, []int{1, 1000})
		allreduceType[simd.BFloat16](t, c, []int{1000})
		bcastType[float32](t, c, []int{1, 1000})
		reduceType[int64](t, c, simd.Sum, []int{1, 1000})
	}
}

// pairCase checks minloc and maxloc on a (value, index) pair type, which
// crosses nodes as bytes and is reduced with shmcoll's kernels.
func pairCase[T simd.Element](t *testing.T, c *Comm, mk func(v int64, idx int) T) {
	typ := simd.TypeOf[T]()
	for _, op := range []simd.Op{simd.MinLoc, simd.MaxLoc} {
		const n = 777
		v := make([]T, n)
		val := func(r, i int) int64 { return int64((r*5+i*3)%4) - 2 } // many ties
		for i := range v {
			v[i] = mk(val(c.Rank(), i), c.Rank())
		}
		must(t, Allreduce(context.Background(), c, nil, v, collectives.Builtin(op)))
		for i := range v {
			best, at := val(0, i), 0
			for r := 1; r < c.Size(); r++ {
				if x := val(r, i); (op == simd.MinLoc && x < best) || (op == simd.MaxLoc && x > best) {
					best, at = x, r
				}
			}
			if want := mk(best, at); v[i] != want {
				t.Errorf("%v %v: [%d] = %+v, want %+v", typ, op, i, v[i], want)
				break
			}
		}
	}
}

func TestRankAllreducePairs(t *testing.T) {
	for _, alg := range []Algorithm{Leader, MultiLane} {
		c := newComm(t, alg)
		pairCase(t, c, func(v int64, idx int) simd.Float32Int32 {
			return simd.Float32Int32{Value: float32(v), Index: int32(idx)}
		})
		pairCase(t, c, func(v int64, idx int) simd.Float64Int32 {
			return simd.Float64Int32{Value: float64(v), Index: int32(idx)}
		})
		pairCase(t, c, func(v int64, idx int) simd.Int64Int64 { return simd.Int64Int64{Value: v, Index: int64(idx)} })
	}
}
