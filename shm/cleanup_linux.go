package shm

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// staleAge is how old a segment without a readable header must be before
// Cleanup removes it: its creator had that long to write the header.
const staleAge = 10 * time.Minute

// Cleanup removes the calling user's segments left in /dev/shm by runs
// that crashed before all ranks joined. A segment is removed only when its
// creator and every rank that joined it are dead (or, for a segment whose
// header was never written, when it is older than ten minutes). It returns
// the paths it removed.
func Cleanup() ([]string, error) {
	ents, err := os.ReadDir(shmDir())
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	prefix := segmentPrefix()
	for _, d := range ents {
		if !strings.HasPrefix(d.Name(), prefix) {
			continue
		}
		path := filepath.Join(shmDir(), d.Name())
		if removeIfStale(path) {
			removed = append(removed, path)
		} else if _, err := os.Lstat(path); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}

// removeIfStale unlinks path if it is a segment of ours whose processes are
// all dead, and reports whether it did.
func removeIfStale(path string) bool {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != os.Getuid() {
		return false
	}
	if !segmentDead(fd, st.Size) {
		age := time.Since(time.Unix(st.Mtim.Sec, st.Mtim.Nsec))
		if hdrOK(fd, st.Size) || age < staleAge {
			return false
		}
	}
	unlinkIfSame(path, &st)
	return true
}

func hdrOK(fd int, size int64) bool {
	if size < headerBytes {
		return false
	}
	h := make([]byte, headerBytes)
	if _, err := unix.Pread(fd, h, 0); err != nil {
		return false
	}
	_, err := readHeader(h)
	return err == nil
}

// segmentDead reports whether the segment has a valid header and its
// creator and joined ranks are all gone. It reads with pread and never maps.
func segmentDead(fd int, size int64) bool {
	if size < headerBytes {
		return false
	}
	h := make([]byte, headerBytes)
	if _, err := unix.Pread(fd, h, 0); err != nil {
		return false
	}
	p, err := readHeader(h)
	if err != nil || procAlive(p.creatorPID, p.creatorStart) {
		return false
	}
	if size < int64(p.slotsOff) {
		return true
	}
	cb := make([]byte, p.ranks*ctrlStride)
	if _, err := unix.Pread(fd, cb, headerBytes); err != nil {
		return false
	}
	for r := range p.ranks {
		b := cb[r*ctrlStride:]
		if ne.Uint32(b[cState:]) == stateJoined && procAlive(int(ne.Uint32(b[cPID:])), ne.Uint64(b[cStart:])) {
			return false
		}
	}
	return true
}
