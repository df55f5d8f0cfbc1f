package shm

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"
	"unsafe"
)

// localArena is an in-process arena: Go memory shared by goroutine ranks.
type localArena struct {
	mem    []byte
	lay    layout
	park   *parker
	joined int // ranks that called JoinLocal (guarded by localMu)
	refs   int // ranks still inside JoinLocal or joined (guarded by localMu)
}

var (
	localMu  sync.Mutex
	localReg = map[string]*localArena{}
)

// newLocalArena allocates an arena in Go memory, slots page-aligned.
func newLocalArena(size int, opt Options) (*localArena, error) {
	lay, err := newLayout(size, opt.sizes())
	if err != nil {
		return nil, err
	}
	// uint64 backing gives 8-byte alignment; the extra page gives page
	// alignment of the slots.
	words := make([]uint64, (lay.total+lay.pageSize)/8)
	raw := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8)
	off := (lay.pageSize - int(uintptr(unsafe.Pointer(&raw[0]))%uintptr(lay.pageSize))) % lay.pageSize
	mem := raw[off : off+lay.total : off+lay.total]
	lay.writeHeader(mem, kindLocal, os.Getpid(), 0)
	*(*uint64)(unsafe.Pointer(&mem[hMagic])) = magic
	return &localArena{mem: mem, lay: lay, park: newParker(size)}, nil
}

// NewLocal returns all endpoints of a fresh in-process arena of size ranks,
// endpoint i being rank i, for goroutines of this process.
func NewLocal(size int, opt Options) ([]*Endpoint, error) {
	a, err := newLocalArena(size, opt)
	if err != nil {
		return nil, err
	}
	eps := make([]*Endpoint, size)
	for r := range eps {
		e := newEndpoint(a.mem, a.lay, r, opt, true)
		e.keep, e.park = a, a.park
		if _, err := e.join(os.Getpid(), 0); err != nil {
			return nil, err
		}
		eps[r] = e
	}
	if err := setLocalCrossMemory(eps, opt); err != nil {
		return nil, err
	}
	return eps, nil
}

// JoinLocal joins rank of an in-process arena of size ranks identified by
// key: the first caller creates it, and every call returns once all size
// ranks have joined (or ctx ends, or the join timeout passes). The key can
// be reused once the arena is complete.
func JoinLocal(ctx context.Context, key string, rank, size int, opt Options) (*Endpoint, error) {
	if key == "" || len(key) > 256 {
		return nil, fmt.Errorf("%w: local key %q (want 1..256 bytes)", ErrBadName, key)
	}
	if rank < 0 || rank >= size {
		return nil, fmt.Errorf("%w: rank %d of %d", ErrBadSize, rank, size)
	}
	if err := opt.checkParent(rank, size); err != nil {
		return nil, err
	}
	localMu.Lock()
	a := localReg[key]
	if a == nil {
		var err error
		if a, err = newLocalArena(size, opt); err != nil {
			localMu.Unlock()
			return nil, err
		}
		localReg[key] = a
	} else if err := (parsedHeader{layout: a.lay}).matches(size, opt.sizes()); err != nil {
		localMu.Unlock()
		return nil, fmt.Errorf("shm: local arena %q: %w", key, err)
	}
	e := newEndpoint(a.mem, a.lay, rank, opt, true)
	e.keep, e.park = a, a.park
	if _, err := e.join(os.Getpid(), 0); err != nil {
		localMu.Unlock()
		return nil, err
	}
	a.refs++
	a.joined++
	if a.joined == size {
		delete(localReg, key)
	}
	localMu.Unlock()

	deadline := time.Now().Add(opt.joinTimeout())
	err := e.rendezvous(ctx, deadline, nil, opt)
	if err == nil {
		err = e.agreeCrossMemory(ctx, deadline, opt)
	}
	if err != nil {
		e.Close()
		localMu.Lock()
		if a.refs--; a.refs == 0 && localReg[key] == a {
			delete(localReg, key)
		}
		localMu.Unlock()
		return nil, err
	}
	return e, nil
}
