package tests

// FuzzHostileDescriptor: rank 1 of a two-rank arena is a hostile raw
// shm.Endpoint that publishes arbitrary call-descriptor bytes and an
// arbitrary counter value; rank 0, a collectives.Comm, makes a call. Rank 0
// must never panic; unless the bytes happen to be the call's own descriptor
// and counter, it returns an error wrapping ErrAborted (a mismatch, or its
// context's end when the hostile rank stays silent), and so do later calls.

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/shmcoll/shmcoll/collectives"
	"github.com/shmcoll/shmcoll/shm"
)

func FuzzHostileDescriptor(f *testing.F) {
	valid := make([]byte, 48)
	valid[0], valid[8] = 1, 1 // seq 1, step 1
	f.Add(valid, uint64(1<<16|1), uint8(0), uint8(1))
	f.Add(make([]byte, 48), uint64(1<<16|1), uint8(1), uint8(1))
	f.Add([]byte("garbage garbage garbage garbage garbage garbage!"), ^uint64(0), uint8(2), uint8(0))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 255, 255, 255, 0, 255, 255, 255, 255}, uint64(1<<16|7), uint8(3), uint8(1))
	f.Fuzz(func(t *testing.T, desc []byte, post uint64, call, counter uint8) {
		name := shm.NewName()
		var wg sync.WaitGroup
		var c *collectives.Comm
		var cerr error
		wg.Go(func() {
			c, cerr = collectives.Join(bg, name, 0, 2, collectives.Options{SlotBytes: 4096, Timeout: 100 * time.Millisecond})
		})
		ep, err := shm.Join(bg, name, 1, 2, shm.Options{SlotBytes: 4096, Timeout: 100 * time.Millisecond})
		wg.Wait()
		if err != nil || cerr != nil {
			t.Fatal(err, cerr)
		}
		defer ep.Close()
		defer c.Close()
		k := int(counter % 2)
		copy(ep.Inline(1, k), desc)
		ep.Post(k, post)

		ctx, cancel := context.WithTimeout(bg, 50*time.Millisecond)
		defer cancel()
		defer func() {
			if x := recover(); x != nil {
				t.Fatalf("rank 0 panicked on descriptor %x, counter %d = %#x: %v", desc, k, post, x)
			}
		}()
		switch call % 4 {
		case 0:
			err = collectives.Barrier(ctx, c)
		case 1:
			err = collectives.Allreduce(ctx, c, make([]int64, 16), make([]int64, 16), collectives.Sum)
		case 2:
			err = collectives.Bcast(ctx, c, make([]float32, 100), 1)
		case 3:
			err = collectives.ReduceScatter(ctx, c, make([]int32, 10), make([]int32, 3), []int{3, 7}, collectives.Max)
		}
		if err == nil {
			// The bytes were this call's descriptor and the counter far
			// enough: the hostile rank took part like an honest one
			// (possible for a barrier, which moves no data).
			return
		}
		if !errors.Is(err, collectives.ErrAborted) {
			t.Fatalf("rank 0: %v does not wrap ErrAborted", err)
		}
		if later := collectives.Barrier(bg, c); !errors.Is(later, collectives.ErrAborted) {
			t.Fatalf("later call: %v, want ErrAborted", later)
		}
	})
}
