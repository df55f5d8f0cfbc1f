package collectives

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// nbCalls issues one nonblocking call of every collective on c, with n
// elements per block (several segments of a 4 KiB slot from n = 600),
// interleaved with blocking calls, waits for them in reverse order and
// checks every result exactly.
func nbCalls(c *Comm, n int) error {
	p, r := c.Size(), c.Rank()
	var reqs []*Request
	var checks []func() error
	add := func(req *Request, check func() error) {
		reqs = append(reqs, req)
		checks = append(checks, check)
	}
	want := func(what string, got, exp []int64) error {
		if !slices.Equal(got, exp) {
			return fmt.Errorf("%s: got %v, want %v", what, head(got), head(exp))
		}
		return nil
	}
	// rank q's element i
	x := func(q, i int) int64 { return int64(q*1000 + i) }
	mine := make([]int64, n)
	for i := range mine {
		mine[i] = x(r, i)
	}
	sumTo := func(hi, i int) int64 { // x(0, i) + ... + x(hi-1, i)
		s := int64(0)
		for q := range hi {
			s += x(q, i)
		}
		return s
	}

	ar := make([]int64, n)
	add(IAllreduce(bg, c, mine, ar, Sum), func() error {
		exp := make([]int64, n)
		for i := range exp {
			exp[i] = sumTo(p, i)
		}
		return want("allreduce", ar, exp)
	})
	bc := make([]int64, n)
	if r == p-1 {
		copy(bc, mine)
	}
	add(IBcast(bg, c, bc, p-1), func() error {
		exp := make([]int64, n)
		for i := range exp {
			exp[i] = x(p-1, i)
		}
		return want("bcast", bc, exp)
	})
	ag := make([]int64, p*n)
	add(IAllgather(bg, c, mine, ag), func() error {
		exp := make([]int64, p*n)
		for q := range p {
			for i := range n {
				exp[q*n+i] = x(q, i)
			}
		}
		return want("allgather", ag, exp)
	})
	// A blocking call between them runs after them and before the rest.
	b := []int64{int64(r)}
	if err := Allreduce(bg, c, nil, b, Max); err != nil {
		return err
	}
	for i, req := range reqs {
		if ok, _ := req.Test(); !ok {
			return fmt.Errorf("nonblocking call %d not complete after a later blocking call", i)
		}
	}
	if b[0] != int64(p-1) {
		return fmt.Errorf("blocking allreduce: %d", b[0])
	}
	var rd []int64
	if r == 0 {
		rd = make([]int64, n)
	}
	add(IReduce(bg, c, mine, rd, Sum, 0), func() error {
		if r != 0 {
			return nil
		}
		exp := make([]int64, n)
		for i := range exp {
			exp[i] = sumTo(p, i)
		}
		return want("reduce", rd, exp)
	})
	sc, ex := make([]int64, n), make([]int64, n)
	for i := range ex {
		ex[i] = -7
	}
	add(IScan(bg, c, mine, sc, Sum), func() error {
		exp := make([]int64, n)
		for i := range exp {
			exp[i] = sumTo(r+1, i)
		}
		return want("scan", sc, exp)
	})
	add(IExscan(bg, c, mine, ex, Sum), func() error {
		exp := make([]int64, n)
		for i := range exp {
			exp[i] = sumTo(r, i)
			if r == 0 {
				exp[i] = -7
			}
		}
		return want("exscan", ex, exp)
	})
	a2aIn, a2a := make([]int64, p*n), make([]int64, p*n)
	for j := range p {
		for i := range n {
			a2aIn[j*n+i] = int64(r*100000 + j*1000 + i)
		}
	}
	add(IAlltoall(bg, c, a2aIn, a2a), func() error {
		exp := make([]int64, p*n)
		for q := range p {
			for i := range n {
				exp[q*n+i] = int64(q*100000 + r*1000 + i)
			}
		}
		return want("alltoall", a2a, exp)
	})
	add(IBarrier(bg, c), func() error { return nil })
	rsIn, rs := make([]int64, p*n), make([]int64, n)
	for i := range rsIn {
		rsIn[i] = int64(r + i)
	}
	add(IReduceScatterBlock(bg, c, rsIn, rs, Sum), func() error {
		exp := make([]int64, n)
		for i := range exp {
			exp[i] = int64(p*(r*n+i) + p*(p-1)/2)
		}
		return want("reduce_scatter_block", rs, exp)
	})
	counts := make([]int, p)
	total := 0
	for q := range p {
		counts[q] = (q*n)%7 + q
		total += counts[q]
	}
	rvIn, rv := make([]int64, total), make([]int64, counts[r])
	for i := range rvIn {
		rvIn[i] = int64(r * i)
	}
	add(IReduceScatter(bg, c, rvIn, rv, counts, Sum), func() error {
		lo := 0
		for q := range r {
			lo += counts[q]
		}
		exp := make([]int64, counts[r])
		for i := range exp {
			exp[i] = int64((lo + i) * p * (p - 1) / 2)
		}
		return want("reduce_scatter", rv, exp)
	})
	agvIn, agv := make([]int64, counts[r]), make([]int64, total)
	for i := range agvIn {
		agvIn[i] = x(r, i)
	}
	add(IAllgatherv(bg, c, agvIn, agv, counts, nil), func() error {
		exp := make([]int64, 0, total)
		for q := range p {
			for i := range counts[q] {
				exp = append(exp, x(q, i))
			}
		}
		return want("allgatherv", agv, exp)
	})
	var scIn, gaOut []int64
	if r == 1%p {
		scIn, gaOut = make([]int64, p*n), make([]int64, p*n)
		for i := range scIn {
			scIn[i] = int64(5 * i)
		}
	}
	scOut := make([]int64, n)
	add(IScatter(bg, c, scIn, scOut, 1%p), func() error {
		exp := make([]int64, n)
		for i := range exp {
			exp[i] = int64(5 * (r*n + i))
		}
		return want("scatter", scOut, exp)
	})
	add(IGather(bg, c, mine, gaOut, 1%p), func() error {
		if r != 1%p {
			return nil
		}
		exp := make([]int64, p*n)
		for q := range p {
			for i := range n {
				exp[q*n+i] = x(q, i)
			}
		}
		return want("gather", gaOut, exp)
	})
	// alltoallv: rank r sends r+j+1 elements to rank j.
	sc2, rc2 := make([]int, p), make([]int, p)
	st, rt := 0, 0
	for j := range p {
		sc2[j], rc2[j] = r+j+1, j+r+1
		st += sc2[j]
		rt += rc2[j]
	}
	avIn, av := make([]int64, st), make([]int64, rt)
	off := 0
	for j := range p {
		for i := range sc2[j] {
			avIn[off+i] = int64(r*100 + j*10 + i)
		}
		off += sc2[j]
	}
	add(IAlltoallv(bg, c, avIn, sc2, nil, av, rc2, nil), func() error {
		exp := make([]int64, 0, rt)
		for q := range p {
			for i := range rc2[q] {
				exp = append(exp, int64(q*100+r*10+i))
			}
		}
		return want("alltoallv", av, exp)
	})
	for i := len(reqs) - 1; i >= 0; i-- {
		if err := reqs[i].Wait(); err != nil {
			return err
		}
	}
	for _, check := range checks {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

func head(v []int64) []int64 {
	if len(v) > 8 {
		return v[:8]
	}
	return v
}

func TestNonblockingCalls(t *testing.T) {
	for _, p := range []int{1, 2, 3, 4} {
		for _, n := range []int{1, 7, 600} {
			t.Run(fmt.Sprintf("p=%d/n=%d", p, n), func(t *testing.T) {
				err := Run(p, Options{SlotBytes: 4096}, func(c *Comm) error {
					for range 2 {
						if err := nbCalls(c, n); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestNonblockingTest polls with Test until a call completes, with the
// ranks making the call at different times.
func TestNonblockingTest(t *testing.T) {
	err := Run(3, Options{}, func(c *Comm) error {
		if c.Rank() == 0 {
			time.Sleep(20 * time.Millisecond) // the others start first and poll
		}
		v := []float64{float64(c.Rank()) + 0.5}
		req := IAllreduce(bg, c, nil, v, Sum)
		for {
			done, err := req.Test()
			if err != nil {
				return err
			}
			if done {
				break
			}
			time.Sleep(time.Millisecond)
		}
		if v[0] != 4.5 {
			return fmt.Errorf("got %v", v[0])
		}
		if err := req.Wait(); err != nil { // again, after Test
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestNonblockingMismatch: a mismatch among nonblocking calls reaches Wait
// on every rank as the blocking form reports it, and the calls queued
// after it fail with ErrAborted.
func TestNonblockingMismatch(t *testing.T) {
	errs := runAll(t, 4, Options{}, func(c *Comm) error {
		n := 10
		if c.Rank() == 2 {
			n = 11
		}
		r1 := IAllreduce(bg, c, make([]float64, n), make([]float64, n), Sum)
		r2 := IBarrier(bg, c)
		if err := r2.Wait(); !errors.Is(err, ErrAborted) {
			return fmt.Errorf("the call after the mismatch: %v, want ErrAborted", err)
		}
		return r1.Wait()
	})
	text := sameAbort(t, "nonblocking", errs, ErrMismatch)
	if !strings.Contains(text, "count") {
		t.Errorf("abort %q does not name the count", text)
	}
}

// TestNonblockingCancel: a cancelled context of a nonblocking call fails
// it as it fails the blocking form (wrapping the context's error on the
// cancelling rank, ErrAborted everywhere).
func TestNonblockingCancel(t *testing.T) {
	errs := runAll(t, 4, Options{}, func(c *Comm) error {
		ctx := bg
		if c.Rank() == 2 {
			cctx, cancel := context.WithCancel(bg)
			cancel()
			ctx = cctx
		}
		ok := IBcast(bg, c, make([]int32, 10), 0)
		req := IAllreduce(ctx, c, make([]float64, 1000), make([]float64, 1000), Sum)
		// The call before runs first; it may fail on ranks that are still
		// in it when the cancelling rank aborts.
		if err := ok.Wait(); err != nil && !errors.Is(err, ErrAborted) {
			return fmt.Errorf("the call before the cancelled one: %v", err)
		}
		err := req.Wait()
		if c.Rank() == 2 && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("cancelling rank: %v, want context.Canceled", err)
		}
		var e *Error
		if !errors.As(err, &e) || e.Coll != CollAllreduce || e.Rank != c.Rank() {
			return fmt.Errorf("%v: not the allreduce's *Error", err)
		}
		return err
	})
	sameAbort(t, "cancel", errs, ErrAborted)
}

// TestNonblockingBlockingCancel: a blocking call waiting for a rank's
// outstanding nonblocking call returns when its context ends, aborting the
// communicator so that the outstanding call ends too.
func TestNonblockingBlockingCancel(t *testing.T) {
	started := make(chan struct{})
	errs := runAll(t, 3, Options{}, func(c *Comm) error {
		if c.Rank() != 0 {
			<-started // rank 0's allreduce waits for the others meanwhile
			return Barrier(bg, c)
		}
		req := IAllreduce(bg, c, make([]int64, 5), make([]int64, 5), Sum)
		ctx, cancel := context.WithTimeout(bg, 30*time.Millisecond)
		defer cancel()
		err := Barrier(ctx, c)
		close(started)
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrAborted) {
			return fmt.Errorf("barrier: %v, want DeadlineExceeded and ErrAborted", err)
		}
		if err := req.Wait(); !errors.Is(err, ErrAborted) {
			return fmt.Errorf("outstanding allreduce: %v, want ErrAborted", err)
		}
		return err
	})
	for r, err := range errs {
		if !errors.Is(err, ErrAborted) {
			t.Errorf("rank %d: %v, want ErrAborted", r, err)
		}
	}
}

// TestNonblockingPeerLeft: a rank that leaves while the others' requests
// wait for it fails them with ErrPeerDead, without a hang.
func TestNonblockingPeerLeft(t *testing.T) {
	cs, err := NewLocal(3, Options{Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var reqs [][]*Request
	for _, c := range cs[:2] {
		reqs = append(reqs, []*Request{
			IAllreduce(bg, c, make([]float64, 100), make([]float64, 100), Sum),
			IBcast(bg, c, make([]int8, 5), 0),
		})
	}
	cs[2].Close() // with nothing outstanding: it just leaves
	for r, rs := range reqs {
		for i, req := range rs {
			if err := req.Wait(); !errors.Is(err, ErrPeerDead) {
				t.Errorf("rank %d request %d: %v, want ErrPeerDead", r, i, err)
			}
		}
	}
	for _, c := range cs {
		c.Close()
	}
}

// TestNonblockingClose: Close with outstanding calls aborts the
// communicator (the running call fails with ErrAborted, the queued ones
// with ErrClosed), the other ranks fail instead of waiting, and I-calls
// after Close fail with ErrClosed.
func TestNonblockingClose(t *testing.T) {
	cs, err := NewLocal(2, Options{})
	if err != nil {
		t.Fatal(err)
	}
	reqs := []*Request{
		IAllreduce(bg, cs[0], make([]float64, 100), make([]float64, 100), Sum),
		IBarrier(bg, cs[0]),
		IBcast(bg, cs[0], make([]int8, 5), 0),
	}
	time.Sleep(10 * time.Millisecond) // the allreduce is running, waiting for rank 1
	if err := cs[0].Close(); err != nil {
		t.Fatal(err)
	}
	for i, req := range reqs {
		done, err := req.Test()
		if !done {
			t.Fatalf("request %d not complete after Close", i)
		}
		if !errors.Is(err, ErrAborted) && !errors.Is(err, ErrClosed) {
			t.Errorf("request %d: %v, want ErrAborted or ErrClosed", i, err)
		}
	}
	if err := reqs[2].Wait(); !errors.Is(err, ErrClosed) {
		t.Errorf("queued request: %v, want ErrClosed", err)
	}
	if err := Allreduce(bg, cs[1], make([]float64, 100), make([]float64, 100), Sum); !errors.Is(err, ErrAborted) {
		t.Errorf("the other rank: %v, want ErrAborted", err)
	}
	if err := IBarrier(bg, cs[0]).Wait(); !errors.Is(err, ErrClosed) {
		t.Errorf("I-call after Close: %v, want ErrClosed", err)
	}
	cs[1].Close()
}

// TestNonblockingInvalid: an invalid argument reaches Wait on the calling
// rank as ErrInvalidArgument, and fails the others' calls.
func TestNonblockingInvalid(t *testing.T) {
	errs := runAll(t, 3, Options{}, func(c *Comm) error {
		root := 0
		if c.Rank() == 1 {
			root = 9
		}
		return IBcast(bg, c, make([]int32, 4), root).Wait()
	})
	sameAbort(t, "bad root", errs, ErrAborted)
	if !errors.Is(errs[1], ErrInvalidArgument) {
		t.Errorf("rank 1: %v, want ErrInvalidArgument", errs[1])
	}
}
