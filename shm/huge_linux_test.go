//go:build linux

package shm

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestPreferHugePages: the offers of a buffer before the HugeAfter-th only
// count, that one collapses it (once), and the collapse keeps every byte;
// where the kernel collapses, the buffer's huge pages show in
// /proc/self/smaps.
func TestPreferHugePages(t *testing.T) {
	e := &Endpoint{cmaOn: true}
	b := make([]byte, 9<<20+123)
	for i := range b {
		b[i] = byte(i*7 + i>>12)
	}
	h := hugeInside(b)
	if len(h) < 6<<20 || AddrOf(h)%hugePage != 0 || len(h)%hugePage != 0 {
		t.Fatalf("hugeInside: %#x + %d of %#x + %d", AddrOf(h), len(h), AddrOf(b), len(b))
	}
	initial := anonHuge(t, AddrOf(h))
	e.PreferHugePages(b)
	if hs := e.huge.Load(); hs.offers[0] != 1 || hs.r[0] != (Remote{AddrOf(b), len(b)}) {
		t.Fatalf("after the first offer: %v %v", hs.r, hs.offers)
	}
	e.PreferHugePages(b[1:]) // another range: recorded apart
	if hs := e.huge.Load(); hs.offers[1] != 1 || hs.next != 2 {
		t.Fatalf("after another range: %v %v", hs.r, hs.offers)
	}
	for range HugeAfter - 2 {
		e.PreferHugePages(b)
	}
	if hs := e.huge.Load(); hs.offers[0] != HugeAfter-1 {
		t.Fatalf("after %d offers: %v %v", HugeAfter-1, hs.r, hs.offers)
	}
	early := anonHuge(t, AddrOf(h)) // the heap's own huge pages, if the system makes them
	e.PreferHugePages(b)
	late := anonHuge(t, AddrOf(h))
	e.PreferHugePages(b) // counted no further: collapsed once
	if hs := e.huge.Load(); hs.offers[0] != HugeAfter || hs.offers[1] != 1 {
		t.Fatalf("after %d offers: %v %v", HugeAfter+1, hs.r, hs.offers)
	}
	for i := range b {
		if b[i] != byte(i*7+i>>12) {
			t.Fatalf("byte %d is %#x after the collapse, want %#x", i, b[i], byte(i*7+i>>12))
		}
	}
	if err := collapse(b); err != nil {
		t.Logf("the kernel does not collapse: %v", err)
		return
	}
	if initial < len(h)>>10 && early >= len(h)>>10 {
		t.Errorf("the mapping had %d KiB of huge pages before the %dth offer, %d before the first", early, HugeAfter, initial)
	}
	if early < len(h)>>10 && late < len(h)>>10 {
		t.Errorf("the mapping had %d KiB of huge pages before the %dth offer and %d after it, want at least %d after", early, HugeAfter, late, len(h)>>10)
	}
}

// anonHuge returns the AnonHugePages (KiB) of the mapping of this process
// that holds addr.
func anonHuge(t *testing.T, addr uintptr) int {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	in := false
	for s := bufio.NewScanner(f); s.Scan(); {
		line := s.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x ", &lo, &hi); n == 2 {
			in = lo <= addr && addr < hi
			continue
		}
		if in && strings.HasPrefix(line, "AnonHugePages:") {
			kb, _ := strconv.Atoi(strings.Fields(line)[1])
			return kb
		}
	}
	t.Fatalf("no mapping holds %#x", addr)
	return 0
}

// TestPreferHugePagesNotBetweenGoroutines: goroutine ranks and ranks
// without cross-memory attach record nothing.
func TestPreferHugePagesNotBetweenGoroutines(t *testing.T) {
	b := make([]byte, 8<<20)
	for _, e := range []*Endpoint{{cmaOn: true, inProcess: true}, {}} {
		e.PreferHugePages(b)
		e.PreferHugePages(b)
		if e.huge.Load() != nil {
			t.Errorf("inProcess %v, cmaOn %v: %v %v", e.inProcess, e.cmaOn, e.huge.Load().r, e.huge.Load().offers)
		}
	}
}

// TestPreferHugePagesOff: Options.NoHugePages and SHMCOLL_HUGEPAGES=off
// keep PreferHugePages from recording or collapsing anything; a value that
// is neither on nor off fails the join.
func TestPreferHugePagesOff(t *testing.T) {
	b := make([]byte, 8<<20)
	check := func(what string, eps []*Endpoint) {
		t.Helper()
		for _, e := range eps {
			e.cmaOn, e.inProcess = true, false // as between processes
			e.PreferHugePages(b)
			e.PreferHugePages(b)
			if e.huge.Load() != nil {
				t.Errorf("%s: rank %d recorded %v %v", what, e.Rank(), e.huge.Load().r, e.huge.Load().offers)
			}
		}
	}
	loc, err := NewLocal(2, Options{SlotBytes: 4096, NoHugePages: true})
	if err != nil {
		t.Fatal(err)
	}
	check("Options.NoHugePages", loc)
	closeAll(t, loc)

	t.Setenv(EnvHugePages, "off")
	loc, err = NewLocal(2, Options{SlotBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	check(EnvHugePages+"=off", loc)
	closeAll(t, loc)

	t.Setenv(EnvHugePages, "on")
	loc, err = NewLocal(2, Options{SlotBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range loc {
		if e.noHuge {
			t.Errorf("%s=on: rank %d has huge pages off", EnvHugePages, e.Rank())
		}
	}
	closeAll(t, loc)

	t.Setenv(EnvHugePages, "sometimes")
	if loc, err := NewLocal(2, Options{SlotBytes: 4096}); err == nil || !strings.Contains(err.Error(), "SHMCOLL_HUGEPAGES on rank 0 is neither on nor off") {
		if err == nil {
			closeAll(t, loc)
		}
		t.Errorf("%s=sometimes: NewLocal: %v, want the join to fail naming it", EnvHugePages, err)
	}
}
