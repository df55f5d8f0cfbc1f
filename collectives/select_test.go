package collectives

import (
	"os"
	"strings"
	"testing"
)

// TestOverride: an override entry replaces the measured entries of its
// key within its range, cutting them around it; other keys stay.
func TestOverride(t *testing.T) {
	base := mustParse(t, "allreduce 2 fit 0 1K flat -\nallreduce 2 fit 1K 1M ring -\nallreduce 2 fit 1M inf bde -\nallreduce 3 fit 0 inf ring -\n")
	o := mustParse(t, "allreduce 2 fit 512 2M circulant flat # why\n")
	got := base.Override(o)
	want := mustParse(t, "allreduce 2 fit 0 512 flat -\nallreduce 2 fit 512 2M circulant flat\nallreduce 2 fit 2M inf bde -\nallreduce 3 fit 0 inf ring -\n")
	if got.Hash() != want.Hash() {
		b, _ := got.MarshalText()
		t.Fatalf("override gave\n%s", b)
	}
	if s := got.selection(2, false); s.entry(CollAllreduce, 600).Reason != "why" {
		t.Errorf("override's reason lost: %+v", s.entry(CollAllreduce, 600))
	}
}

// TestDefaultOverrides: every built-in override has a reason, and the
// default table chooses its algorithm across its range.
func TestDefaultOverrides(t *testing.T) {
	o, err := DefaultOverrides()
	if err != nil {
		t.Fatal(err)
	}
	d, err := DefaultTable()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range o.Entries {
		if e.Reason == "" {
			t.Errorf("override %v p=%d [%d, %d) has no reason", e.Coll, e.P, e.From, e.To)
		}
		s := d.selection(e.P, e.Over)
		for _, b := range []int64{e.From, (e.From + min(e.To, 1<<40)) / 2, min(e.To, 1<<40) - 1} {
			if a := s.lookup(e.Coll, int(b), true); a != e.Alg {
				t.Errorf("%v p=%d at %d: default table chooses %v, override says %v", e.Coll, e.P, b, a, e.Alg)
			}
		}
	}
}

// TestSelect: Select follows the rules in order (pin, Direct, table,
// heuristic) and names each; direct pinned without arena buffers and a
// non-commutative operator on a pinned circulant are errors.
func TestSelect(t *testing.T) {
	tab := mustParse(t, "allreduce 2 fit 0 1K replicated replicated\nallreduce 2 fit 1K inf circulant flat # a reason\n")
	opt := Options{Table: tab}
	cases := []struct {
		call Call
		opt  Options
		alg  Algorithm
		why  string
	}{
		{Call{Coll: CollAllreduce, Bytes: 8, P: 2}, opt, Replicated, "selection table"},
		{Call{Coll: CollAllreduce, Bytes: 8, P: 2}, opt, Replicated, "small-call path"},
		{Call{Coll: CollAllreduce, Bytes: 4096, P: 2}, opt, Circulant, "a reason"},
		{Call{Coll: CollAllreduce, Bytes: 4096, P: 2, NonCommutative: true}, opt, Flat, "order-preserving"},
		{Call{Coll: CollAllreduce, Bytes: 4 << 20, P: 2, Arena: true}, opt, Direct, "Alloc"},
		{Call{Coll: CollAllreduce, Bytes: 4096, P: 3}, opt, HeuristicAlgorithm(CollAllreduce, 4096, 3, true, false), "heuristic"},
		{Call{Coll: CollAllreduce, Bytes: 4096, P: 2}, Options{Table: tab, Algorithms: map[Collective]Algorithm{CollAllreduce: Ring}}, Ring, "Options.Algorithms"},
	}
	for _, tc := range cases {
		a, why, err := Select(tc.call, tc.opt)
		if err != nil || a != tc.alg || !strings.Contains(why, tc.why) {
			t.Errorf("Select(%+v) = %v, %q, %v; want %v and a reason naming %q", tc.call, a, why, err, tc.alg, tc.why)
		}
	}
	t.Setenv("SHMCOLL_ALGO_ALLREDUCE", "ring")
	if a, why, err := Select(Call{Coll: CollAllreduce, Bytes: 8, P: 2}, opt); err != nil || a != Ring || !strings.Contains(why, "SHMCOLL_ALGO_ALLREDUCE") {
		t.Errorf("env pin: %v, %q, %v", a, why, err)
	}
	t.Setenv("SHMCOLL_ALGO_ALLREDUCE", "direct")
	if _, _, err := Select(Call{Coll: CollAllreduce, Bytes: 8, P: 2}, opt); err == nil {
		t.Error("direct pinned without arena buffers: no error")
	}
	t.Setenv("SHMCOLL_ALGO_ALLREDUCE", "circulant")
	if _, _, err := Select(Call{Coll: CollAllreduce, Bytes: 8, P: 2, NonCommutative: true}, opt); err == nil {
		t.Error("circulant pinned for a non-commutative operator: no error")
	}
}

// TestParseAlgorithmDoc: ParseAlgorithm's documentation lists every name.
func TestParseAlgorithmDoc(t *testing.T) {
	b, err := os.ReadFile("names.go")
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	i := strings.Index(src, "// ParseAlgorithm returns")
	j := strings.Index(src, "func ParseAlgorithm(")
	if i < 0 || j < i {
		t.Fatal("ParseAlgorithm's documentation not found")
	}
	doc := strings.Join(strings.Fields(strings.ReplaceAll(src[i:j], "//", "")), " ")
	for _, name := range algNames {
		if !strings.Contains(doc, " "+name+",") && !strings.Contains(doc, " "+name+" ") {
			t.Errorf("ParseAlgorithm's documentation does not list %q", name)
		}
	}
}

// TestOnBuffers: where onBuffers says the buffers do not matter (choose then
// remembers the decision without looking at them), decide answers the same
// for every value of arena and single: default table, every collective,
// sizes around the Direct and Single thresholds, with and without pins; a
// table that names Single for small calls.
func TestOnBuffers(t *testing.T) {
	def, err := DefaultTable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tab := range []*Table{def, mustParse(t, "allgather 2 fit 0 1K single flat\nalltoall 2 fit 0 1K single flat\n")} {
		onBuffersCheck(t, tab)
	}
}

func onBuffersCheck(t *testing.T, tab *Table) {
	for _, p := range []int{2, 3, 8} {
		for _, over := range []bool{false, true} {
			sel := tab.selection(p, over)
			for coll := range numColls {
				for _, pin := range []Algorithm{Auto, Flat, Direct, Single} {
					var pins [numColls]Algorithm
					pins[coll] = pin
					s := selector{p: p, over: over, pins: &pins, table: &sel}
					for _, b := range []int{0, 1, 8, 1 << 10, 8 << 10, 8<<10 + 1, 16 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20} {
						for _, comm := range []bool{true, false} {
							in := selectInput{coll: coll, bytes: b, commutative: comm}
							if s.onBuffers(in) {
								continue
							}
							d0, err0 := s.decide(in)
							for _, f := range [][2]bool{{true, false}, {false, true}, {true, true}} {
								in.arena, in.single = f[0], f[1]
								if d, err := s.decide(in); d.alg != d0.alg || (err == nil) != (err0 == nil) {
									t.Errorf("p=%d over=%v %v pin %v %d bytes arena=%v single=%v: %v, %v; without them %v, %v", p, over, coll, pin, b, f[0], f[1], d.alg, err, d0.alg, err0)
								}
							}
						}
					}
				}
			}
		}
	}
}
