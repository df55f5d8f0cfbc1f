package shm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"
)

// runRanks runs f for every endpoint in its own goroutine and returns the
// errors by rank.
func runRanks(eps []*Endpoint, f func(e *Endpoint) error) []error {
	errs := make([]error, len(eps))
	var wg sync.WaitGroup
	for i, e := range eps {
		wg.Go(func() {
			// A failing rank aborts, so that the others do not wait for it.
			if errs[i] = f(e); errs[i] != nil {
				e.Abort(errs[i])
			}
		})
	}
	wg.Wait()
	return errs
}

func closeAll(t *testing.T, eps []*Endpoint) {
	t.Helper()
	for _, e := range eps {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
		if err := e.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	}
}

// ringExchange: in each round every rank writes round-stamped data into its
// slot and inline bytes, posts, waits for its left neighbour and checks the
// neighbour's data, then acknowledges so that the neighbour may overwrite.
func ringExchange(e *Endpoint, rounds int, words int) error {
	ctx := context.Background()
	p, r := e.Size(), e.Rank()
	left, right := (r+p-1)%p, (r+1)%p
	own := e.Slot(r)
	const data, ack = 0, 1
	for k := 1; k <= rounds; k++ {
		// Our slot may be overwritten once the right neighbour acknowledged
		// the previous round.
		if err := e.Wait(ctx, right, ack, uint64(k-1)); err != nil {
			return err
		}
		for i := range words {
			binary.LittleEndian.PutUint64(own[8*i:], uint64(r)<<40|uint64(k)<<20|uint64(i))
		}
		binary.LittleEndian.PutUint64(e.Inline(r, data), uint64(k*1000+r))
		e.Post(data, uint64(k))
		if err := e.Wait(ctx, left, data, uint64(k)); err != nil {
			return err
		}
		in := e.Slot(left)
		for i := range words {
			want := uint64(left)<<40 | uint64(k)<<20 | uint64(i)
			if got := binary.LittleEndian.Uint64(in[8*i:]); got != want {
				return fmt.Errorf("rank %d round %d word %d: got %#x want %#x", r, k, i, got, want)
			}
		}
		if got := binary.LittleEndian.Uint64(e.Inline(left, data)); got != uint64(k*1000+left) {
			return fmt.Errorf("rank %d round %d inline: got %d", r, k, got)
		}
		e.Post(ack, uint64(k))
	}
	return nil
}

func TestLocalRing(t *testing.T) {
	for _, p := range []int{1, 2, 3, 8, 16} {
		t.Run(fmt.Sprint("ranks=", p), func(t *testing.T) {
			eps, err := NewLocal(p, Options{SlotBytes: 1 << 14})
			if err != nil {
				t.Fatal(err)
			}
			defer closeAll(t, eps)
			rounds := 300
			if testing.Short() {
				rounds = 50
			}
			for i, err := range runRanks(eps, func(e *Endpoint) error { return ringExchange(e, rounds, 512) }) {
				if err != nil {
					t.Errorf("rank %d: %v", i, err)
				}
			}
			for _, e := range eps {
				if e.Size() != p || !e.InProcess() || e.SlotBytes() != 1<<14 || len(e.Slot(0)) != 1<<14 {
					t.Fatalf("endpoint %d: size %d slot %d", e.Rank(), e.Size(), e.SlotBytes())
				}
			}
		})
	}
}

