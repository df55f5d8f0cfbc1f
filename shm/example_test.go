package shm_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/shmcoll/shmcoll/shm"
)

// Two goroutine ranks: rank 0 writes a value into its slot and posts
// counter 0; rank 1 waits for the post and reads rank 0's slot.
func ExampleNewLocal() {
	eps, err := shm.NewLocal(2, shm.Options{SlotBytes: 4096})
	if err != nil {
		panic(err)
	}
	defer func() {
		for _, e := range eps {
			e.Close()
		}
	}()
	var wg sync.WaitGroup
	wg.Go(func() {
		e := eps[0]
		binary.LittleEndian.PutUint64(e.Slot(0), 42)
		e.Post(0, 1) // publishes the slot contents
	})
	wg.Go(func() {
		e := eps[1]
		if err := e.Wait(context.Background(), 0, 0, 1); err != nil {
			panic(err)
		}
		fmt.Println(binary.LittleEndian.Uint64(e.Slot(0)))
	})
	wg.Wait()
	// Output: 42
}

// Ranks that start independently meet through a key (in one process) or a
// name (across processes, with Join).
func ExampleJoinLocal() {
	var wg sync.WaitGroup
	for r := range 3 {
		wg.Go(func() {
			e, err := shm.JoinLocal(context.Background(), "example", r, 3, shm.Options{SlotBytes: 4096})
			if err != nil {
				panic(err)
			}
			defer e.Close()
			// A barrier: post, then wait for everyone.
			e.Post(1, 1)
			for q := range e.Size() {
				if err := e.Wait(context.Background(), q, 1, 1); err != nil {
					panic(err)
				}
			}
		})
	}
	wg.Wait()
	fmt.Println("all joined and passed the barrier")
	// Output: all joined and passed the barrier
}

// The inline bytes beside a counter carry tiny messages without touching
// the slot.
func ExampleEndpoint_Inline() {
	eps, _ := shm.NewLocal(2, shm.Options{SlotBytes: 4096})
	copy(eps[0].Inline(0, 2), "hello")
	eps[0].Post(2, 7)
	if err := eps[1].Wait(context.Background(), 0, 2, 7); err != nil {
		panic(err)
	}
	fmt.Println(string(eps[1].Inline(0, 2)[:5]))
	// Output: hello
}

// An abort by one rank ends every rank's waits with the same error.
func ExampleEndpoint_Abort() {
	eps, _ := shm.NewLocal(2, shm.Options{SlotBytes: 4096})
	eps[1].Abort(errors.New("bad input"))
	err := eps[0].Wait(context.Background(), 1, 0, 1)
	var ae *shm.AbortError
	fmt.Println(errors.Is(err, shm.ErrAborted), errors.As(err, &ae) && ae.Rank == 1)
	fmt.Println(err)
	// Output:
	// true true
	// shm: arena aborted by rank 1: bad input
}

// A program started by shmrun, mpirun or srun joins its node's ranks with
// one call; started alone, it is the only rank of a world of one.
func ExampleJoinEnv() {
	e, err := shm.JoinEnv(context.Background(), shm.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Close()
	fmt.Println("rank", e.Rank(), "of", e.Size())
}

// Without a launcher, every process joins by an agreed name (here a fresh
// one), its rank and the number of ranks; rank 0 creates the segment.
func ExampleJoin() {
	const rank, size = 0, 1
	name := shm.NewName()
	e, err := shm.Join(context.Background(), name, rank, size, shm.Options{SlotBytes: 1 << 20})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Close()
	fmt.Println(e.Size(), e.SlotBytes())
	// Output: 1 1048576
}

// A launcher creates the arena in a memfd and hands it to its children as
// descriptor 3 (exec.Cmd.ExtraFiles), with SHMCOLL_ARENA=fd:3.
func ExampleCreateFD() {
	f, err := shm.CreateFD(4, shm.Options{SlotBytes: 1 << 20})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close() // once the children have started
	// cmd.ExtraFiles = []*os.File{f}; cmd.Env = append(cmd.Env, "SHMCOLL_ARENA=fd:3", ...)
}

// Segments left in /dev/shm by jobs that crashed before all ranks joined are
// removed once their processes are gone.
func ExampleCleanup() {
	removed, err := shm.Cleanup()
	if err != nil {
		fmt.Println(err)
	}
	for _, p := range removed {
		fmt.Println("removed", p)
	}
}
