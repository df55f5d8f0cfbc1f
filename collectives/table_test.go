package collectives

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/shmcoll/shmcoll/shm"
)

func mustParse(t *testing.T, text string) *Table {
	t.Helper()
	tab, err := ParseTable("test.txt", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

func TestTableRoundTrip(t *testing.T) {
	tab := &Table{
		Header: []string{"made: by hand", "cpu: none"},
		Entries: []TableEntry{
			{Coll: CollReduce, P: 4, From: 0, To: math.MaxInt64, Alg: Flat, Ordered: Flat},
			{Coll: CollAllreduce, P: 3, Over: true, From: 0, To: 100, Alg: Ring, Ordered: DualRoot},
			{Coll: CollAllreduce, P: 3, From: 1 << 10, To: 3 << 20, Alg: Ring},
			{Coll: CollAllreduce, P: 3, From: 0, To: 1 << 10, Alg: Replicated, Ordered: Replicated},
			{Coll: CollBarrier, P: 8, Over: true, From: 0, To: math.MaxInt64, Alg: Flat},
		},
	}
	if err := tab.Check(); err != nil {
		t.Fatal(err)
	}
	text, err := tab.MarshalText()
	if err != nil {
		t.Fatal(err)
	}
	back := mustParse(t, string(text))
	if back.Hash() != tab.Hash() {
		t.Errorf("hash changed in the round trip:\n%s", text)
	}
	if strings.Join(back.Header, "\n") != strings.Join(tab.Header, "\n") {
		t.Errorf("header %q, want %q", back.Header, tab.Header)
	}
	if len(back.Entries) != len(tab.Entries) {
		t.Fatalf("%d entries, want %d:\n%s", len(back.Entries), len(tab.Entries), text)
	}
	for _, want := range tab.Entries {
		found := false
		for _, e := range back.Entries {
			e.line = 0
			found = found || e == want
		}
		if !found {
			t.Errorf("entry %+v lost in the round trip:\n%s", want, text)
		}
	}
	again, _ := back.MarshalText()
	if string(again) != string(text) {
		t.Errorf("second marshal differs:\n%s\nvs\n%s", again, text)
	}
	for _, want := range []string{"allreduce", "3  fit   0       1K      replicated", "1K      3M      ring             -", "inf"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	// The hash ignores comments and the order of lines, not the entries.
	other := *tab
	other.Header = nil
	if other.Hash() != tab.Hash() {
		t.Error("the hash depends on the header")
	}
	other.Entries = append([]TableEntry(nil), tab.Entries...)
	other.Entries[2].Alg = Flat
	if other.Hash() == tab.Hash() {
		t.Error("the hash does not depend on the entries")
	}
}

func TestTableBad(t *testing.T) {
	const ok = "# header\nallreduce 3 fit 0 1K replicated replicated\n"
	for _, tc := range []struct{ name, text, want string }{
		{"collective", ok + "allreduse 3 fit 0 1K flat -\n", "test.txt:3: unknown collective \"allreduse\""},
		{"algorithm", ok + "allreduce 3 fit 1K 2K rong -\n", "test.txt:3: unknown algorithm \"rong\""},
		{"not implemented", ok + "\nbarrier 3 fit 0 inf ring -\n", "test.txt:4: algorithm ring does not implement barrier"},
		{"ordered not implemented", ok + "bcast 3 fit 0 inf flat dualroot\n", "test.txt:3: ordered algorithm dualroot does not implement bcast"},
		{"ordered not ordered", ok + "allreduce 3 fit 1K inf flat ring\n", "test.txt:3: ordered algorithm ring does not keep rank order"},
		{"direct", ok + "allgather 3 fit 0 inf direct -\n", "test.txt:3: allgather: direct serves buffers from Alloc"},
		{"overlap", ok + "allreduce 3 fit 512 2K flat -\n", "test.txt:3: allreduce p=3: range [512, 2K) overlaps [0, 1K)"},
		{"unsorted", "allreduce 3 fit 1K 2K flat -\n# comment\nallreduce 3 fit 0 1K flat -\n", "test.txt:3: allreduce p=3: range from 0 comes after the range from 1K"},
		{"empty range", "allreduce 3 fit 1K 1K flat -\n", "test.txt:1: empty or negative range"},
		{"fields", "allreduce 3 fit 0 1K flat\n", "test.txt:1: 6 fields, want 7"},
		{"size", "allreduce 3 fit 0 1Q flat -\n", "test.txt:1: to \"1Q\""},
		{"cpus", "allreduce 3 some 0 1K flat -\n", "test.txt:1: cpus \"some\""},
		{"p", "allreduce 0 fit 0 1K flat -\n", "test.txt:1: p \"0\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTable("test.txt", []byte(tc.text))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	// The same range in another p, or oversubscribed, is no overlap.
	mustParse(t, ok+"allreduce 4 fit 0 1K flat -\nallreduce 3 over 0 1K flat -\n")
}

func TestDefaultTable(t *testing.T) {
	tab, err := DefaultTable()
	if err != nil {
		t.Fatal(err)
	}
	text, _ := tab.MarshalText()
	if _, err := ParseTable("again", text); err != nil {
		t.Fatal(err)
	}
}

// runAlg runs an allreduce of n int64 on p in-process ranks with opt and
// op, checks the result against want, and returns the algorithm chosen.
func runAlg(t *testing.T, p, n int, opt Options, op Op, want func(i int) int64) Algorithm {
	t.Helper()
	algs := make([]Algorithm, p)
	err := Run(p, opt, func(c *Comm) error {
		send, recv := make([]int64, n), make([]int64, n)
		for i := range send {
			send[i] = int64(c.Rank()*1000 + i)
		}
		if err := Allreduce(context.Background(), c, send, recv, op); err != nil {
			return err
		}
		for i, v := range recv {
			if v != want(i) {
				t.Errorf("rank %d: element %d is %d, want %d", c.Rank(), i, v, want(i))
				break
			}
		}
		algs[c.Rank()] = c.LastAlgorithm()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for r, a := range algs {
		if a != algs[0] {
			t.Fatalf("rank %d chose %v, rank 0 %v", r, a, algs[0])
		}
	}
	return algs[0]
}

func TestTableFollowed(t *testing.T) {
	tab := mustParse(t, `
allreduce 3 fit 0   1K  ring        dualroot
allreduce 3 fit 4K  inf bde         -
allreduce 3 over 0  inf bruck       -
allreduce 2 fit 0   inf recdoubling -
`)
	opt := Options{Table: tab, SlotBytes: 1 << 16}
	sum := func(i int) int64 { return int64(3*i + 3000) }
	for _, tc := range []struct {
		n    int // int64 elements
		want Algorithm
	}{
		{8, Ring},   // 64 B
		{127, Ring}, // 1016 B
		{256, HeuristicAlgorithm(CollAllreduce, 2048, 3, true, false)}, // no entry: heuristic
		{1024, BDE}, // 8 KiB
	} {
		if got := runAlg(t, 3, tc.n, opt, Sum, sum); got != tc.want {
			t.Errorf("allreduce p=3 %d B: auto chose %v, want %v", tc.n*8, got, tc.want)
		}
	}
	// A pin overrides the table.
	pin := opt
	pin.Algorithms = map[Collective]Algorithm{CollAllreduce: Flat}
	if got := runAlg(t, 3, 8, pin, Sum, sum); got != Flat {
		t.Errorf("pinned flat, got %v", got)
	}
	// Another p has its own entries.
	if got := runAlg(t, 2, 8, opt, Sum, func(i int) int64 { return int64(2*i + 1000) }); got != RecDoubling {
		t.Errorf("p=2: auto chose %v, want recdoubling", got)
	}
	// The same table from SHMCOLL_TUNE_FILE.
	text, _ := tab.MarshalText()
	file := filepath.Join(t.TempDir(), "table.txt")
	if err := os.WriteFile(file, text, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(TuneFileEnv, file)
	if got := runAlg(t, 3, 8, Options{}, Sum, sum); got != Ring {
		t.Errorf("%s: auto chose %v, want ring", TuneFileEnv, got)
	}
	if err := os.WriteFile(file, []byte("allreduce 3 fit 0 inf ring -\nallreduce 3 fit 0 inf flat -\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := NewLocal(3, Options{})
	if err == nil || !strings.Contains(err.Error(), file+":2: allreduce p=3: range") {
		t.Errorf("bad %s: error %v, want one naming %s:2", TuneFileEnv, err, file)
	}
}

// TestTableOversubscribed: an entry measured oversubscribed applies only
// to oversubscribed communicators, and the other way round.
func TestTableOversubscribed(t *testing.T) {
	tab := mustParse(t, "allreduce 8 fit 0 inf ring -\nallreduce 8 over 0 inf bruck -\nbarrier 8 over 0 inf flat -\n")
	fit, over := tab.selection(8, false), tab.selection(8, true)
	if a := fit.lookup(CollAllreduce, 64, true); a != Ring {
		t.Errorf("fit: %v, want ring", a)
	}
	if a := over.lookup(CollAllreduce, 64, true); a != Bruck {
		t.Errorf("over: %v, want bruck", a)
	}
	if a := fit.lookup(CollBarrier, 0, true); a != Auto {
		t.Errorf("fit barrier: %v, want none (the heuristic)", a)
	}
	if a := over.lookup(CollBarrier, 0, true); a != Flat {
		t.Errorf("over barrier: %v, want flat", a)
	}
	if s4 := tab.selection(4, false); s4.lookup(CollAllreduce, 64, true) != Auto {
		t.Error("p=4 used p=8's entry")
	}
	// In-process ranks are never oversubscribed.
	only := mustParse(t, "allreduce 3 over 0 inf ring -\n")
	if got := runAlg(t, 3, 8, Options{Table: only}, Sum, func(i int) int64 { return int64(3*i + 3000) }); got == Ring {
		t.Error("an in-process communicator used an entry measured oversubscribed")
	}
}

// TestTableNonCommutative: a non-commutative operator never runs an
// algorithm that does not keep rank order; it takes the entry's ordered
// choice, else the heuristic's.
func TestTableNonCommutative(t *testing.T) {
	// last: a op b = b, associative, not commutative: the result is the
	// last rank's vector.
	last := NewOp("last", func(dst, src []int64) { copy(dst, src) }, false)
	want := func(i int) int64 { return int64(2000 + i) }
	tab := mustParse(t, "allreduce 3 fit 0 1K ring dualroot\nallreduce 3 fit 1K inf circulant -\n")
	opt := Options{Table: tab, SlotBytes: 1 << 16}
	if got := runAlg(t, 3, 8, opt, last, want); got != DualRoot {
		t.Errorf("small: %v, want the recorded ordered dualroot", got)
	}
	got := runAlg(t, 3, 1024, opt, last, want)
	if !orderPreserving[CollAllreduce][got] || got != HeuristicAlgorithm(CollAllreduce, 8192, 3, false, false) {
		t.Errorf("large: %v, want the heuristic's ordered choice", got)
	}
	if got := runAlg(t, 3, 8, opt, Sum, func(i int) int64 { return int64(3*i + 3000) }); got != Ring {
		t.Errorf("commutative: %v, want ring", got)
	}
}

// TestTableMismatch: ranks that join with different tables fail on every
// rank, naming the rank and the hashes.
func TestTableMismatch(t *testing.T) {
	a := mustParse(t, "allreduce 3 fit 0 inf ring -\n")
	b := mustParse(t, "allreduce 3 fit 0 inf flat -\n")
	join := func(tabs ...*Table) []error {
		p := len(tabs)
		key := shm.NewName()
		errs := make([]error, p)
		var wg sync.WaitGroup
		for r := range p {
			wg.Go(func() {
				opt := Options{Table: tabs[r]}
				tc, err := tableOf(opt)
				if err != nil {
					errs[r] = err
					return
				}
				ep, err := shm.JoinLocal(context.Background(), key, r, p, opt.shm(tc.hash))
				if err != nil {
					errs[r] = err
					return
				}
				c, err := wrap(ep, nil, opt, tc)
				errs[r] = err
				if err == nil {
					errs[r] = Barrier(context.Background(), c)
					c.Close()
				}
			})
		}
		wg.Wait()
		return errs
	}
	for r, err := range join(a, a, a) {
		if err != nil {
			t.Errorf("same tables: rank %d: %v", r, err)
		}
	}
	want := fmt.Sprintf("rank 2 loaded a different selection table (hash %016x) than rank 0 (hash %016x)", b.Hash()|1, a.Hash()|1)
	for r, err := range join(a, a, b) {
		if !errors.Is(err, ErrTableMismatch) || !strings.Contains(err.Error(), want) {
			t.Errorf("rank %d: error %v, want %v: %s", r, err, ErrTableMismatch, want)
		}
	}
	// A rank that records no table (a bare endpoint) takes no part.
	key := shm.NewName()
	var wg sync.WaitGroup
	var bare *shm.Endpoint
	var bareErr error
	wg.Go(func() { bare, bareErr = shm.JoinLocal(context.Background(), key, 1, 2, shm.Options{}) })
	tc, _ := tableOf(Options{Table: a})
	ep, err := shm.JoinLocal(context.Background(), key, 0, 2, Options{}.shm(tc.hash))
	wg.Wait()
	if err != nil || bareErr != nil {
		t.Fatal(err, bareErr)
	}
	defer bare.Close()
	c, err := wrap(ep, nil, Options{Table: a}, tc)
	if err != nil {
		t.Fatalf("beside a bare endpoint: %v", err)
	}
	c.Close()
}
