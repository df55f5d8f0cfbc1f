//go:build mpi

package mpi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The tests named TestRank* run inside ranks started by mpirun; TestMPIRun
// (the only test that runs under a plain `go test -tags mpi`) starts them.

var launched = os.Getenv("OMPI_COMM_WORLD_SIZE") != "" || os.Getenv("PMI_SIZE") != ""

func TestMain(m *testing.M) {
	if !launched {
		os.Exit(m.Run())
	}
	if err := Init(Options{}); err != nil {
		fmt.Fprintln(os.Stderr, "Init:", err)
		os.Exit(3)
	}
	code := m.Run()
	// Every rank exits with the worst code, so no rank's failure is hidden
	// behind another rank's success.
	worst := []int32{int32(code)}
	if err := Allreduce(World(), nil, worst, Max); err != nil {
		fmt.Fprintln(os.Stderr, "agreeing on the exit code:", err)
		worst[0] = 1
	}
	if err := Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, "Finalize:", err)
		worst[0] = 1
	}
	// Tell TestMPIRun that this rank got here (the ranks' output interleaves).
	if dir := os.Getenv("SHMCOLL_MPI_TEST_DIR"); dir != "" {
		rank := os.Getenv("OMPI_COMM_WORLD_RANK") + os.Getenv("PMI_RANK")
		name := filepath.Join(dir, "rank"+rank)
		if err := os.WriteFile(name, []byte(strconv.Itoa(int(worst[0]))), 0o600); err != nil {
			fmt.Fprintln(os.Stderr, err)
			worst[0] = 1
		}
	}
	os.Exit(int(worst[0]))
}

// TestMPIRun runs the rank tests under the mpirun of the MPI this binary is
// linked with, at 2 and 4 ranks (and 3 and 8 with SHMCOLL_LONG=1), with
// MPI_THREAD_MULTIPLE and with funnelling forced, and checks that a rank's
// MPI_Abort ends the job.
func TestMPIRun(t *testing.T) {
	if launched {
		t.Skip("inside a rank")
	}
	in := Lookup(Linked())
	if err := in.Err(); err != nil {
		t.Fatalf("built with -tags mpi for %s, but: %v", Linked(), err)
	}
	nps := []int{2, 4}
	if os.Getenv("SHMCOLL_LONG") == "1" {
		nps = []int{2, 3, 4, 8}
	}
	for _, np := range nps {
		for _, funnel := range []bool{false, true} {
			t.Run(fmt.Sprintf("np=%d/funnel=%v", np, funnel), func(t *testing.T) {
				dir := t.TempDir()
				out, err := launch(t, in, np, []string{"SHMCOLL_MPI_FUNNEL=" + b2s(funnel), "SHMCOLL_MPI_TEST_DIR=" + dir}, "^TestRank")
				if err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
				for r := 0; r < np; r++ {
					b, err := os.ReadFile(filepath.Join(dir, "rank"+strconv.Itoa(r)))
					if err != nil || string(b) != "0" {
						t.Fatalf("rank %d did not finish cleanly (%q, %v):\n%s", r, b, err, out)
					}
				}
				if testing.Verbose() {
					t.Logf("%s", out)
				}
			})
		}
	}
	t.Run("abort", func(t *testing.T) {
		out, err := launch(t, in, 2, []string{"SHMCOLL_MPI_TEST_ABORT=1"}, "^TestAbort$")
		// Both launchers exit with the code given to MPI_Abort.
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 7 {
			t.Fatalf("mpirun: got %v, want exit status 7 from rank 1's MPI_Abort\n%s", err, out)
		}
	})
}

