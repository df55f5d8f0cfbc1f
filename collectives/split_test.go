package collectives

import (
	"fmt"
	"testing"
)

func TestSplitDup(t *testing.T) {
	const p = 7
	err := Run(p, Options{SlotBytes: 8192}, func(c *Comm) error {
		r := c.Rank()
		// Two groups by parity, ordered by descending rank; rank 6 stays out.
		color := r % 2
		if r == 6 {
			color = -1
		}
		sub, err := c.Split(bg, color, -r)
		if err != nil {
			return err
		}
		if r == 6 {
			if sub != nil {
				return fmt.Errorf("rank 6 got a communicator for a negative color")
			}
		} else {
			defer sub.Close()
			members := []int{4, 2, 0}
			if color == 1 {
				members = []int{5, 3, 1}
			}
			wantRank := -1
			for i, m := range members {
				if m == r {
					wantRank = i
				}
			}
			if sub.Size() != 3 || sub.Rank() != wantRank {
				return fmt.Errorf("split: rank %d of %d, want %d of 3", sub.Rank(), sub.Size(), wantRank)
			}
		}
		dup, err := c.Dup(bg)
		if err != nil {
			return err
		}
		defer dup.Close()
		if dup.Rank() != r || dup.Size() != p {
			return fmt.Errorf("dup: rank %d of %d", dup.Rank(), dup.Size())
		}
		// Interleave calls on the three communicators.
		for it := range 3 {
			n := 500 + it
			got := make([]int64, n)
			if sub != nil {
				in := make([]int64, n)
				for i := range in {
					in[i] = int64(r*1000 + i)
				}
				if err := Allreduce(bg, sub, in, got, Sum); err != nil {
					return err
				}
				base := int64(0 + 2 + 4)
				if color == 1 {
					base = 1 + 3 + 5
				}
				for i, x := range got {
					if want := base*1000 + 3*int64(i); x != want {
						return fmt.Errorf("sub allreduce: [%d] = %d, want %d", i, x, want)
					}
				}
			}
			in := make([]int64, n)
			for i := range in {
				in[i] = int64(r + i)
			}
			if err := Allreduce(bg, dup, in, got, Max); err != nil {
				return err
			}
			for i, x := range got {
				if want := int64(p - 1 + i); x != want {
					return fmt.Errorf("dup allreduce: [%d] = %d, want %d", i, x, want)
				}
			}
			if err := Barrier(bg, c); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestUnaligned runs with buffers that start at every element offset of a
// larger array, and checks that nothing outside them is written.
func TestUnaligned(t *testing.T) {
	const p, n = 3, 301
	for _, alg := range []Algorithm{Flat, Circulant, Replicated} {
		for off := range 3 {
			err := Run(p, pinAll(alg), func(c *Comm) error {
				back := make([]int16, n+8)
				for i := range back {
					back[i] = -1
				}
				recv := back[off+1 : off+1+n]
				in := make([]int16, n+3)[off : off+n]
				for i := range in {
					in[i] = int16(c.Rank() + i)
				}
				if err := Allreduce(bg, c, in, recv, Sum); err != nil {
					return err
				}
				for i, x := range recv {
					if want := int16(p*(p-1)/2 + p*i); x != want {
						return fmt.Errorf("%v off %d: [%d] = %d, want %d", alg, off, i, x, want)
					}
				}
				for i, x := range back {
					if (i <= off || i > off+n) && x != -1 {
						return fmt.Errorf("%v off %d: guard element %d written", alg, off, i)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}
