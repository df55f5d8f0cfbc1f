package collectives

import (
	"errors"
	"fmt"
	"testing"
)

// vcounts are the block counts of a gatherv/scatterv test case for p ranks
// with about n elements per block: kind 0 all n, 1 rank-dependent with
// zeros, 2 all zero but one.
func vcounts(p, n, kind int) []int {
	counts := make([]int, p)
	for j := range counts {
		switch kind {
		case 0:
			counts[j] = n
		case 1:
			counts[j] = (j * n / 2) % (n + 1) // counts[0] = 0
			if j%3 == 2 {
				counts[j] = 0
			}
		case 2:
			if j == p-1 {
				counts[j] = n
			}
		}
	}
	return counts
}

// vdispls are the root's displacements: nil (packed) or the blocks in
// reverse rank order with a gap of 3 before each; it returns the length
// of the root's buffer.
func vdispls(counts []int, packed bool) ([]int, int) {
	total := 0
	for _, k := range counts {
		total += k
	}
	if packed {
		return nil, total
	}
	displs := make([]int, len(counts))
	off := 0
	for j := len(counts) - 1; j >= 0; j-- {
		off += 3
		displs[j] = off
		off += counts[j]
	}
	return displs, off + 1
}

func vval(j, i int) int32 { return int32(j*10000 + i + 1) }