func TestJoinLocal(t *testing.T) {
	const p = 4
	eps := make([]*Endpoint, p)
	errs := make([]error, p)
	var wg sync.WaitGroup
	for r := range p {
		wg.Go(func() {
			eps[r], errs[r] = JoinLocal(context.Background(), t.Name(), r, p, Options{SlotBytes: 4096})
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	defer closeAll(t, eps)
	for r, err := range runRanks(eps, func(e *Endpoint) error { return ringExchange(e, 20, 64) }) {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	// The key is free again once the arena is complete.
	e, err := JoinLocal(context.Background(), t.Name(), 0, 1, Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
}

func TestJoinLocalErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := JoinLocal(ctx, "", 0, 2, Options{}); !errors.Is(err, ErrBadName) {
		t.Errorf("empty key: %v", err)
	}
	if _, err := JoinLocal(ctx, "k", 2, 2, Options{}); !errors.Is(err, ErrBadSize) {
		t.Errorf("rank 2 of 2: %v", err)
	}
	if _, err := NewLocal(0, Options{}); !errors.Is(err, ErrBadSize) {
		t.Errorf("0 ranks: %v", err)
	}
	if _, err := NewLocal(2, Options{SlotBytes: -1}); !errors.Is(err, ErrBadSize) {
		t.Errorf("negative slot: %v", err)
	}
	// A rank that never comes: the join times out, naming the missing rank.
	_, err := JoinLocal(ctx, t.Name()+"timeout", 0, 2, Options{JoinTimeout: 50 * time.Millisecond})
	if !errors.Is(err, ErrJoinTimeout) || !strings.Contains(err.Error(), "missing [1]") {
		t.Errorf("timeout: %v", err)
	}
	// Mismatched slot sizes.
	done := make(chan error, 1)
	go func() {
		_, err := JoinLocal(ctx, t.Name()+"mismatch", 0, 2, Options{SlotBytes: 4096, JoinTimeout: 200 * time.Millisecond})
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	if _, err := JoinLocal(ctx, t.Name()+"mismatch", 1, 2, Options{SlotBytes: 8192}); !errors.Is(err, ErrBadHeader) {
		t.Errorf("mismatch: %v", err)
	}
	<-done
	// The same rank twice.
	key := t.Name() + "dup"
	first := make(chan error, 1)
	go func() {
		e, err := JoinLocal(ctx, key, 0, 2, Options{SlotBytes: 4096})
		if err == nil {
			defer e.Close()
		}
		first <- err
	}()
	for {
		localMu.Lock()
		a := localReg[key]
		localMu.Unlock()
		if a != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := JoinLocal(ctx, key, 0, 2, Options{SlotBytes: 4096}); !errors.Is(err, ErrRankTaken) {
		t.Errorf("duplicate rank: %v", err)
	}
	e1, err := JoinLocal(ctx, key, 1, 2, Options{SlotBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	e1.Close()
	// Cancelled context.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := JoinLocal(cctx, t.Name()+"cancel", 0, 2, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestLocalAbort(t *testing.T) {
	eps, err := NewLocal(4, Options{SlotBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(t, eps)
	cause := errors.New("operator panicked")
	errs := runRanks(eps, func(e *Endpoint) error {
		if e.Rank() == 2 {
			time.Sleep(30 * time.Millisecond) // let the others sleep in the futex
			e.Abort(cause)
			e.Abort(errors.New("second abort is ignored"))
		}
		// Wait for something that never comes.
		return e.Wait(context.Background(), (e.Rank()+1)%4, 3, 1)
	})
	for r, err := range errs {
		var ae *AbortError
		if !errors.Is(err, ErrAborted) || !errors.As(err, &ae) || ae.Rank != 2 || ae.Cause != cause.Error() || errors.Is(err, ErrPeerDead) {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	// Later waits fail too, even satisfied ones.
	eps[0].Post(0, 5)
	if err := eps[1].Wait(context.Background(), 0, 0, 5); !errors.Is(err, ErrAborted) {
		t.Errorf("later wait: %v", err)
	}
	if err := eps[3].Err(); err == nil || err.Error() != "shm: arena aborted by rank 2: operator panicked" {
		t.Errorf("Err: %v", err)
	}
}

func TestLocalPeerLeft(t *testing.T) {
	eps, err := NewLocal(3, Options{SlotBytes: 4096, Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(t, eps)
	eps[1].Post(0, 7)
	eps[1].Close()
	// A wait already satisfied by the departed rank still succeeds...
	if err := eps[0].Wait(context.Background(), 1, 0, 7); err != nil {
		t.Fatal(err)
	}
	// ...one that it can never satisfy fails, naming it, and aborts all.
	err = eps[0].Wait(context.Background(), 1, 0, 8)
	var ae *AbortError
	if !errors.Is(err, ErrPeerDead) || !errors.As(err, &ae) || ae.Peer != 1 || ae.Rank != 0 {
		t.Fatalf("got %v", err)
	}
	if err := eps[2].Wait(context.Background(), 0, 0, 1); !errors.Is(err, ErrPeerDead) {
		t.Fatalf("rank 2: %v", err)
	}
	if err := eps[1].Wait(context.Background(), 0, 0, 1); err != ErrClosed {
		t.Fatalf("closed endpoint: %v", err)
	}
}

func TestLocalContext(t *testing.T) {
	eps, err := NewLocal(2, Options{SlotBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(t, eps)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if err := eps[0].Wait(ctx, 1, 0, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
	if err := eps[0].Err(); err != nil {
		t.Fatalf("a cancelled wait must not abort: %v", err)
	}
}

// TestPostDecreaseAborts: a counter never decreases; a Post below the
// current value aborts the arena and leaves the counter as it was.
func TestPostDecreaseAborts(t *testing.T) {
	eps, err := NewLocal(1, Options{SlotBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(t, eps)
	eps[0].Post(1, 10)
	eps[0].Post(1, 9)
	if got := eps[0].Load(0, 1); got != 10 {
		t.Fatalf("counter %d, want 10", got)
	}
	if err := eps[0].Err(); !errors.Is(err, ErrAborted) {
		t.Fatalf("Err() = %v, want ErrAborted", err)
	}
}

func TestDescriptorInlineBounds(t *testing.T) {
	eps, err := NewLocal(2, Options{SlotBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(t, eps)
	e := eps[0]
	if len(e.Descriptor(1)) != DescriptorBytes || cap(e.Descriptor(1)) != DescriptorBytes {
		t.Fatal("descriptor size")
	}
	if len(e.Inline(1, NumCounters-1)) != InlineBytes {
		t.Fatal("inline size")
	}
	// Writing every inline area and descriptor must not disturb counters.
	for r := range 2 {
		for c := range NumCounters {
			for i := range e.Inline(r, c) {
				e.Inline(r, c)[i] = 0xff
			}
		}
		for i := range e.Descriptor(r) {
			e.Descriptor(r)[i] = 0xee
		}
	}
	for r := range 2 {
		for c := range NumCounters {
			if e.Load(r, c) != 0 {
				t.Fatalf("counter %d/%d disturbed", r, c)
			}
		}
		// The hint word starts at 0, outside the descriptor, in a line
		// of its own, and another rank's endpoint sees its stores.
		if e.Hint(r).Load() != 0 {
			t.Fatalf("rank %d's hint disturbed", r)
		}
		h := uintptr(unsafe.Pointer(e.Hint(r)))
		d := uintptr(unsafe.Pointer(&e.Descriptor(r)[0]))
		if h%64 != 0 || h >= d && h < d+DescriptorBytes {
			t.Fatalf("rank %d's hint at descriptor%+d", r, int(h-d))
		}
		e.Hint(r).Store(uint64(r + 7))
		if eps[1].Hint(r).Load() != uint64(r+7) {
			t.Fatalf("rank %d's hint not shared", r)
		}
		for c := range NumCounters {
			if e.Load(r, c) != 0 {
				t.Fatalf("hint store disturbed counter %d/%d", r, c)
			}
		}
	}
	closed, err := NewLocal(1, Options{SlotBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	closed[0].Close()
	for _, c := range []struct {
		f    func()
		want string
	}{
		{func() { e.Slot(2) }, "shm: rank 2 out of range (2 ranks)"},
		{func() { e.Slot(-1) }, "shm: rank -1 out of range (2 ranks)"},
		{func() { e.Inline(0, NumCounters) }, "shm: counter 8 of rank 0 out of range (2 ranks, 8 counters)"},
		{func() { e.Descriptor(2) }, "shm: rank 2 out of range (2 ranks)"},
		{func() { e.Hint(-1) }, "shm: rank -1 out of range (2 ranks)"},
		{func() { e.Post(-1, 1) }, "shm: counter -1 of rank 0 out of range (2 ranks, 8 counters)"},
		{func() { e.Load(2, 0) }, "shm: counter 0 of rank 2 out of range (2 ranks, 8 counters)"},
		{func() { closed[0].Load(0, 0) }, "shm: use of a closed endpoint"},
	} {
		func() {
			defer func() {
				r := recover()
				if r == nil {
					t.Errorf("no panic, want %q", c.want)
				} else if err, ok := r.(error); !ok || err.Error() != c.want {
					t.Errorf("panic %v, want %q", r, c.want)
				}
			}()
			c.f()
		}()
	}
}

// TestHotPathAllocs: Post and a satisfied Wait allocate nothing.
func TestHotPathAllocs(t *testing.T) {
	eps, err := NewLocal(2, Options{SlotBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(t, eps)
	ctx := context.Background()
	k := uint64(0)
	allocs := testing.AllocsPerRun(1000, func() {
		k++
		eps[0].Post(0, k)
		if err := eps[1].Wait(ctx, 0, 0, k); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per post and wait", allocs)
	}
}

func BenchmarkPostWaitSatisfied(b *testing.B) {
	eps, err := NewLocal(2, Options{SlotBytes: 4096})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	k := uint64(0)
	for b.Loop() {
		k++
		eps[0].Post(0, k)
		if err := eps[1].Wait(ctx, 0, 0, k); err != nil {
			b.Fatal(err)
		}
	}
}

func TestTimeoutOption(t *testing.T) {
	for env, want := range map[string]time.Duration{"": 2 * time.Second, "750ms": 750 * time.Millisecond, "3": 3 * time.Second, "0.5": 500 * time.Millisecond, "junk": 2 * time.Second, "-1s": 2 * time.Second} {
		t.Setenv("SHMCOLL_TIMEOUT", env)
		if got := (Options{}).timeout(); got != want {
			t.Errorf("SHMCOLL_TIMEOUT=%q: %v, want %v", env, got, want)
		}
	}
	t.Setenv("SHMCOLL_TIMEOUT", "5s")
	if got := (Options{Timeout: time.Second}).timeout(); got != time.Second {
		t.Errorf("explicit Timeout: %v", got)
	}
	if got := (Options{Timeout: time.Second}).joinTimeout(); got != 20*time.Second {
		t.Errorf("join timeout: %v", got)
	}
	if got := (Options{Timeout: 3 * time.Second}).joinTimeout(); got != 30*time.Second {
		t.Errorf("join timeout: %v", got)
	}
}

func TestUseAfterClose(t *testing.T) {
	eps, err := NewLocal(2, Options{SlotBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	closeAll(t, eps)
	if err := eps[0].Err(); err != ErrClosed {
		t.Errorf("Err: %v", err)
	}
	if err := eps[0].Wait(context.Background(), 1, 0, 1); err != ErrClosed {
		t.Errorf("Wait: %v", err)
	}
	eps[0].Abort(nil) // no effect, no crash
	defer func() {
		if recover() == nil {
			t.Error("Post after Close did not panic")
		}
	}()
	eps[0].Post(0, 1)
}

// TestLocalNoLostWakeup: futex-only waiting among goroutines, several
// waiters per counter, sleeps bounded by 10s: none times out.
func TestLocalNoLostWakeup(t *testing.T) {
	const p = 4
	rounds := 2000
	if testing.Short() {
		rounds = 200
	}
	eps, err := NewLocal(p, Options{SlotBytes: 4096, SpinFor: -1, YieldFor: -1, sleepFor: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(t, eps)
	// Rank 0 posts round k; the others wait for it (all on one counter),
	// then post their answer, which rank 0 waits for.
	errs := runRanks(eps, func(e *Endpoint) error {
		ctx := context.Background()
		for k := uint64(1); k <= uint64(rounds); k++ {
			if e.Rank() == 0 {
				e.Post(0, k)
				for q := 1; q < p; q++ {
					if err := e.Wait(ctx, q, 0, k); err != nil {
						return err
					}
				}
			} else {
				if err := e.Wait(ctx, 0, 0, k); err != nil {
					return err
				}
				e.Post(0, k)
			}
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
		if n := eps[r].sleepTimeouts.Load(); n != 0 {
			t.Errorf("rank %d: %d sleeps timed out", r, n)
		}
	}
}

// TestPeerLeftAfterPosting: a peer that posted the awaited value and then
// left is not a failure, even when its leaving is seen before the value
// (the waiter loaded the counter just before the post, then checked
// liveness): checkPeer reloads the counter before it aborts.
func TestPeerLeftAfterPosting(t *testing.T) {
	eps, err := NewLocal(2, Options{SlotBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer eps[0].Close()
	eps[1].Post(0, 7)
	w := eps[0].counter(1, 0)
	if err := eps[1].Close(); err != nil {
		t.Fatal(err)
	}
	if err := eps[0].checkPeer(1, w, 7); err != nil {
		t.Fatalf("satisfied wait on a peer that left: %v", err)
	}
	if err := eps[0].Err(); err != nil {
		t.Fatalf("arena aborted: %v", err)
	}
	if err := eps[0].checkPeer(1, w, 8); !errors.Is(err, ErrAborted) {
		t.Fatalf("unsatisfied wait on a peer that left: %v, want ErrAborted", err)
	}
}

// TestCorruptArenaWords: words that only their owner writes, written by
// someone else, give errors on every rank, never a crash.
func TestCorruptArenaWords(t *testing.T) {
	eps, err := NewLocal(2, Options{SlotBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer eps[0].Close()
	defer eps[1].Close()
	// Rank 1's counter raised behind its back: its next Post aborts.
	eps[0].counter(1, 3).Store(1000)
	eps[1].Post(3, 5)
	for _, e := range eps {
		if err := e.Err(); !errors.Is(err, ErrAborted) || !strings.Contains(err.Error(), "written by someone else") {
			t.Fatalf("rank %d: %v, want an abort naming the corruption", e.Rank(), err)
		}
	}
	// An abort word naming no rank (here one that would be negative as an
	// int) is reported, not followed outside the mapping.
	eps[0].abortWord().Store(1 << 63)
	for _, e := range eps {
		if err := e.Err(); !errors.Is(err, ErrAborted) || !strings.Contains(err.Error(), "corrupt abort word") {
			t.Fatalf("rank %d: %v, want corrupt abort word", e.Rank(), err)
		}
		if err := e.Wait(context.Background(), 1-e.Rank(), 0, 1); !errors.Is(err, ErrAborted) {
			t.Fatalf("rank %d: wait: %v, want ErrAborted", e.Rank(), err)
		}
	}
}
