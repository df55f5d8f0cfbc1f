package shm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/shmcoll/shmcoll/numa"
	"golang.org/x/sys/unix"
)

// shmRoot is the directory of named segments (tests point it elsewhere).
var shmRoot = "/dev/shm"

func shmDir() string { return shmRoot }

// errNotReady means the segment exists but its creator has not finished
// writing it (or it is a stale one awaiting replacement): try again.
var errNotReady = errors.New("shm: segment not ready")

// Join joins rank of the named arena of size ranks: the segment
// /dev/shm/shmcoll.<uid>.<name> (see [ValidName]). Rank 0 creates it
// exclusively (mode 0600), the others attach, retrying until it exists.
// Join returns once all ranks have joined; the segment is unlinked at that
// moment, so nothing is left in /dev/shm even if a rank crashes later.
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
	var fd int
	var mem []byte
	if rank == 0 {
		fd, mem, err = createNamed(path, lay)
	} else {
		watch := func() error { return opt.parentErr(nil, rank, size) }
		fd, mem, lay, err = openNamed(ctx, path, size, opt.sizes(), deadline, watch)
	}
	if err != nil {
		if errors.Is(err, ErrAborted) {
			// The parent failed: a segment whose creator died is ours to
			// remove.
			removeIfStale(path)
		}
		return nil, fmt.Errorf("shm: rank %d joining %s: %w", rank, path, err)
	}
	var st unix.Stat_t
	unix.Fstat(fd, &st)
	e, err := setup(ctx, fd, true, mem, lay, rank, opt, deadline, path)
	// A failed join leaves nothing behind: the creator removes the segment,
	// and so does any rank once the arena is aborted (a rank died or left
	// before all joined), since no one can use it any more.
	if err != nil && (rank == 0 || errors.Is(err, ErrAborted)) {
		unlinkIfSame(path, &st)
	}
	return e, err
}

// CreateFD creates an arena of size ranks in a memfd, for a launcher whose
// children inherit the file (exec.Cmd.ExtraFiles) and join it with
// [JoinFile] or [JoinEnv] (SHMCOLL_ARENA=fd:N). The caller closes the file
// once the children have started.
func CreateFD(size int, opt Options) (*os.File, error) {
	lay, err := newLayout(size, opt.sizes())
	if err != nil {
		return nil, err
	}
	fd, err := unix.MemfdCreate("shmcoll", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("shm: memfd_create: %w", err)
	}
	// Only inheritors should reach it; a memfd starts 0777.
	if err := unix.Fchmod(fd, 0o600); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("shm: fchmod memfd: %w", err)
	}
	mem, err := initArena(fd, lay, kindMemfd)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	unix.Munmap(mem)
	// Fix the size for good: no process can truncate the arena under the
	// ranks' mappings (a SIGBUS) or grow it.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("shm: sealing the memfd: %w", err)
	}
	return os.NewFile(uintptr(fd), "shmcoll-arena"), nil
}

// JoinFile joins rank of the arena held by f (made by [CreateFD]). f stays
// open; the caller may close it once JoinFile returns.
func JoinFile(ctx context.Context, f *os.File, rank, size int, opt Options) (*Endpoint, error) {
	if rank < 0 || rank >= size {
		return nil, fmt.Errorf("%w: rank %d of %d", ErrBadSize, rank, size)
	}
	if err := opt.checkParent(rank, size); err != nil {
		return nil, err
	}
	sc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var fd int
	if cerr := sc.Control(func(f uintptr) { fd, err = unix.Dup(int(f)) }); cerr != nil {
		return nil, cerr
	}
	if err != nil {
		return nil, fmt.Errorf("shm: dup arena fd: %w", err)
	}
	unix.CloseOnExec(fd)
	mem, hdr, err := attachFD(fd, size, opt.sizes())
	if errors.Is(err, errNotReady) {
		err = fmt.Errorf("%w: arena file is empty or uninitialized", ErrBadHeader)
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("shm: rank %d joining %s: %w", rank, f.Name(), err)
	}
	return setup(ctx, fd, false, mem, hdr.layout, rank, opt, time.Now().Add(opt.joinTimeout()), "")
}

// resources are what a process-mode endpoint must release; the cleanup
// safety net holds them without holding the endpoint.
type resources struct {
	mem   []byte
	peers atomic.Pointer[peerSet]
}

func (r *resources) release() error {
	if ps := r.peers.Swap(nil); ps != nil {
		ps.close()
	}
	return unix.Munmap(r.mem)
}

