//go:build !linux

package shm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/edsrzf/mmap-go"
)

// Outside Linux a named arena is a file in the temporary directory mapped
// with mmap-go; memfds, pidfds and futexes are not available.

func shmDir() string { return os.TempDir() }

var errNotReady = errors.New("shm: segment not ready")

func selfStart() uint64 { return 0 }

func onlineCPUs() int { return runtime.NumCPU() }

func procStartOf(pid int) uint64 { return 0 }

func procAlive(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	return p.Signal(syscall.Signal(0)) == nil
}

type peerSet struct{ pid []int }

func newPeerSet(e *Endpoint) *peerSet {
	ps := &peerSet{pid: make([]int, e.size)}
	for r := range e.size {
		ps.pid[r], _ = e.peerPID(r)
	}
	return ps
}

func (ps *peerSet) dead(r int) (int, bool) { return ps.pid[r], !procAlive(ps.pid[r], 0) }

func (ps *peerSet) close() {}

// Join joins rank of the named arena of size ranks; see the Linux
// documentation. Here the segment is a file in os.TempDir().
func Join(ctx context.Context, name string, rank, size int, opt Options) (*Endpoint, error) {
	path, err := SegmentPath(name)
	if err != nil {
		return nil, err
	}
	if rank < 0 || rank >= size {
		return nil, fmt.Errorf("%w: rank %d of %d", ErrBadSize, rank, size)
	}
	if err := opt.checkParent(rank, size); err != nil {
		return nil, err
	}
	lay, err := newLayout(size, opt.sizes())
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(opt.joinTimeout())
	var m mmap.MMap
	if rank == 0 {
		m, err = createFile(path, lay)
	} else {
		watch := func() error { return opt.parentErr(nil, rank, size) }
		m, lay, err = openFile(ctx, path, size, opt.sizes(), deadline, watch)
	}
	if err != nil {
		return nil, fmt.Errorf("shm: rank %d joining %s: %w", rank, path, err)
	}
	e := newEndpoint(m, lay, rank, opt, false)
	e.release = m.Unmap
	e.cleanup = runtime.AddCleanup(e, func(m mmap.MMap) { m.Unmap() }, m)
	n, err := e.join(os.Getpid(), 0)
	if err != nil {
		e.Close()
		return nil, err
	}
	if n == size {
		os.Remove(path)
	}
	alive := func(r int) (int, bool) {
		pid, _ := e.peerPID(r)
		return pid, procAlive(pid, 0)
	}
	if err := e.rendezvous(ctx, deadline, alive, opt); err != nil {
		e.Close()
		if rank == 0 {
			os.Remove(path)
		}
		return nil, err
	}
	e.peers = newPeerSet(e)
	return e, nil
}

func createFile(path string, lay layout) (mmap.MMap, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("%w: %s", ErrExists, path)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := f.Truncate(int64(lay.total)); err != nil {
		os.Remove(path)
		return nil, err
	}
	m, err := mmap.MapRegion(f, lay.total, mmap.RDWR, 0, 0)
	if err != nil {
		os.Remove(path)
		return nil, err
	}
	lay.writeHeader(m, kindNamed, os.Getpid(), 0)
	(*atomic.Uint64)(unsafe.Pointer(&m[hMagic])).Store(magic)
	return m, nil
}

func openFile(ctx context.Context, path string, size int, sz sizes, deadline time.Time, watch func() error) (mmap.MMap, layout, error) {
	for {
		m, lay, err := tryOpenFile(path, size, sz)
		if err == nil || !errors.Is(err, errNotReady) {
			return m, lay, err
		}
		if err := ctx.Err(); err != nil {
			return nil, layout{}, context.Cause(ctx)
		}
		if err := watch(); err != nil {
			return nil, layout{}, err
		}
		if time.Now().After(deadline) {
			return nil, layout{}, fmt.Errorf("%w: %v", ErrJoinTimeout, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func tryOpenFile(path string, size int, sz sizes) (mmap.MMap, layout, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, layout{}, fmt.Errorf("%w: segment does not exist", errNotReady)
	}
	if err != nil {
		return nil, layout{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, layout{}, err
	}
	if st.Size() < headerBytes {
		return nil, layout{}, fmt.Errorf("%w: %d bytes", errNotReady, st.Size())
	}
	h := make([]byte, headerBytes)
	if _, err := f.ReadAt(h, 0); err != nil {
		return nil, layout{}, err
	}
	if ne.Uint64(h[hMagic:]) == 0 {
		return nil, layout{}, fmt.Errorf("%w: no header yet", errNotReady)
	}
	p, err := readHeader(h)
	if err != nil {
		return nil, layout{}, err
	}
	if err := p.matches(size, sz); err != nil {
		return nil, layout{}, err
	}
	if st.Size() < int64(p.total) {
		return nil, layout{}, fmt.Errorf("%w: truncated: %d bytes, the layout needs %d", ErrBadHeader, st.Size(), p.total)
	}
	m, err := mmap.MapRegion(f, p.total, mmap.RDWR, 0, 0)
	return m, p.layout, err
}

// CreateFD needs memfd_create: Linux only.
func CreateFD(size int, opt Options) (*os.File, error) {
	return nil, fmt.Errorf("%w: memfd arenas", ErrNotSupported)
}

// JoinFile needs an arena made by CreateFD: Linux only.
func JoinFile(ctx context.Context, f *os.File, rank, size int, opt Options) (*Endpoint, error) {
	return nil, fmt.Errorf("%w: memfd arenas", ErrNotSupported)
}

// Cleanup removes stale segments: Linux only.
func Cleanup() ([]string, error) {
	return nil, fmt.Errorf("%w: stale segment cleanup", ErrNotSupported)
}
