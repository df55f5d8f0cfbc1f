package collectives

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/shmcoll/shmcoll/shm"
)

// sentinel fills the output buffers of the late-mismatch tests: a buffer
// that still holds it received nothing.
const sentinel = -7

func filled(n int, x int64) []int64 {
	v := make([]int64, n)
	for i := range v {
		v[i] = x
	}
	return v
}

// vecOf is rank r's vector of n elements in call it.
func vecOf(r, it, n int) []int64 {
	v := make([]int64, n)
	for i := range v {
		v[i] = int64(r*1_000_003 + it*7919 + i)
	}
	return v
}

// untouchedOr checks that each element of buf is the sentinel (received
// nothing) or want's (nil: nothing may arrive), never anything else: a
// mismatched rank's data. A call that failed may have received a part of
// want before the mismatch stopped it; one that succeeded has received
// all (whole).
func untouchedOr(buf, want []int64, whole bool) error {
	for i, x := range buf {
		ok := x == sentinel
		if want != nil && i < len(want) {
			ok = ok && !whole || x == want[i]
		}
		if !ok {
			return fmt.Errorf("output [%d] = %d, want the sentinel or the matching rank's %v...", i, x, want[:min(4, len(want))])
		}
	}
	return nil
}

// lateCases are rooted calls that do not match on every rank: rank odd
// (the last) passes another count or root. Each runs the call on c (the
// nonblocking form when nb) and returns its error and a check of the
// rank's output buffer.
var lateCases = []struct {
	name string
	call func(c *Comm, n, odd int, nb bool) (func(whole bool) error, error)
}{
	{"bcast count", func(c *Comm, n, odd int, nb bool) (func(whole bool) error, error) {
		r := c.Rank()
		m := n
		if r == odd {
			m = n + 1
		}
		buf := filled(m, sentinel)
		if r == 0 {
			copy(buf, vecOf(0, n, m))
		}
		err := runMaybeNB(nb, func() error { return Bcast(bg, c, buf, 0) }, func() *Request { return IBcast(bg, c, buf, 0) })
		return func(whole bool) error {
			if r == 0 {
				return untouchedOr(buf, vecOf(0, n, m), whole)
			}
			if r == odd {
				return untouchedOr(buf, nil, whole)
			}
			return untouchedOr(buf, vecOf(0, n, n), whole)
		}, err
	}},
	{"bcast root", func(c *Comm, n, odd int, nb bool) (func(whole bool) error, error) {
		r := c.Rank()
		root := 0
		if r == odd {
			root = odd
		}
		buf := filled(n, sentinel)
		if r == root {
			copy(buf, vecOf(r, n, n))
		}
		err := runMaybeNB(nb, func() error { return Bcast(bg, c, buf, root) }, func() *Request { return IBcast(bg, c, buf, root) })
		return func(whole bool) error {
			if r == root {
				return untouchedOr(buf, vecOf(r, n, n), whole)
			}
			return untouchedOr(buf, vecOf(0, n, n), whole)
		}, err
	}},
	{"reduce count", func(c *Comm, n, odd int, nb bool) (func(whole bool) error, error) {
		r := c.Rank()
		m := n
		if r == odd {
			m = n + 1
		}
		var out []int64
		if r == 0 {
			out = filled(n, sentinel)
		}
		in := vecOf(r, n, m)
		err := runMaybeNB(nb, func() error { return Reduce(bg, c, in, out, Sum, 0) }, func() *Request { return IReduce(bg, c, in, out, Sum, 0) })
		return func(whole bool) error { return untouchedOr(out, nil, whole) }, err
	}},
	{"reduce root", func(c *Comm, n, odd int, nb bool) (func(whole bool) error, error) {
		r := c.Rank()
		root := 0
		if r == odd {
			root = odd
		}
		var out []int64
		if r == root {
			out = filled(n, sentinel)
		}
		in := vecOf(r, n, n)
		err := runMaybeNB(nb, func() error { return Reduce(bg, c, in, out, Sum, root) }, func() *Request { return IReduce(bg, c, in, out, Sum, root) })
		return func(whole bool) error { return untouchedOr(out, nil, whole) }, err
	}},
	{"scatter count", func(c *Comm, n, odd int, nb bool) (func(whole bool) error, error) {
		r, p := c.Rank(), c.Size()
		m := n
		if r == odd {
			m = n + 1
		}
		var send []int64
		if r == 0 {
			send = vecOf(0, n, n*p)
		}
		out := filled(m, sentinel)
		err := runMaybeNB(nb, func() error { return Scatter(bg, c, send, out, 0) }, func() *Request { return IScatter(bg, c, send, out, 0) })
		return func(whole bool) error {
			if r == odd {
				return untouchedOr(out, nil, whole)
			}
			return untouchedOr(out, vecOf(0, n, n*p)[r*n:(r+1)*n], whole)
		}, err
	}},
	{"reduce_scatter counts", func(c *Comm, n, odd int, nb bool) (func(whole bool) error, error) {
		// Only the last rank (odd) receives, so the others return early;
		// odd's counts give it one element more, which makes it take
		// another algorithm where that copies its own input into its
		// output first: odd's output holds its own elements or the
		// sentinel, never another rank's.
		r, p := c.Rank(), c.Size()
		counts := make([]int, p)
		counts[p-1] = n
		if r == odd {
			counts[p-1] = n + 1
		}
		in := vecOf(r, n, counts[p-1])
		out := filled(counts[r], sentinel)
		err := runMaybeNB(nb, func() error { return ReduceScatter(bg, c, in, out, counts, Sum) },
			func() *Request { return IReduceScatter(bg, c, in, out, counts, Sum) })
		return func(whole bool) error { return untouchedOr(out, in, false) }, err
	}},
	{"gather count", func(c *Comm, n, odd int, nb bool) (func(whole bool) error, error) {
		return lateGather(c, n, odd, nb, false)
	}},
	{"gather root", func(c *Comm, n, odd int, nb bool) (func(whole bool) error, error) {
		return lateGather(c, n, odd, nb, true)
	}},
}

