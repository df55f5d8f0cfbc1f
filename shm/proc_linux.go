package shm

import (
	"bytes"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// procStat returns the state letter and start time (clock ticks after boot)
// of process pid from /proc/<pid>/stat.
func procStat(pid int) (state byte, start uint64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces and
	// parentheses: the fields that follow start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, os.ErrInvalid
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state); field 22 (starttime) is f[19].
	if len(f) < 20 || len(f[0]) != 1 {
		return 0, 0, os.ErrInvalid
	}
	start, err = strconv.ParseUint(string(f[19]), 10, 64)
	return f[0][0], start, err
}

var selfStart = sync.OnceValue(func() uint64 {
	_, s, _ := procStat(os.Getpid())
	return s
})

// procAlive reports whether process pid, started at start (0: unknown),
// still runs. A zombie counts as dead; so does a pid reused by a process
// that started at another time. When /proc cannot tell, it asks kill(pid, 0).
func procAlive(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	state, s, err := procStat(pid)
	if err != nil {
		if os.IsNotExist(err) {
			return false
		}
		return unix.Kill(pid, 0) != unix.ESRCH
	}
	if state == 'Z' || state == 'X' || state == 'x' {
		return false
	}
	return start == 0 || s == start
}

// peerSet watches the processes of an endpoint's peers through pidfds
// (immune to pid reuse once opened), or /proc where pidfds are missing.
type peerSet struct {
	pid   []int
	start []uint64
	fd    []int // pidfd, or -1
	gone  []atomic.Bool
}

func newPeerSet(e *Endpoint) *peerSet {
	ps := &peerSet{
		pid:   make([]int, e.size),
		start: make([]uint64, e.size),
		fd:    make([]int, e.size),
		gone:  make([]atomic.Bool, e.size),
	}
	for r := range e.size {
		ps.fd[r] = -1
		if r == e.rank {
			continue
		}
		ps.pid[r], ps.start[r] = e.peerPID(r)
		fd, err := unix.PidfdOpen(ps.pid[r], unix.PIDFD_NONBLOCK)
		if err == nil {
			// The pid could have been reused between the peer's death and
			// the open: the start time says whether fd is the peer.
			if !procAlive(ps.pid[r], ps.start[r]) {
				unix.Close(fd)
				ps.gone[r].Store(true)
				continue
			}
			ps.fd[r] = fd
		}
	}
	return ps
}

// dead reports whether rank r's process has exited, and its pid.
func (ps *peerSet) dead(r int) (int, bool) {
	if ps.gone[r].Load() {
		return ps.pid[r], true
	}
	if fd := ps.fd[r]; fd >= 0 {
		pfd := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd[:], 0)
		if err == nil && n > 0 && pfd[0].Revents != 0 {
			ps.gone[r].Store(true)
		}
	} else if !procAlive(ps.pid[r], ps.start[r]) {
		ps.gone[r].Store(true)
	}
	return ps.pid[r], ps.gone[r].Load()
}

func (ps *peerSet) close() {
	for r, fd := range ps.fd {
		if fd >= 0 {
			unix.Close(fd)
			ps.fd[r] = -1
		}
	}
}

// procStartOf returns pid's start time, or 0.
func procStartOf(pid int) uint64 {
	_, s, _ := procStat(pid)
	return s
}

// onlineCPUs counts the machine's online CPUs (not this process's
// affinity: a rank bound to one core shares the machine with its peers).
var onlineCPUs = sync.OnceValue(func() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return runtime.NumCPU()
	}
	if n := countCPUList(string(bytes.TrimSpace(b))); n > 0 {
		return n
	}
	return runtime.NumCPU()
})

// countCPUList counts the CPUs of a kernel cpu list such as "0-3,8,10-11";
// it returns 0 for a malformed list.
func countCPUList(s string) int {
	n := 0
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return 0
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return 0
			}
		}
		n += b - a + 1
	}
	return n
}
