package shm

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"testing"
	"time"
)

func longTests() bool { return os.Getenv("SHMCOLL_LONG") == "1" }

func stressWord(r, k, i int) uint64 { return uint64(r)<<48 ^ uint64(k)<<24 ^ uint64(i)*0x9e3779b1 }

// allToAll is the protocol stress: in round k every rank fills a varying
// number of words of its slot, its inline bytes and its descriptor, posts
// them, checks every peer's, and acknowledges; it overwrites its slot only
// after every peer acknowledged the previous round. Now and then a rank
// sleeps, which sends the others through the yield and futex paths.
func allToAll(e *Endpoint, rounds, maxWords int) error {
	ctx := context.Background()
	p, r := e.Size(), e.Rank()
	const data, ack, extra = 0, 1, 5
	own := e.Slot(r)
	for k := 1; k <= rounds; k++ {
		for q := range p {
			if err := e.Wait(ctx, q, ack, uint64(k-1)); err != nil {
				return err
			}
		}
		if (k*31+r*17)%97 == 0 {
			time.Sleep(time.Millisecond)
		}
		n := 1 + (k*7919+r*104729)%maxWords
		for i := range n {
			binary.LittleEndian.PutUint64(own[8*i:], stressWord(r, k, i))
		}
		binary.LittleEndian.PutUint64(e.Descriptor(r), uint64(n))
		binary.LittleEndian.PutUint64(e.Descriptor(r)[DescriptorBytes-8:], uint64(k))
		in := e.Inline(r, data)
		for i := 0; i+8 <= InlineBytes; i += 8 {
			binary.LittleEndian.PutUint64(in[i:], stressWord(r, k, -i))
		}
		e.Post(extra, uint64(2*k)) // a counter nobody waits on, seen through data's release
		e.Post(data, uint64(k))
		for j := 1; j < p; j++ {
			q := (r + j) % p
			if err := e.Wait(ctx, q, data, uint64(k)); err != nil {
				return err
			}
			d := e.Descriptor(q)
			qn := int(binary.LittleEndian.Uint64(d))
			if want := 1 + (k*7919+q*104729)%maxWords; qn != want || binary.LittleEndian.Uint64(d[DescriptorBytes-8:]) != uint64(k) {
				return fmt.Errorf("rank %d round %d: descriptor of %d says %d words, round %d", r, k, q, qn, binary.LittleEndian.Uint64(d[DescriptorBytes-8:]))
			}
			s := e.Slot(q)
			for i := range qn {
				if got := binary.LittleEndian.Uint64(s[8*i:]); got != stressWord(q, k, i) {
					return fmt.Errorf("rank %d round %d: rank %d word %d = %#x, want %#x", r, k, q, i, got, stressWord(q, k, i))
				}
			}
			qi := e.Inline(q, data)
			for i := 0; i+8 <= InlineBytes; i += 8 {
				if got := binary.LittleEndian.Uint64(qi[i:]); got != stressWord(q, k, -i) {
					return fmt.Errorf("rank %d round %d: rank %d inline %d = %#x", r, k, q, i, got)
				}
			}
			if got := e.Load(q, extra); got < uint64(2*k) {
				return fmt.Errorf("rank %d round %d: rank %d extra counter %d", r, k, q, got)
			}
		}
		e.Post(ack, uint64(k))
	}
	return nil
}

func TestLocalStress(t *testing.T) {
	p, rounds := 8, 300
	if testing.Short() {
		rounds = 60
	}
	if longTests() {
		p, rounds = 16, 5000
	}
	for _, ranks := range []int{2, p} {
		t.Run(fmt.Sprint("ranks=", ranks), func(t *testing.T) {
			eps, err := NewLocal(ranks, Options{SlotBytes: 1 << 15})
			if err != nil {
				t.Fatal(err)
			}
			defer closeAll(t, eps)
			for r, err := range runRanks(eps, func(e *Endpoint) error { return allToAll(e, rounds, 1<<12) }) {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
		})
	}
}