// lateGather is the gather of lateCases: rank odd passes n+1 elements
// (root false) or names itself the root (root true). A root's block q
// holds the sentinel or rank q's vector, and only from a rank whose call
// matches the root's: rank 0's root receives nothing from rank odd, and
// rank odd as root nothing but its own block.
func lateGather(c *Comm, n, odd int, nb, root bool) (func(whole bool) error, error) {
	r, p := c.Rank(), c.Size()
	m, at := n, 0
	if r == odd && root {
		at = odd
	} else if r == odd {
		m = n + 1
	}
	var out []int64
	if r == at {
		out = filled(n*p, sentinel)
	}
	in := vecOf(r, n, m)
	err := runMaybeNB(nb, func() error { return Gather(bg, c, in, out, at) }, func() *Request { return IGather(bg, c, in, out, at) })
	return func(whole bool) error {
		for q := range len(out) / n {
			var want []int64
			if q == r || at == 0 && q != odd {
				want = vecOf(q, n, n)
			}
			if err := untouchedOr(out[q*n:(q+1)*n], want, whole); err != nil {
				return fmt.Errorf("block %d: %w", q, err)
			}
		}
		return nil
	}, err
}

// runMaybeNB runs the blocking call, or the nonblocking one and waits for
// it.
func runMaybeNB(nb bool, blocking func() error, start func() *Request) error {
	if nb {
		return start().Wait()
	}
	return blocking()
}

// lateSizes are the elements of the late-mismatch calls: in the counter's
// line, in the slot on the small-call path, at the small-call path's
// limit (the mismatched rank one element over it) and on the general
// path, cut into segments by the slot of lateOptions.
var lateSizes = []int{1, 5, 100, smallRootedBytes / 8, 3000}

var lateOptions = Options{SlotBytes: 16 << 10}

// lateFollow are the ways a rank meets the late report: its next call,
// its Close, the Wait of its next nonblocking call, or the Wait of the
// mismatched call itself made nonblocking.
var lateFollow = []string{"next call", "close", "next wait", "own wait"}

