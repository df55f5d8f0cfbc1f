package shm

import (
	"os"
	"testing"
)

func headerSeeds() [][]byte {
	var seeds [][]byte
	for _, p := range []int{1, 2, 7} {
		lay, _ := newLayout(p, sizes{4096 * p, 8192 * (p & 1)})
		h := make([]byte, headerBytes)
		lay.writeHeader(h, kindNamed, 1234, 99)
		ne.PutUint64(h[hMagic:], magic)
		seeds = append(seeds, h)
	}
	return seeds
}

// resum rewrites the checksum of a header-sized h.
func resum(h []byte) []byte {
	if len(h) >= headerBytes {
		ne.PutUint64(h[hChecksum:], headerSum(h))
	}
	return h
}

// FuzzReadHeader: any bytes give a layout that is self-consistent, or an
// ErrBadHeader error; never a panic.
func FuzzReadHeader(f *testing.F) {
	for _, s := range headerSeeds() {
		f.Add(s, true)
	}
	f.Add([]byte("shmcoll1"), false)
	f.Fuzz(func(t *testing.T, h []byte, fixSum bool) {
		if fixSum {
			resum(h) // reach the field checks behind the checksum
		}
		p, err := readHeader(h)
		if err != nil {
			return
		}
		page := os.Getpagesize()
		if p.ranks < 1 || p.ranks > MaxRanks || p.slotBytes%page != 0 || p.slotsOff%page != 0 ||
			p.heapBytes%page != 0 || p.slotsOff < headerBytes+p.ranks*ctrlStride ||
			p.heapsOff != p.slotsOff+p.ranks*p.slotBytes || p.total != p.heapsOff+p.ranks*p.heapBytes {
			t.Fatalf("accepted inconsistent layout %+v", p.layout)
		}
		if p.matches(p.ranks, sizes{p.slotBytes, p.heapBytes}) != nil {
			t.Fatal("layout does not match itself")
		}
	})
}
