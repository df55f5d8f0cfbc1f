package shm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// cmaByte is byte i of rank r's exposed buffer in cmaExchange.
func cmaByte(r, i int) byte { return byte(i*131 + i>>12 + r*37 + 1) }

// cmaPieces splits n bytes at addr into k ranges of uneven lengths, some
// empty, in order.
func cmaPieces(addr uintptr, n, k int) []Remote {
	rs := make([]Remote, 0, k)
	off := 0
	for j := range k - 1 {
		l := min((j*7919)%(2*n/k+1), n-off)
		if j%13 == 5 {
			l = 0
		}
		rs = append(rs, Remote{addr + uintptr(off), l})
		off += l
	}
	return append(rs, Remote{addr + uintptr(off), n - off})
}

// cmaExchange is the cross-memory test of every rank: each exposes two
// heap buffers of n bytes, out (its pattern) and in (zero), publishing
// their addresses in its descriptor. Each reads every peer's out with
// ReadPeer; reads its left neighbour's out again with ReadPeerv in more
// ranges than one system call carries, the ranges in reverse order; and
// writes its own pattern into its right neighbour's in, the first half
// with WritePeer and the rest with WritePeerv in pieces. Every byte is
// checked. A rank returns only after every peer has posted that it is
// done with its buffers.
func cmaExchange(e *Endpoint, n int) error {
	ctx := context.Background()
	p, r := e.Size(), e.Rank()
	out, in := make([]byte, n), make([]byte, n)
	for i := range out {
		out[i] = cmaByte(r, i)
	}
	d := e.Descriptor(r)
	binary.LittleEndian.PutUint64(d, uint64(AddrOf(out)))
	binary.LittleEndian.PutUint64(d[8:], uint64(AddrOf(in)))
	e.Post(0, 1)
	got := make([]byte, n)
	check := func(what string, q int, b []byte) error {
		for i := range b {
			if b[i] != cmaByte(q, i) {
				return fmt.Errorf("rank %d: %s of rank %d: byte %d is %#x, want %#x", r, what, q, i, b[i], cmaByte(q, i))
			}
		}
		return nil
	}
	for j := 1; j < p; j++ {
		q := (r + j) % p
		if err := e.Wait(ctx, q, 0, 1); err != nil {
			return err
		}
		clear(got)
		if err := e.ReadPeer(q, uintptr(binary.LittleEndian.Uint64(e.Descriptor(q))), got); err != nil {
			return err
		}
		if err := check("ReadPeer", q, got); err != nil {
			return err
		}
	}
	left, right := (r+p-1)%p, (r+1)%p
	if p > 1 {
		// Reversed pieces: got then holds them back to front.
		pieces := cmaPieces(uintptr(binary.LittleEndian.Uint64(e.Descriptor(left))), n, 3*iovBatch+5)
		for i, j := 0, len(pieces)-1; i < j; i, j = i+1, j-1 {
			pieces[i], pieces[j] = pieces[j], pieces[i]
		}
		clear(got)
		if err := e.ReadPeerv(left, got, pieces); err != nil {
			return err
		}
		off := 0
		for _, pc := range pieces {
			start := int(pc.Addr - pieces[len(pieces)-1].Addr)
			for i := range pc.Len {
				if got[off+i] != cmaByte(left, start+i) {
					return fmt.Errorf("rank %d: ReadPeerv of rank %d: byte %d of the range at offset %d is %#x, want %#x", r, left, i, start, got[off+i], cmaByte(left, start+i))
				}
			}
			off += pc.Len
		}
		theirs := uintptr(binary.LittleEndian.Uint64(e.Descriptor(right)[8:]))
		if err := e.WritePeer(right, theirs, out[:n/2]); err != nil {
			return err
		}
		if err := e.WritePeerv(right, cmaPieces(theirs+uintptr(n/2), n-n/2, 2*iovBatch+3), out[n/2:]); err != nil {
			return err
		}
	}
	e.Post(1, 1)
	for q := range p {
		if err := e.Wait(ctx, q, 1, 1); err != nil {
			return err
		}
	}
	runtime.KeepAlive(out)
	if p > 1 {
		return check("WritePeer into own buffer by", left, in)
	}
	return nil
}