// TestEarlyLateMismatch: a rooted call that does not match on every rank,
// in which ranks return early (the bcast and scatter root, the reduce and
// gather non-roots), fails on every rank with the same ErrMismatch, at the
// latest at the rank's next call, Close or Wait, and no rank's output
// receives data from a rank whose call differs from its own. In a loop,
// over ranks, sizes and cases, to catch races between the early return
// and the check.
func TestEarlyLateMismatch(t *testing.T) {
	iters := 3000
	if testing.Short() {
		iters = 300
	}
	for it := range iters {
		tc := lateCases[it%len(lateCases)]
		n := lateSizes[(it/len(lateCases))%len(lateSizes)]
		follow := lateFollow[(it/(len(lateCases)*len(lateSizes)))%len(lateFollow)]
		p := 2 + it%3
		if it%17 == 0 {
			p = 8
		}
		odd := p - 1
		what := fmt.Sprintf("iteration %d: %s, %d elements, p=%d, reported at %s", it, tc.name, n, p, follow)
		checks := make([]error, p)
		errs := runAll(t, p, lateOptions, func(c *Comm) error {
			check, err := tc.call(c, n, odd, follow == "own wait")
			// The outputs as the call returned them, failed or not: no
			// peer may access them any more.
			checks[c.Rank()] = check(err == nil)
			if err == nil {
				switch follow {
				case "next call", "own wait":
					err = Barrier(bg, c)
				case "close":
					err = c.Close()
				case "next wait":
					err = IBarrier(bg, c).Wait()
				}
			}
			return err
		})
		sameAbort(t, what, errs, ErrMismatch)
		for r, err := range checks {
			if err != nil {
				t.Errorf("%s: rank %d: %v", what, r, err)
			}
		}
		if t.Failed() {
			return
		}
	}
}

// rootedSeq runs calls back-to-back with roots and collectives that
// change from call to call, and checks every result exactly: a rank that
// returned early must not rewrite arena data that a slower rank still
// reads. Bcast and reduce on the small-call path (in the counter's line
// and in the slot) and on the general path, scatter and gather, and now
// and then an allreduce, whose ranks all wait for each other.
func rootedSeq(c *Comm, calls int) error {
	p, r := c.Size(), c.Rank()
	sizes := []int{1, 5, 6, 100, 1024, 1025, 3000}
	for it := range calls {
		n := sizes[it%len(sizes)]
		root := (it*5 + it/3) % p
		switch it % 7 {
		case 0, 2, 4:
			buf := filled(n, sentinel)
			if r == root {
				copy(buf, vecOf(root, it, n))
			}
			if err := Bcast(bg, c, buf, root); err != nil {
				return err
			}
			if !slices.Equal(buf, vecOf(root, it, n)) {
				return fmt.Errorf("rank %d call %d: bcast of %d from %d: got %v...", r, it, n, root, buf[:min(4, n)])
			}
		case 1, 3, 5:
			var out []int64
			if r == root {
				out = filled(n, sentinel)
			}
			if err := Reduce(bg, c, vecOf(r, it, n), out, Sum, root); err != nil {
				return err
			}
			if r == root {
				for i, x := range out {
					want := int64(0)
					for q := range p {
						want += vecOf(q, it, n)[i]
					}
					if x != want {
						return fmt.Errorf("rank %d call %d: reduce of %d to %d: [%d] = %d, want %d", r, it, n, root, i, x, want)
					}
				}
			}
		case 6:
			m := n%64 + 1
			var all []int64
			if r == root {
				all = vecOf(root, it, m*p)
			}
			part := filled(m, sentinel)
			if err := Scatter(bg, c, all, part, root); err != nil {
				return err
			}
			if !slices.Equal(part, vecOf(root, it, m*p)[r*m:(r+1)*m]) {
				return fmt.Errorf("rank %d call %d: scatter from %d: got %v", r, it, root, part)
			}
			var back []int64
			if r == root {
				back = filled(m*p, sentinel)
			}
			if err := Gather(bg, c, part, back, root); err != nil {
				return err
			}
			if r == root && !slices.Equal(back, vecOf(root, it, m*p)) {
				return fmt.Errorf("rank %d call %d: gather to %d: got %v", r, it, root, back)
			}
			if it%3 == 0 {
				v := []int64{int64(r)}
				if err := Allreduce(bg, c, nil, v, Sum); err != nil {
					return err
				}
				if v[0] != int64(p*(p-1)/2) {
					return fmt.Errorf("rank %d call %d: allreduce %d", r, it, v[0])
				}
			}
		}
	}
	return nil
}