func b2s(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// launch runs this test binary under mpirun and returns its combined output.
func launch(t *testing.T, in Installation, np int, env []string, run string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := in.Command(ctx, np, exe, "-test.run="+run, "-test.count=1", "-test.v")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(append(os.Environ(), "SHMCOLL_MPI_TEST_NP="+strconv.Itoa(np)), env...)
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

func rankOnly(t *testing.T) Comm {
	t.Helper()
	if !launched {
		t.Skip("runs inside ranks started by TestMPIRun")
	}
	return World()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestRankWorld(t *testing.T) {
	w := rankOnly(t)
	np, _ := strconv.Atoi(os.Getenv("SHMCOLL_MPI_TEST_NP"))
	if w.Size() != np {
		t.Errorf("Size %d, launched %d", w.Size(), np)
	}
	ranks := make([]int32, w.Size())
	must(t, Allgather(w, []int32{int32(w.Rank())}, ranks))
	for i, r := range ranks {
		if int(r) != i {
			t.Errorf("rank %d reports rank %d", i, r)
		}
	}
	if os.Getenv("SHMCOLL_MPI_FUNNEL") == "1" {
		if !Funneled() || Provided() < ThreadFunneled {
			t.Errorf("forced funnel: Funneled %v, Provided %v", Funneled(), Provided())
		}
	} else if Funneled() != (Provided() != ThreadMultiple) {
		t.Errorf("Funneled %v with Provided %v", Funneled(), Provided())
	}
	for d := Byte; d < numDatatypes; d++ {
		n, err := typeSize(d)
		must(t, err)
		if n != d.Size() {
			t.Errorf("MPI size of %v is %d, want %d", d, n, d.Size())
		}
	}
	if err := Init(Options{}); !errors.Is(err, ErrInitialized) {
		t.Errorf("second Init: %v, want ErrInitialized", err)
	}
}

// Test data: small integers, so every reduction is exact in any order.
func sval(r, i int) int64 { return int64((r*5+i*3)%13) - 6 }
func uval(r, i int) int64 { return int64((r*5 + i*3) % 13) }
func pval(r, i int) int64 { return 1 + int64(b2i((r+i)%3 == 0)) }
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// conv makes a T from an integer pair (the imaginary part counts only for
// complex types).
func conv[T Elem](re, im int64) T {
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
	case *complex64:
		*p = complex(float32(re), float32(im))
	case *complex128:
		*p = complex(float64(re), float64(im))
	}
	return z
}

// input is rank r's element i for op, as (real, imaginary) integers.
func input(dt Datatype, op Op, r, i int) (int64, int64) {
	switch {
	case op == Prod:
		return pval(r, i), 0
	case dt >= Uint8 && dt <= Uint64 || op == BAnd || op == BOr || op == BXor:
		return uval(r, i), uval(r, i+1)
	}
	return sval(r, i), sval(r, i+1)
}

// expect is op over ranks 0..p-1 of input, element i.
func expect[T Elem](dt Datatype, op Op, p, i int) T {
	var acc complex128
	var lo, hi, band, bor, bxor int64
	for r := 0; r < p; r++ {
		re, im := input(dt, op, r, i)
		v := complex(float64(re), float64(im))
		if r == 0 {
			acc, lo, hi, band, bor, bxor = v, re, re, re, re, re
			continue
		}
		switch op {
		case Sum:
			acc += v
		case Prod:
			acc *= v
		}
		lo, hi = min(lo, re), max(hi, re)
		band, bor, bxor = band&re, bor|re, bxor^re
	}
	switch op {
	case Min:
		return conv[T](lo, 0)
	case Max:
		return conv[T](hi, 0)
	case BAnd:
		return conv[T](band, 0)
	case BOr:
		return conv[T](bor, 0)
	case BXor:
		return conv[T](bxor, 0)
	}
	return conv[T](int64(real(acc)), int64(imag(acc)))
}

func fill[T Elem](dt Datatype, op Op, r int, v []T, offset int) {
	for i := range v {
		v[i] = conv[T](input(dt, op, r, offset+i))
	}
}

var allOps = []Op{Sum, Prod, Min, Max, BAnd, BOr, BXor}

func allreduceCase[T Elem](t *testing.T, c Comm) {
	dt := TypeOf[T]()
	t.Run(dt.String(), func(t *testing.T) {
		for _, op := range allOps {
			if !op.Applies(dt) {
				continue
			}
			for _, n := range []int{0, 1, 5, 1000} {
				for _, inPlace := range []bool{false, true} {
					send, recv := make([]T, n), make([]T, n)
					fill(dt, op, c.Rank(), send, 0)
					var err error
					if inPlace {
						copy(recv, send)
						err = Allreduce(c, nil, recv, op)
					} else {
						err = Allreduce(c, send, recv, op)
					}
					must(t, err)
					for i := range recv {
						if want := expect[T](dt, op, c.Size(), i); recv[i] != want {
							t.Errorf("%v n=%d inPlace=%v: [%d] = %v, want %v", op, n, inPlace, i, recv[i], want)
							break
						}
					}
				}
			}
		}
	})
}

func TestRankAllreduce(t *testing.T) {
	w := rankOnly(t)
	allreduceCase[int8](t, w)
	allreduceCase[int16](t, w)
	allreduceCase[int32](t, w)
	allreduceCase[int64](t, w)
	allreduceCase[uint8](t, w)
	allreduceCase[uint16](t, w)
	allreduceCase[uint32](t, w)
	allreduceCase[uint64](t, w)
	allreduceCase[float32](t, w)
	allreduceCase[float64](t, w)
	allreduceCase[complex64](t, w)
	allreduceCase[complex128](t, w)

	// One vector large enough for the libraries' pipelined algorithms.
	const n = 1<<20 + 3
	send, recv := make([]float64, n), make([]float64, n)
	fill(Float64, Sum, w.Rank(), send, 0)
	must(t, Allreduce(w, send, recv, Sum))
	for i := range recv {
		if want := expect[float64](Float64, Sum, w.Size(), i); recv[i] != want {
			t.Fatalf("large: [%d] = %v, want %v", i, recv[i], want)
		}
	}
}

func reduceCase[T Elem](t *testing.T, c Comm, op Op) {
	dt := TypeOf[T]()
	for _, root := range []int{0, c.Size() - 1} {
		for _, inPlace := range []bool{false, true} {
			const n = 777
			send := make([]T, n)
			fill(dt, op, c.Rank(), send, 0)
			var recv []T
			if c.Rank() == root {
				recv = make([]T, n)
			}
			var err error
			if inPlace && c.Rank() == root {
				copy(recv, send)
				err = Reduce(c, nil, recv, op, root)
			} else {
				err = Reduce(c, send, recv, op, root)
			}
			must(t, err)
			for i := range recv {
				if want := expect[T](dt, op, c.Size(), i); recv[i] != want {
					t.Errorf("%v %v root=%d inPlace=%v: [%d] = %v, want %v", dt, op, root, inPlace, i, recv[i], want)
					break
				}
			}
		}
	}
}

func TestRankReduce(t *testing.T) {
	w := rankOnly(t)
	reduceCase[int32](t, w, Sum)
	reduceCase[uint8](t, w, Max)
	reduceCase[float64](t, w, Sum)
	reduceCase[complex128](t, w, Prod)
}

func bcastCase[T Elem](t *testing.T, c Comm) {
	dt := TypeOf[T]()
	for root := 0; root < c.Size(); root++ {
		for _, n := range []int{0, 1, 4097} {
			buf := make([]T, n)
			if c.Rank() == root {
				fill(dt, Sum, root, buf, 0)
			}
			must(t, Bcast(c, buf, root))
			for i := range buf {
				if want := conv[T](input(dt, Sum, root, i)); buf[i] != want {
					t.Errorf("%v root=%d n=%d: [%d] = %v, want %v", dt, root, n, i, buf[i], want)
					break
				}
			}
		}
	}
}

func TestRankBcast(t *testing.T) {
	w := rankOnly(t)
	bcastCase[int64](t, w)
	bcastCase[uint8](t, w)
	bcastCase[complex64](t, w)
}

func rsbCase[T Elem](t *testing.T, c Comm, op Op) {
	dt := TypeOf[T]()
	p, r := c.Size(), c.Rank()
	for _, block := range []int{1, 3, 1000} {
		for _, inPlace := range []bool{false, true} {
			send := make([]T, p*block)
			fill(dt, op, r, send, 0)
			var got []T
			if inPlace {
				must(t, ReduceScatterBlock(c, nil, send, op))
				got = send[:block]
			} else {
				got = make([]T, block)
				must(t, ReduceScatterBlock(c, send, got, op))
			}
			for i := range got {
				if want := expect[T](dt, op, p, r*block+i); got[i] != want {
					t.Errorf("%v %v block=%d inPlace=%v: [%d] = %v, want %v", dt, op, block, inPlace, i, got[i], want)
					break
				}
			}
		}
	}
}

func TestRankReduceScatterBlock(t *testing.T) {
	w := rankOnly(t)
	rsbCase[float64](t, w, Sum)
	rsbCase[int32](t, w, Max)
	rsbCase[uint16](t, w, BXor)
}

func TestRankReduceScatter(t *testing.T) {
	w := rankOnly(t)
	p, r := w.Size(), w.Rank()
	counts := make([]int, p)
	total, before := 0, 0
	for i := range counts {
		counts[i] = (i*29 + 3) % 40 // uneven, some small
		if i < r {
			before += counts[i]
		}
		total += counts[i]
	}
	for _, inPlace := range []bool{false, true} {
		send := make([]int64, total)
		fill(Int64, Sum, r, send, 0)
		var got []int64
		if inPlace {
			must(t, ReduceScatter(w, nil, send, Sum, counts))
			got = send[:counts[r]]
		} else {
			got = make([]int64, counts[r])
			must(t, ReduceScatter(w, send, got, Sum, counts))
		}
		for i := range got {
			if want := expect[int64](Int64, Sum, p, before+i); got[i] != want {
				t.Errorf("inPlace=%v: [%d] = %d, want %d", inPlace, i, got[i], want)
				break
			}
		}
	}
}

func TestRankAllgather(t *testing.T) {
	w := rankOnly(t)
	p, r := w.Size(), w.Rank()
	for _, block := range []int{0, 1, 333} {
		for _, inPlace := range []bool{false, true} {
			recv := make([]int32, p*block)
			send := make([]int32, block)
			fill(Int32, Sum, r, send, 0)
			if inPlace {
				copy(recv[r*block:], send)
				must(t, Allgather(w, nil, recv))
			} else {
				must(t, Allgather(w, send, recv))
			}
			for i, v := range recv {
				if want := conv[int32](input(Int32, Sum, i/block, i%block)); v != want {
					t.Errorf("block=%d inPlace=%v: [%d] = %d, want %d", block, inPlace, i, v, want)
					break
				}
			}
		}
	}
}

func TestRankAllgatherv(t *testing.T) {
	w := rankOnly(t)
	p, r := w.Size(), w.Rank()
	counts, displs := make([]int, p), make([]int, p)
	total := 0
	for i := range counts {
		counts[i] = (i * 37) % 50 // rank 0 contributes nothing
		displs[i] = total + 2     // gaps of two untouched elements
		total = displs[i] + counts[i]
	}
	const sentinel = -99
	for _, packed := range []bool{false, true} {
		for _, inPlace := range []bool{false, true} {
			ds := displs
			size := total
			if packed {
				ds = nil
				size = 0
				for _, k := range counts {
					size += k
				}
			}
			recv := make([]float64, size)
			for i := range recv {
				recv[i] = sentinel
			}
			send := make([]float64, counts[r])
			fill(Float64, Sum, r, send, 0)
			off := func(i int) int {
				if ds != nil {
					return ds[i]
				}
				o := 0
				for _, k := range counts[:i] {
					o += k
				}
				return o
			}
			if inPlace {
				copy(recv[off(r):], send)
				must(t, Allgatherv(w, nil, recv, counts, ds))
			} else {
				must(t, Allgatherv(w, send, recv, counts, ds))
			}
			want := make([]float64, size)
			for i := range want {
				want[i] = sentinel
			}
			for i := range counts {
				fill(Float64, Sum, i, want[off(i):off(i)+counts[i]], 0)
			}
			for i := range recv {
				if recv[i] != want[i] {
					t.Errorf("packed=%v inPlace=%v: [%d] = %v, want %v", packed, inPlace, i, recv[i], want[i])
					break
				}
			}
		}
	}
}

func TestRankSplit(t *testing.T) {
	w := rankOnly(t)
	p, r := w.Size(), w.Rank()
	// Two colors, ordered by descending world rank.
	sub, err := w.Split(r%2, -r)
	must(t, err)
	members := 0
	for i := r % 2; i < p; i += 2 {
		members++
	}
	if sub.Size() != members {
		t.Errorf("color %d: size %d, want %d", r%2, sub.Size(), members)
	}
	if want := (p - 1 - r) / 2; r%2 == (p-1)%2 && sub.Rank() != want {
		t.Errorf("rank %d: sub rank %d, want %d", r, sub.Rank(), want)
	}
	sum := []int64{int64(r)}
	must(t, Allreduce(sub, nil, sum, Sum))
	var want int64
	for i := r % 2; i < p; i += 2 {
		want += int64(i)
	}
	if sum[0] != want {
		t.Errorf("sum of world ranks in color %d: %d, want %d", r%2, sum[0], want)
	}
	must(t, sub.Free())

	// An undefined color leaves rank 0 out.
	color := 0
	if r == 0 {
		color = -1
	}
	rest, err := w.Split(color, r)
	must(t, err)
	if r == 0 {
		if !rest.IsNull() {
			t.Errorf("rank 0 with color -1 got a communicator of size %d", rest.Size())
		}
	} else if rest.Size() != p-1 || rest.Rank() != r-1 {
		t.Errorf("rank %d: rank %d of %d, want %d of %d", r, rest.Rank(), rest.Size(), r-1, p-1)
	}
	must(t, rest.Free())
}

func TestRankSplitTypeShared(t *testing.T) {
	w := rankOnly(t)
	p, r := w.Size(), w.Rank()
	node, err := w.SplitTypeShared(-r)
	must(t, err)
	defer func() { must(t, node.Free()) }()
	// One machine: every rank shares memory with every other.
	if node.Size() != p || node.Rank() != p-1-r {
		t.Errorf("world rank %d: node rank %d of %d, want %d of %d", r, node.Rank(), node.Size(), p-1-r, p)
	}
	// A name agreed by broadcast, as the node arena does.
	name := make([]byte, 32)
	if node.Rank() == 0 {
		copy(name, fmt.Sprintf("shmcoll.%d.%d", os.Getuid(), os.Getpid()))
	}
	must(t, Bcast(node, name, 0))
	all := make([]byte, 32*p)
	must(t, Allgather(w, name, all))
	for i := 0; i < p; i++ {
		if !bytes.Equal(all[32*i:32*i+32], name) {
			t.Errorf("rank %d agreed on %q, rank %d on %q", i, all[32*i:32*i+32], r, name)
		}
	}
}

func TestRankSendRecv(t *testing.T) {
	w := rankOnly(t)
	p, r := w.Size(), w.Rank()
	next, prev := (r+1)%p, (r+p-1)%p
	out := make([]uint64, 100+r)
	fill(Uint64, Sum, r, out, 0)
	in := make([]uint64, 100+p)
	recv := func() {
		n, err := Recv(w, in, prev, 5)
		must(t, err)
		if n != 100+prev {
			t.Errorf("received %d elements from %d, want %d", n, prev, 100+prev)
		}
		for i := 0; i < n; i++ {
			if want := conv[uint64](input(Uint64, Sum, prev, i)); in[i] != want {
				t.Errorf("[%d] = %d, want %d", i, in[i], want)
				break
			}
		}
	}
	// A chain, so that blocking sends cannot deadlock at any size.
	if r == 0 {
		must(t, Send(w, out, next, 5))
		recv()
	} else {
		recv()
		must(t, Send(w, out, next, 5))
	}
	// A message longer than the buffer is an MPI error, returned.
	if p >= 2 && r < 2 {
		if r == 0 {
			must(t, Send(w, []int32{1, 2, 3, 4}, 1, 6))
		} else {
			_, err := Recv(w, make([]int32, 2), 0, 6)
			var me *Error
			if !errors.As(err, &me) || me.Call != "MPI_Recv" || me.Message == "" {
				t.Errorf("truncated receive: %v, want an *Error from MPI_Recv", err)
			}
		}
	}
	must(t, w.Barrier())
}

func TestRankArguments(t *testing.T) {
	w := rankOnly(t)
	p := w.Size()
	cases := []struct {
		name string
		err  error
	}{
		{"bcast root", Bcast(w, []int32{1}, p)},
		{"allreduce lengths", Allreduce(w, make([]int32, 3), make([]int32, 4), Sum)},
		{"allreduce band float", Allreduce(w, make([]float32, 3), make([]float32, 3), BAnd)},
		{"allreduce max complex", Allreduce(w, nil, make([]complex64, 3), Max)},
		{"allreduce overlap", func() error { b := make([]int32, 8); return Allreduce(w, b[1:5], b[2:6], Sum) }()},
		{"rsb lengths", ReduceScatterBlock(w, make([]int32, p+1), make([]int32, 1), Sum)},
		{"allgather lengths", Allgather(w, make([]int32, 2), make([]int32, 2*p+1))},
		{"allgatherv counts", Allgatherv(w, nil, make([]int32, 4), make([]int, p+1), nil)},
		{"allgatherv range", Allgatherv(w, nil, make([]int32, 4), append(make([]int, p-1), 5), nil)},
		{"send rank", Send(w, []int32{1}, p, 0)},
		{"free world", w.Free()},
	}
	for _, c := range cases {
		if !errors.Is(c.err, ErrArgument) {
			t.Errorf("%s: %v, want ErrArgument", c.name, c.err)
		}
	}
	var null Comm
	if err := null.Barrier(); !errors.Is(err, ErrArgument) {
		t.Errorf("barrier on the null communicator: %v", err)
	}
}

// TestRankThreads calls MPI from goroutines locked to different OS threads.
// With MPI_THREAD_MULTIPLE they run concurrently, each on its own duplicate
// of the world communicator, and MPI runs on the caller's thread. Funnelled,
// they take turns in the same order on every rank (concurrent blocking calls
// would deadlock through the one MPI thread) and MPI always runs on the
// initializing thread.
func TestRankThreads(t *testing.T) {
	w := rankOnly(t)
	const workers, iters = 4, 25
	comms := make([]Comm, workers)
	for i := range comms {
		var err error
		comms[i], err = w.Dup()
		must(t, err)
	}
	turn := make([]chan struct{}, workers+1)
	for i := range turn {
		turn[i] = make(chan struct{})
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers*iters)
	for g := 0; g < workers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			own := unix.Gettid()
			for it := 0; it < iters; it++ {
				if Funneled() {
					<-turn[g]
				}
				var tid int
				onMPIThread(func() { tid = unix.Gettid() })
				if want := own; Funneled() {
					if tid != rt.tid {
						errs <- fmt.Errorf("worker %d: MPI ran on thread %d, not the initializing thread %d", g, tid, rt.tid)
					}
				} else if tid != want {
					errs <- fmt.Errorf("worker %d: MPI ran on thread %d, not the caller's %d", g, tid, want)
				}
				v := []int64{int64(w.Rank()*1000 + g*10 + it)}
				if err := Allreduce(comms[g], nil, v, Sum); err != nil {
					errs <- err
				} else {
					want := int64(1000*w.Size()*(w.Size()-1)/2 + w.Size()*(g*10+it))
					if v[0] != want {
						errs <- fmt.Errorf("worker %d iteration %d: %d, want %d", g, it, v[0], want)
					}
				}
				if Funneled() {
					turn[g+1] <- struct{}{}
				}
			}
		}()
	}
	if Funneled() {
		for it := 0; it < iters; it++ {
			turn[0] <- struct{}{}
			<-turn[workers]
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, c := range comms {
		must(t, c.Free())
	}
}

// TestAbort runs only when TestMPIRun asks: rank 1 aborts while the others
// wait in a barrier that can never complete.
func TestAbort(t *testing.T) {
	w := rankOnly(t)
	if os.Getenv("SHMCOLL_MPI_TEST_ABORT") != "1" {
		t.Skip("only under TestMPIRun/abort")
	}
	if w.Rank() == 1 {
		fmt.Println("rank 1 aborting with code 7")
		os.Stdout.Sync()
		w.Abort(7)
	}
	_ = w.Barrier()
	t.Error("the barrier returned although rank 1 aborted")
}

// TestRankRaw uses the byte-buffer methods with an explicit datatype, as
// callers with their own element types do.
func TestRankRaw(t *testing.T) {
	w := rankOnly(t)
	p, r := w.Size(), w.Rank()
	buf := make([]byte, 2*300)
	for i := 0; i < 300; i++ {
		v := uint16(uval(r, i))
		buf[2*i], buf[2*i+1] = byte(v), byte(v>>8) // little endian, as on every target
	}
	must(t, w.Allreduce(nil, buf, Uint16, Sum))
	for i := 0; i < 300; i++ {
		got := uint16(buf[2*i]) | uint16(buf[2*i+1])<<8
		if want := expect[uint16](Uint16, Sum, p, i); got != want {
			t.Fatalf("[%d] = %d, want %d", i, got, want)
		}
	}
	x := []byte{byte(r + 1), 0xf0}
	must(t, w.Allreduce(nil, x, Byte, BXor))
	var want byte
	for i := 0; i < p; i++ {
		want ^= byte(i + 1)
	}
	if x[0] != want || x[1] != map[bool]byte{true: 0, false: 0xf0}[p%2 == 0] {
		t.Errorf("bxor of bytes: %x", x)
	}
	if err := w.Allreduce(nil, make([]byte, 3), Uint16, Sum); !errors.Is(err, ErrArgument) {
		t.Errorf("odd byte count for uint16: %v", err)
	}
	if err := w.Bcast(make([]byte, 4), Datatype(0), 0); !errors.Is(err, ErrArgument) {
		t.Errorf("invalid datatype: %v", err)
	}
}