func TestCrossMemoryLocal(t *testing.T) {
	t.Setenv(EnvCMA, "")
	eps, err := NewLocal(3, Options{SlotBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(t, eps)
	for r, err := range runRanks(eps, func(e *Endpoint) error {
		if err := e.CrossMemory(); err != nil {
			return err
		}
		return cmaExchange(e, 1<<20+4567)
	}) {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// joinLocalAll joins p goroutine ranks with JoinLocal, rank r with opt(r).
func joinLocalAll(t *testing.T, p int, opt func(r int) Options) ([]*Endpoint, []error) {
	eps := make([]*Endpoint, p)
	errs := make([]error, p)
	var wg sync.WaitGroup
	for r := range p {
		wg.Go(func() {
			eps[r], errs[r] = JoinLocal(context.Background(), t.Name(), r, p, opt(r))
		})
	}
	wg.Wait()
	return eps, errs
}

// TestCrossMemoryOff: one rank's Options.NoCrossMemory, or SHMCOLL_CMA=off,
// turns it off on every rank, and ReadPeer then fails with
// ErrNoCrossMemory; a SHMCOLL_CMA that is neither on nor off fails the
// join.
func TestCrossMemoryOff(t *testing.T) {
	eps, errs := joinLocalAll(t, 3, func(r int) Options { return Options{SlotBytes: 4096, NoCrossMemory: r == 1} })
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	defer closeAll(t, eps)
	for _, e := range eps {
		err := e.CrossMemory()
		if !errors.Is(err, ErrNoCrossMemory) || !strings.Contains(err.Error(), "rank 1's options") {
			t.Errorf("rank %d: CrossMemory() = %v, want off by rank 1's options", e.Rank(), err)
		}
		var b [8]byte
		if err := e.ReadPeer((e.Rank()+1)%3, AddrOf(b[:]), b[:]); !errors.Is(err, ErrNoCrossMemory) {
			t.Errorf("rank %d: ReadPeer: %v, want ErrNoCrossMemory", e.Rank(), err)
		}
	}

	t.Setenv(EnvCMA, "off")
	loc, err := NewLocal(2, Options{SlotBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(t, loc)
	for _, e := range loc {
		if err := e.CrossMemory(); !errors.Is(err, ErrNoCrossMemory) || !strings.Contains(err.Error(), "SHMCOLL_CMA=off") {
			t.Errorf("rank %d: CrossMemory() = %v, want off by SHMCOLL_CMA=off", e.Rank(), err)
		}
	}

	t.Setenv(EnvCMA, "sometimes")
	if _, err := NewLocal(2, Options{SlotBytes: 4096}); err == nil || !strings.Contains(err.Error(), "SHMCOLL_CMA") {
		t.Errorf("NewLocal with SHMCOLL_CMA=sometimes: %v", err)
	}
	_, errs = joinLocalAll(t, 2, func(int) Options { return Options{SlotBytes: 4096} })
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "SHMCOLL_CMA") {
			t.Errorf("JoinLocal rank %d with SHMCOLL_CMA=sometimes: %v", r, err)
		}
	}
}

// TestCrossMemoryBadRanges: ranges that cannot be a buffer, and lengths
// that do not add up, are errors naming the problem.
func TestCrossMemoryBadRanges(t *testing.T) {
	eps, err := NewLocal(2, Options{SlotBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(t, eps)
	e := eps[0]
	b := make([]byte, 64)
	a := AddrOf(b)
	for _, c := range []struct {
		dst []byte
		src []Remote
	}{
		{b[:8], []Remote{{0, 8}}},
		{b[:8], []Remote{{a, -1}, {a, 9}}},
		{b[:8], []Remote{{^uintptr(0) - 3, 8}}},
		{b[:8], []Remote{{a, 4}}},
	} {
		if err := e.ReadPeerv(1, c.dst, c.src); !errors.Is(err, ErrBadSize) || !strings.Contains(err.Error(), "rank 0 reading") {
			t.Errorf("ReadPeerv(%v): %v, want ErrBadSize", c.src, err)
		}
	}
	if err := e.ReadPeer(1, 0, nil); err != nil {
		t.Errorf("empty ReadPeer: %v", err)
	}
	e.Close()
	if err := e.ReadPeer(1, a, b); !errors.Is(err, ErrClosed) {
		t.Errorf("ReadPeer after Close: %v", err)
	}
}