// TestEarlyAlternatingRoots: many rooted calls back-to-back with changing
// roots give exact results on goroutine ranks.
func TestEarlyAlternatingRoots(t *testing.T) {
	calls := 2000
	if testing.Short() {
		calls = 300
	}
	for _, p := range []int{2, 3, 5, 8} {
		t.Run(fmt.Sprint("p=", p), func(t *testing.T) {
			if err := Run(p, lateOptions, func(c *Comm) error { return rootedSeq(c, calls) }); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestEarlyReturns: the root of a small bcast, the non-roots of a small
// reduce and a reduce-scatter rank whose block is empty return before the
// others have made the call: rank 0 makes each call, and the others make
// it only after rank 0 has returned from it, which would not end if rank
// 0 waited for them.
func TestEarlyReturns(t *testing.T) {
	const p = 3
	bcastDone, reduceDone, rsDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	// The reduce-scatter: rank 2 receives 3 elements, rank 1 one, rank 0
	// none; in the counter's line and in the slots.
	for _, n := range []int{3, 3000} {
		counts := []int{0, 1, n}
		err := Run(p, Options{}, func(c *Comm) error {
			r := c.Rank()
			in := vecOf(r, n, n+1)
			out := filled(counts[r], sentinel)
			if r == 0 {
				if err := ReduceScatter(bg, c, in, out, counts, Sum); err != nil {
					return err
				}
				close(rsDone)
				return Barrier(bg, c) // the late check
			}
			<-rsDone
			if err := ReduceScatter(bg, c, in, out, counts, Sum); err != nil {
				return err
			}
			lo := counts[0] + counts[1]*(r-1)
			for i, x := range out {
				if want := vecOf(0, n, n+1)[lo+i] + vecOf(1, n, n+1)[lo+i] + vecOf(2, n, n+1)[lo+i]; x != want {
					return fmt.Errorf("rank %d: reduce_scatter [%d] = %d, want %d", r, i, x, want)
				}
			}
			return Barrier(bg, c)
		})
		if err != nil {
			t.Fatalf("reduce_scatter of %d+1 elements: %v", n, err)
		}
		rsDone = make(chan struct{})
	}
	err := Run(p, Options{}, func(c *Comm) error {
		buf := filled(4, sentinel)
		if c.Rank() == 0 {
			copy(buf, vecOf(0, 1, 4))
			if err := Bcast(bg, c, buf, 0); err != nil {
				return err
			}
			close(bcastDone)
			if err := Reduce(bg, c, vecOf(0, 2, 4), nil, Sum, 1); err != nil {
				return err
			}
			close(reduceDone)
			return nil
		}
		<-bcastDone
		if err := Bcast(bg, c, buf, 0); err != nil {
			return err
		}
		if !slices.Equal(buf, vecOf(0, 1, 4)) {
			return fmt.Errorf("rank %d: bcast got %v", c.Rank(), buf)
		}
		<-reduceDone
		var out []int64
		if c.Rank() == 1 {
			out = make([]int64, 4)
		}
		if err := Reduce(bg, c, vecOf(c.Rank(), 2, 4), out, Sum, 1); err != nil {
			return err
		}
		if c.Rank() == 1 {
			for i, x := range out {
				if want := vecOf(0, 2, 4)[i] + vecOf(1, 2, 4)[i] + vecOf(2, 2, 4)[i]; x != want {
					return fmt.Errorf("reduce [%d] = %d, want %d", i, x, want)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestEarlyProcesses runs the rooted sequence and the late mismatch among
// processes.
func TestEarlyProcesses(t *testing.T) {
	if os.Getenv(shm.EnvArena) != "" {
		t.Skip("in a child")
	}
	for _, p := range []int{2, 3} {
		t.Run(fmt.Sprint("p=", p), func(t *testing.T) {
			runRanks(t, "TestEarlyChild", p, func(int) []string { return nil })
		})
	}
}

// TestEarlyChild is one rank of TestEarlyProcesses, or of
// TestEarlyPeerDeath with SHMCOLL_TEST_EARLY_DIE set.
func TestEarlyChild(t *testing.T) {
	if os.Getenv(shm.EnvArena) == "" {
		t.Skip("run by TestEarlyProcesses")
	}
	opt := lateOptions
	opt.Timeout = 200 * time.Millisecond
	c, err := JoinEnv(bg, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if os.Getenv("SHMCOLL_TEST_EARLY_DIE") != "" {
		earlyDie(t, c)
		return
	}
	calls := 700
	if testing.Short() {
		calls = 140
	}
	if err := rootedSeq(c, calls); err != nil {
		t.Fatal(err)
	}
	// The late mismatch, each case on a Dup that it aborts.
	p, odd := c.Size(), c.Size()-1
	rounds := 40
	if testing.Short() {
		rounds = 10
	}
	for it := range rounds * len(lateCases) {
		tc := lateCases[it%len(lateCases)]
		n := lateSizes[(it/len(lateCases))%len(lateSizes)]
		follow := lateFollow[(it/len(lateCases))%len(lateFollow)]
		d, err := c.Dup(bg)
		if err != nil {
			t.Fatal(err)
		}
		check, err := tc.call(d, n, odd, follow == "own wait")
		whole := err == nil
		if err == nil {
			switch follow {
			case "next call", "own wait":
				err = Barrier(bg, d)
			case "close":
				err = d.Close()
			case "next wait":
				err = IBarrier(bg, d).Wait()
			}
		}
		if !errors.Is(err, ErrMismatch) || !errors.Is(err, ErrAborted) {
			t.Fatalf("%s, %d elements, p=%d, at %s: rank %d: %v, want a mismatch", tc.name, n, p, follow, c.Rank(), err)
		}
		if err := check(whole); err != nil {
			t.Fatalf("%s, %d elements, p=%d: rank %d: %v", tc.name, n, p, c.Rank(), err)
		}
		d.Close()
	}
}

// earlyDie: the root of a bcast returns early; the last rank dies before
// it makes the call. The root's Close, and the middle ranks' next call,
// fail with ErrPeerDead instead of waiting. A middle rank that enters the
// bcast only after the root's Close found the death and aborted the arena
// fails in the bcast itself, with ErrPeerDead too.
func earlyDie(t *testing.T, c *Comm) {
	if err := Barrier(bg, c); err != nil {
		t.Fatal(err)
	}
	r, last := c.Rank(), c.Size()-1
	if r == last {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	buf := vecOf(0, 0, 4)
	if err := Bcast(bg, c, buf, 0); err != nil {
		if r != 0 && errors.Is(err, ErrPeerDead) {
			return
		}
		t.Fatalf("rank %d: bcast: %v", r, err)
	}
	if r == 0 {
		if err := c.Close(); !errors.Is(err, ErrPeerDead) {
			t.Errorf("root's Close after the early return: %v, want ErrPeerDead", err)
		}
		return
	}
	if err := Barrier(bg, c); !errors.Is(err, ErrPeerDead) {
		t.Errorf("rank %d: the call after the early return: %v, want ErrPeerDead", r, err)
	}
}

// TestEarlyPeerDeath: a peer that dies after the root returned early
// fails the root's Close and the other ranks' next call, without a hang.
func TestEarlyPeerDeath(t *testing.T) {
	if os.Getenv(shm.EnvArena) != "" {
		t.Skip("in a child")
	}
	runRanksKilled(t, "TestEarlyChild", 3, 2, func(int) []string { return []string{"SHMCOLL_TEST_EARLY_DIE=1"} })
}
