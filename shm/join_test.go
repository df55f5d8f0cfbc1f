package shm

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

// joinOrder makes the endpoints of a fresh in-process arena of size ranks
// without joining them, so that a test can order the joins and the
// rendezvous steps of each rank.
func joinOrder(t *testing.T, size int) []*Endpoint {
	t.Helper()
	a, err := newLocalArena(size, Options{})
	if err != nil {
		t.Fatal(err)
	}
	eps := make([]*Endpoint, size)
	for r := range eps {
		eps[r] = newEndpoint(a.mem, a.lay, r, Options{}, true)
		eps[r].keep, eps[r].park = a, a.park
	}
	return eps
}

// TestJoinFailedForEveryRank: rank 0 gives up its join (its context ends)
// while rank 2 has not joined yet; rank 2 then completes the count. The
// join is failed for every rank, rank 2 included, and each returns an
// error that names rank 0's cause.
func TestJoinFailedForEveryRank(t *testing.T) {
	eps := joinOrder(t, 3)
	deadline := time.Now().Add(10 * time.Second)
	for _, e := range eps[:2] {
		if _, err := e.join(os.Getpid(), 0); err != nil {
			t.Fatal(err)
		}
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := eps[0].rendezvous(cancelled, deadline, nil, Options{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("rank 0: %v, want its context's end", err)
	}
	if _, err := eps[2].join(os.Getpid(), 0); err != nil {
		t.Fatal(err)
	}
	for _, r := range []int{2, 1} {
		err := eps[r].rendezvous(context.Background(), deadline, nil, Options{})
		if !errors.Is(err, ErrAborted) || !strings.Contains(err.Error(), "rank 0 joining: context canceled") {
			t.Errorf("rank %d: %v, want the join failed with rank 0's cause", r, err)
		}
	}
}

// TestJoinCompleteDespiteAbort: every rank has joined, and rank 0, whose
// join has returned, aborts the arena before the others look: their joins
// succeed all the same (the arena's calls then fail on the abort).
func TestJoinCompleteDespiteAbort(t *testing.T) {
	eps := joinOrder(t, 3)
	deadline := time.Now().Add(10 * time.Second)
	for _, e := range eps {
		if _, err := e.join(os.Getpid(), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := eps[0].rendezvous(context.Background(), deadline, nil, Options{}); err != nil {
		t.Fatalf("rank 0: %v", err)
	}
	eps[0].Abort(errors.New("rank 0 is done"))
	for _, r := range []int{1, 2} {
		if err := eps[r].rendezvous(context.Background(), deadline, nil, Options{}); err != nil {
			t.Errorf("rank %d: %v, want the complete join to succeed", r, err)
		}
		if err := eps[r].Err(); !errors.Is(err, ErrAborted) {
			t.Errorf("rank %d: Err %v, want the abort", r, err)
		}
	}
}