// setup allocates rank's slot, joins and waits for the others. It closes
// fd. path, if set, is unlinked by the last rank to join.
func setup(ctx context.Context, fd int, named bool, mem []byte, lay layout, rank int, opt Options, deadline time.Time, path string) (*Endpoint, error) {
	defer unix.Close(fd)
	e := newEndpoint(mem, lay, rank, opt, false)
	res := &resources{mem: mem}
	e.release = res.release
	e.cleanup = runtime.AddCleanup(e, func(r *resources) { r.release() }, res)

	fail := func(err error) (*Endpoint, error) {
		// Leave, so that the others stop waiting for this rank.
		e.u32(rank, cState).CompareAndSwap(stateFree, stateLeft)
		e.Close()
		return nil, fmt.Errorf("shm: rank %d: %w", rank, err)
	}
	if opt.NodeOf != nil {
		if node := opt.NodeOf(rank); node >= 0 {
			for _, b := range [][]byte{e.Slot(rank), e.Heap(rank)} {
				if len(b) == 0 {
					continue
				}
				if err := numa.BindMemory(b, node); err != nil && !errors.Is(err, numa.ErrNotSupported) {
					return fail(fmt.Errorf("placing slot and heap on node %d: %w", node, err))
				}
			}
		}
	}
	// The owner allocates its slot's and heap's pages (first touch: on its
	// own node unless bound), and a full file system fails here, not with
	// SIGBUS.
	if err := fallocate(fd, int64(lay.slotsOff+rank*lay.slotBytes), int64(lay.slotBytes)); err != nil {
		return fail(err)
	}
	if lay.heapBytes > 0 {
		if err := fallocate(fd, int64(lay.heapsOff+rank*lay.heapBytes), int64(lay.heapBytes)); err != nil {
			return fail(err)
		}
	}
	n, err := e.join(os.Getpid(), selfStart())
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("shm: rank %d: %w", rank, err)
	}
	if named && n == lay.ranks {
		unix.Unlink(path)
	}
	alive := func(r int) (int, bool) {
		pid, start := e.peerPID(r)
		return pid, procAlive(pid, start)
	}
	if err := e.rendezvous(ctx, deadline, alive, opt); err != nil {
		e.Close()
		return nil, err
	}
	ps := newPeerSet(e)
	res.peers.Store(ps)
	e.peers = ps
	if err := e.agreeCrossMemory(ctx, deadline, opt); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

func fallocate(fd int, off, n int64) error {
	for {
		err := unix.Fallocate(fd, 0, off, n)
		switch err {
		case nil, unix.EOPNOTSUPP:
			return nil
		case unix.EINTR:
			continue
		case unix.ENOSPC:
			return fmt.Errorf("%w: cannot reserve %d bytes at offset %d (%s has %d bytes free)", ErrNoSpace, n, off, shmDir(), freeBytes())
		}
		return fmt.Errorf("shm: fallocate %d bytes: %w", n, err)
	}
}

func freeBytes() int64 {
	var s unix.Statfs_t
	if unix.Statfs(shmDir(), &s) != nil {
		return -1
	}
	return int64(s.Bavail) * s.Bsize
}

// initArena sizes fd for lay, reserves the header and control blocks, maps
// it and writes the header, magic last.
func initArena(fd int, lay layout, kind int) ([]byte, error) {
	if err := unix.Ftruncate(fd, int64(lay.total)); err != nil {
		return nil, fmt.Errorf("shm: ftruncate to %d bytes: %w", lay.total, err)
	}
	if err := fallocate(fd, 0, int64(lay.slotsOff)); err != nil {
		return nil, err
	}
	mem, err := unix.Mmap(fd, 0, lay.total, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shm: mmap %d bytes: %w", lay.total, err)
	}
	lay.writeHeader(mem, kind, os.Getpid(), selfStart())
	(*atomic.Uint64)(unsafe.Pointer(&mem[hMagic])).Store(magic)
	return mem, nil
}

// createNamed creates the arena at path exclusively. The segment is made
// without a name (O_TMPFILE), sized, reserved and given its header, and
// only then linked under path, which fails if anything (a file, a symbolic
// link) is there: a creator that dies on the way leaves nothing in
// /dev/shm, and a joiner never finds a segment whose header is not yet
// written. Where O_TMPFILE or /proc is missing, the segment is created in
// place with O_CREAT|O_EXCL|O_NOFOLLOW.
func createNamed(path string, lay layout) (int, []byte, error) {
	if free := freeBytes(); free >= 0 && free < int64(lay.total) {
		return -1, nil, fmt.Errorf("%w: the arena needs %d bytes, %s has %d free", ErrNoSpace, lay.total, shmDir(), free)
	}
	exists := func() error { return fmt.Errorf("%w: %s (another job uses the name)", ErrExists, path) }
	fd, err := unix.Open(filepath.Dir(path), unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return createInPlace(path, lay, exists)
	}
	mem, err := initArena(fd, lay, kindNamed)
	if err != nil {
		unix.Close(fd)
		return -1, nil, err
	}
	link := func() error {
		return unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), unix.AT_FDCWD, path, unix.AT_SYMLINK_FOLLOW)
	}
	err = link()
	if err == unix.EEXIST && removeIfStale(path) {
		err = link()
	}
	if err != nil {
		unix.Munmap(mem)
		unix.Close(fd)
		if err == unix.EEXIST {
			return -1, nil, exists()
		}
		if err == unix.ENOENT { // no /proc: link the old way
			return createInPlace(path, lay, exists)
		}
		return -1, nil, fmt.Errorf("shm: link %s: %w", path, err)
	}
	return fd, mem, nil
}

