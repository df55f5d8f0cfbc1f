//go:build linux

package shm

import (
	"context"
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// parentJoinTimeout is long enough that a join ending on it, instead of on
// the parent's news, fails the tests below.
const parentJoinTimeout = 15 * time.Second

// TestJoinParentKilled: a rank of the parent arena is killed before it
// joins the new arena; the join of the other fails with ErrPeerDead naming
// it (not ErrJoinTimeout), and the new segment is removed.
func TestJoinParentKilled(t *testing.T) {
	const victim = 1
	bg := context.Background()
	name := testName()
	var parent *Endpoint
	var perr error
	var wg sync.WaitGroup
	wg.Go(func() { parent, perr = Join(bg, name, 0, 2, Options{SlotBytes: 4096}) })
	ps := startRanks(t, "stuck", name, 1, EnvRank+"=1", EnvSize+"=2", "SHMCOLL_TEST_VICTIM=1", "SHMCOLL_TEST_SLOT=4096")
	wg.Wait()
	if perr != nil {
		t.Fatal(perr, ps[0].out)
	}
	defer parent.Close()
	ps[0].cmd.Process.Signal(syscall.SIGKILL)
	ps[0].cmd.Wait()

	child := testName()
	path, _ := SegmentPath(child)
	_, err := Join(bg, child, 0, 2, Options{SlotBytes: 4096, JoinTimeout: parentJoinTimeout, Parent: parent})
	var ae *AbortError
	if !errors.Is(err, ErrPeerDead) || !errors.As(err, &ae) || ae.Peer != victim {
		t.Fatalf("join: %v, want the death of rank %d", err, victim)
	}
	if !errors.Is(parent.Err(), ErrPeerDead) {
		t.Errorf("parent not aborted: %v", parent.Err())
	}
	if fileExists(path) {
		t.Errorf("%s left behind", path)
	}
}

// TestJoinParentLeftOrAborted: in-process and named joins watching a
// parent end when a rank that has not joined left the parent (also while
// waiting for the segment to appear), or when the parent is aborted.
func TestJoinParentLeftOrAborted(t *testing.T) {
	bg := context.Background()
	for _, tc := range []struct {
		name  string
		named bool
		abort bool
	}{{"local/left", false, false}, {"local/aborted", false, true}, {"named/left", true, false}, {"named/aborted", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			parent, err := NewLocal(3, Options{SlotBytes: 4096})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				for _, e := range parent {
					e.Close()
				}
			}()
			// New rank r is parent rank 2-r; new rank 0 (parent rank 2)
			// never joins, so a named join also waits for the segment.
			ranks := []int{2, 1, 0}
			key := testName()
			errs := make([]error, 3)
			var wg sync.WaitGroup
			for r := 1; r < 3; r++ {
				opt := Options{SlotBytes: 4096, JoinTimeout: parentJoinTimeout, Parent: parent[ranks[r]], ParentRanks: ranks}
				wg.Go(func() {
					var e *Endpoint
					if tc.named {
						e, errs[r] = Join(bg, key, r, 3, opt)
					} else {
						e, errs[r] = JoinLocal(bg, key, r, 3, opt)
					}
					if e != nil {
						e.Close()
					}
				})
			}
			time.Sleep(20 * time.Millisecond)
			if tc.abort {
				parent[2].Abort(errors.New("boom"))
			} else {
				parent[2].Close()
			}
			wg.Wait()
			for r := 1; r < 3; r++ {
				err := errs[r]
				var ae *AbortError
				switch {
				case tc.abort && (!errors.Is(err, ErrAborted) || !strings.Contains(err.Error(), "boom")):
					t.Errorf("rank %d: %v, want the parent's abort", r, err)
				case !tc.abort && (!errors.Is(err, ErrPeerDead) || !errors.As(err, &ae) || ae.Peer != 2):
					t.Errorf("rank %d: %v, want parent rank 2 gone", r, err)
				}
			}
		})
	}
}

func TestJoinParentBadRanks(t *testing.T) {
	parent, err := NewLocal(2, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, opt := range []Options{
		{ParentRanks: []int{0, 1}},
		{Parent: parent[0], ParentRanks: []int{0}},
		{Parent: parent[0], ParentRanks: []int{0, 2}},
		{Parent: parent[0], ParentRanks: []int{1, 0}},
	} {
		if _, err := JoinLocal(context.Background(), "bad-parent", 0, 2, opt); !errors.Is(err, ErrBadSize) {
			t.Errorf("%v: %v, want ErrBadSize", opt.ParentRanks, err)
		}
	}
}