func TestGathervScatterv(t *testing.T) {
	const sentinel = -5
	for _, p := range []int{1, 2, 3, 4, 5} {
		for _, n := range []int{1, 9, 1500} { // 1500 int32: several segments of a 4 KiB slot
			for kind := range 3 {
				for _, packed := range []bool{true, false} {
					name := fmt.Sprintf("p=%d/n=%d/kind=%d/packed=%v", p, n, kind, packed)
					t.Run(name, func(t *testing.T) {
						counts := vcounts(p, n, kind)
						err := Run(p, Options{SlotBytes: 4096}, func(c *Comm) error {
							for root := range p {
								for _, mode := range []string{"blocking", "nonblocking", "in place"} {
									if err := gathervCase(c, counts, packed, root, mode, sentinel); err != nil {
										return fmt.Errorf("gatherv root %d %s: %w", root, mode, err)
									}
									if err := scattervCase(c, counts, packed, root, mode, sentinel); err != nil {
										return fmt.Errorf("scatterv root %d %s: %w", root, mode, err)
									}
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
	}
}

func gathervCase(c *Comm, counts []int, packed bool, root int, mode string, sentinel int32) error {
	r := c.Rank()
	send := make([]int32, counts[r])
	for i := range send {
		send[i] = vval(r, i)
	}
	var recv []int32
	displs, size := vdispls(counts, packed)
	d := func(j int) int {
		if displs != nil {
			return displs[j]
		}
		s := 0
		for q := range j {
			s += counts[q]
		}
		return s
	}
	if r == root {
		recv = make([]int32, size)
		for i := range recv {
			recv[i] = sentinel
		}
	}
	var err error
	switch mode {
	case "blocking":
		err = Gatherv(bg, c, send, recv, counts, displs, root)
	case "nonblocking":
		err = IGatherv(bg, c, send, recv, counts, displs, root).Wait()
	case "in place":
		if r == root {
			copy(recv[d(r):], send)
			send = nil
		}
		err = Gatherv(bg, c, send, recv, counts, displs, root)
	}
	if err != nil || r != root {
		return err
	}
	want := make([]int32, size)
	for i := range want {
		want[i] = sentinel
	}
	for j := range counts {
		for i := range counts[j] {
			want[d(j)+i] = vval(j, i)
		}
	}
	for i := range want {
		if recv[i] != want[i] {
			return fmt.Errorf("recv[%d] = %d, want %d", i, recv[i], want[i])
		}
	}
	return nil
}

func scattervCase(c *Comm, counts []int, packed bool, root int, mode string, sentinel int32) error {
	r := c.Rank()
	displs, size := vdispls(counts, packed)
	var send []int32
	if r == root {
		send = make([]int32, size)
		for i := range send {
			send[i] = sentinel
		}
		off := 0
		for j := range counts {
			at := off
			if displs != nil {
				at = displs[j]
			}
			for i := range counts[j] {
				send[at+i] = vval(j, i)
			}
			off += counts[j]
		}
	}
	recv := make([]int32, counts[r])
	var err error
	switch mode {
	case "blocking":
		err = Scatterv(bg, c, send, recv, counts, displs, root)
	case "nonblocking":
		err = IScatterv(bg, c, send, recv, counts, displs, root).Wait()
	case "in place":
		if r == root {
			recv = nil
		}
		err = Scatterv(bg, c, send, recv, counts, displs, root)
	}
	if err != nil {
		return err
	}
	for i := range recv {
		if recv[i] != vval(r, i) {
			return fmt.Errorf("rank %d recv[%d] = %d, want %d", r, i, recv[i], vval(r, i))
		}
	}
	return nil
}

// TestGathervErrors: counts or roots that differ between ranks fail with
// ErrMismatch on every rank; a bad argument on one rank fails it with
// ErrInvalidArgument and the others with ErrAborted.
func TestGathervErrors(t *testing.T) {
	const p = 4
	mismatches := []struct {
		name, want string
		f          func(c *Comm) error
	}{
		{"gatherv counts", "count", func(c *Comm) error {
			counts := []int{1, 2, 3, 4}
			if c.Rank() == 2 {
				counts = []int{2, 1, 3, 4}
			}
			return Gatherv(bg, c, make([]int32, counts[c.Rank()]), make([]int32, 10), counts, nil, 0)
		}},
		{"scatterv counts", "count", func(c *Comm) error {
			counts := []int{1, 2, 3, 4}
			if c.Rank() == 0 {
				counts = []int{1, 2, 4, 3}
			}
			return Scatterv(bg, c, make([]int32, 10), make([]int32, counts[c.Rank()]), counts, nil, 1)
		}},
		{"gatherv root", "root", func(c *Comm) error {
			counts := []int{2, 2, 2, 2}
			return Gatherv(bg, c, make([]int32, 2), make([]int32, 8), counts, nil, c.Rank()/2)
		}},
		{"scatterv against scatter", "called", func(c *Comm) error {
			if c.Rank() == 3 {
				return Scatter(bg, c, make([]int32, 8), make([]int32, 2), 0)
			}
			return Scatterv(bg, c, make([]int32, 8), make([]int32, 2), []int{2, 2, 2, 2}, nil, 0)
		}},
		{"gatherv type", "passed", func(c *Comm) error {
			counts := []int{1, 1, 1, 1}
			if c.Rank() == 1 {
				return Gatherv(bg, c, make([]float32, 1), make([]float32, 4), counts, nil, 0)
			}
			return Gatherv(bg, c, make([]int32, 1), make([]int32, 4), counts, nil, 0)
		}},
	}
	for _, tc := range mismatches {
		t.Run(tc.name, func(t *testing.T) { mismatch(t, p, tc.name, tc.want, false, tc.f) })
	}
	invalid := []struct {
		name string
		bad  int // the rank that passes the bad argument
		f    func(c *Comm) error
	}{
		{"displs beyond recv", 0, func(c *Comm) error {
			return Gatherv(bg, c, make([]int32, 1), make([]int32, 4), []int{1, 1, 1, 1}, []int{0, 1, 2, 4}, 0)
		}},
		{"short send", 2, func(c *Comm) error {
			n := 3
			if c.Rank() == 2 {
				n = 2
			}
			return Gatherv(bg, c, make([]int32, n), make([]int32, 12), []int{3, 3, 3, 3}, nil, 1)
		}},
		{"negative count", 0, func(c *Comm) error {
			counts := []int{1, 1, 1, 1}
			if c.Rank() == 0 {
				counts[3] = -1
			}
			return Scatterv(bg, c, make([]int32, 4), make([]int32, 1), counts, nil, 0)
		}},
		{"short root buffer", 3, func(c *Comm) error {
			return Scatterv(bg, c, make([]int32, 3), make([]int32, 1), []int{1, 1, 1, 1}, nil, 3)
		}},
	}
	for _, tc := range invalid {
		t.Run(tc.name, func(t *testing.T) {
			errs := runAll(t, p, Options{}, tc.f)
			sameAbort(t, tc.name, errs, ErrAborted)
			if !errors.Is(errs[tc.bad], ErrInvalidArgument) {
				t.Errorf("rank %d: %v, want ErrInvalidArgument", tc.bad, errs[tc.bad])
			}
			var e *Error
			if errors.As(errs[tc.bad], &e) && e.Coll.String() != "gatherv" && e.Coll.String() != "scatterv" {
				t.Errorf("error names %v", e.Coll)
			}
		})
	}
}

// The flat Gather and Scatter take their regular blocks from the Comm's
// scratch, and Gatherv and Scatterv theirs from the caller: none of them
// allocates per call.
func TestFlatGatherScatterDoNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	const p, n = 2, 5
	cs := localComms(t, p, Options{Algorithms: map[Collective]Algorithm{CollGather: Flat, CollScatter: Flat}})
	counts := []int{n, n - 2}
	type bufs struct{ in, out, all []int64 }
	b := make([]bufs, p)
	for r := range b {
		b[r] = bufs{make([]int64, n), make([]int64, n), make([]int64, p*n)}
		for i := range b[r].in {
			b[r].in[i] = int64(10*r + i)
		}
	}
	calls := func(c *Comm) error {
		r := c.Rank()
		x := b[r]
		if err := Gather(bg, c, x.in, x.all, 0); err != nil {
			return err
		}
		if err := Scatter(bg, c, x.all, x.out, 0); err != nil {
			return err
		}
		if err := Gatherv(bg, c, x.in[:counts[r]], x.all, counts, nil, 1); err != nil {
			return err
		}
		return Scatterv(bg, c, x.all, x.out[:counts[r]], counts, nil, 1)
	}
	allocs := allocsTwoRanks(t, cs, calls, nil)
	if allocs != 0 {
		t.Errorf("%v allocations per round of Gather, Scatter, Gatherv and Scatterv", allocs)
	}
	// The last Scatterv gave each rank its block of the last Gatherv.
	for r := range p {
		for i := range counts[r] {
			if got, want := b[r].out[i], int64(10*r+i); got != want {
				t.Errorf("rank %d: out[%d] = %d, want %d", r, i, got, want)
			}
		}
	}
}