// createInPlace creates the arena at path with O_EXCL and writes it there.
func createInPlace(path string, lay layout, exists func() error) (int, []byte, error) {
	flags := unix.O_RDWR | unix.O_CREAT | unix.O_EXCL | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Open(path, flags, 0o600)
	if err == unix.EEXIST && removeIfStale(path) {
		fd, err = unix.Open(path, flags, 0o600)
	}
	if err == unix.EEXIST {
		return -1, nil, exists()
	}
	if err != nil {
		return -1, nil, err
	}
	mem, err := initArena(fd, lay, kindNamed)
	if err != nil {
		unix.Unlink(path)
		unix.Close(fd)
		return -1, nil, err
	}
	return fd, mem, nil
}

// openNamed opens and maps the segment at path once its creator has written
// it; watch ends the wait with its error.
func openNamed(ctx context.Context, path string, size int, sz sizes, deadline time.Time, watch func() error) (int, []byte, layout, error) {
	sleep := 50 * time.Microsecond
	for {
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		var last error
		switch {
		case err == unix.ENOENT:
			last = errors.New("segment does not exist")
		case err == unix.ELOOP:
			return -1, nil, layout{}, fmt.Errorf("%w: %s is a symbolic link", ErrBadHeader, path)
		case err != nil:
			return -1, nil, layout{}, err
		default:
			mem, hdr, err := attachFD(fd, size, sz)
			if err == nil {
				return fd, mem, hdr.layout, nil
			}
			unix.Close(fd)
			if !errors.Is(err, errNotReady) {
				return -1, nil, layout{}, err
			}
			last = err
		}
		if err := ctx.Err(); err != nil {
			return -1, nil, layout{}, context.Cause(ctx)
		}
		if err := watch(); err != nil {
			return -1, nil, layout{}, err
		}
		if time.Now().After(deadline) {
			return -1, nil, layout{}, fmt.Errorf("%w: %v", ErrJoinTimeout, last)
		}
		time.Sleep(sleep)
		sleep = min(2*sleep, 5*time.Millisecond)
	}
}

// attachFD checks the file behind fd and maps it. It never maps beyond the
// end of the file, so a truncated segment is an error and not a SIGBUS.
func attachFD(fd int, size int, sz sizes) ([]byte, parsedHeader, error) {
	var p parsedHeader
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, p, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, p, fmt.Errorf("%w: not a regular file", ErrBadHeader)
	}
	if int(st.Uid) != os.Getuid() {
		return nil, p, fmt.Errorf("%w: owned by uid %d, not %d", ErrBadHeader, st.Uid, os.Getuid())
	}
	if st.Mode&0o077 != 0 {
		return nil, p, fmt.Errorf("%w: mode %#o gives others access", ErrBadHeader, st.Mode&0o777)
	}
	if st.Size < headerBytes {
		return nil, p, fmt.Errorf("%w: %d bytes", errNotReady, st.Size)
	}
	h := make([]byte, headerBytes)
	if _, err := unix.Pread(fd, h, 0); err != nil {
		return nil, p, err
	}
	if ne.Uint64(h[hMagic:]) == 0 {
		return nil, p, fmt.Errorf("%w: no header yet", errNotReady)
	}
	p, err := readHeader(h)
	if err != nil {
		return nil, p, err
	}
	// A named segment whose creator died is a stale one, about to be
	// replaced by a new rank 0: do not judge it.
	if p.kind == kindNamed && !procAlive(p.creatorPID, p.creatorStart) {
		return nil, p, fmt.Errorf("%w: stale segment (creator pid %d is gone)", errNotReady, p.creatorPID)
	}
	if err := p.matches(size, sz); err != nil {
		return nil, p, err
	}
	if st.Size < int64(p.total) {
		return nil, p, fmt.Errorf("%w: truncated: %d bytes, the layout needs %d", ErrBadHeader, st.Size, p.total)
	}
	mem, err := unix.Mmap(fd, 0, p.total, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, p, fmt.Errorf("shm: mmap %d bytes: %w", p.total, err)
	}
	return mem, p, nil
}

// unlinkIfSame removes path if it is still the file st describes.
func unlinkIfSame(path string, st *unix.Stat_t) {
	var now unix.Stat_t
	if unix.Stat(path, &now) == nil && now.Dev == st.Dev && now.Ino == st.Ino {
		unix.Unlink(path)
	}
}
