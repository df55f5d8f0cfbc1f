package shm_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/shmcoll/shmcoll/shm"
)

// Rank 1 exposes a buffer of its own by publishing its address in its
// descriptor; rank 0 reads it in one copy and posts that it is done, and
// rank 1 keeps the buffer until then. Between processes the same code
// copies with process_vm_readv.
func ExampleEndpoint_ReadPeer() {
	eps, err := shm.NewLocal(2, shm.Options{SlotBytes: 4096})
	if err != nil {
		panic(err)
	}
	defer func() {
		for _, e := range eps {
			e.Close()
		}
	}()
	if err := eps[0].CrossMemory(); err != nil {
		fmt.Println(err) // SHMCOLL_CMA=off, say: use the slots instead
		return
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	wg.Go(func() {
		e := eps[1]
		buf := make([]byte, 1<<20) // on the heap: cross-memory attach needs that
		copy(buf, "hello from rank 1")
		binary.LittleEndian.PutUint64(e.Descriptor(1), uint64(shm.AddrOf(buf)))
		e.Post(0, 1)
		if err := e.Wait(ctx, 0, 0, 1); err != nil { // rank 0 is done with buf
			panic(err)
		}
	})
	wg.Go(func() {
		e := eps[0]
		if err := e.Wait(ctx, 1, 0, 1); err != nil {
			panic(err)
		}
		got := make([]byte, 17)
		if err := e.ReadPeer(1, uintptr(binary.LittleEndian.Uint64(e.Descriptor(1))), got); err != nil {
			panic(err)
		}
		e.Post(0, 1)
		fmt.Println(string(got))
	})
	wg.Wait()
	// Output: hello from rank 1
}
