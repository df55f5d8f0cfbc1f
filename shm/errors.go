package shm

import (
	"errors"
	"fmt"
)

// Sentinel errors. Errors returned by this package wrap one of them where it
// applies, so callers can test with errors.Is.
var (
	// ErrAborted is wrapped by every error that results from an abort of the
	// arena: an explicit [Endpoint.Abort] by any rank, or a peer death
	// detected by any rank.
	ErrAborted = errors.New("shm: arena aborted")
	// ErrPeerDead is wrapped (beside ErrAborted) when the abort was caused by
	// a rank that died or left the arena while another rank waited for it.
	ErrPeerDead = errors.New("shm: peer died")
	// ErrClosed is returned by operations on a closed [Endpoint].
	ErrClosed = errors.New("shm: endpoint closed")
	// ErrNotSupported is wrapped by operations the running system cannot
	// perform (futex, memfd, pidfd outside Linux).
	ErrNotSupported = errors.New("shm: not supported on this system")
	// ErrBadName is wrapped when an arena name or key is not valid.
	ErrBadName = errors.New("shm: bad arena name")
	// ErrBadHeader is wrapped when an existing segment is not a shmcoll arena,
	// is truncated, or has a layout that does not match the caller's.
	ErrBadHeader = errors.New("shm: bad arena header")
	// ErrBadSize is wrapped when a rank, size, slot size or counter index is
	// out of range, or the arena would be too large.
	ErrBadSize = errors.New("shm: bad size")
	// ErrNoSpace is wrapped when the shared-memory file system cannot hold
	// the arena (a small /dev/shm, as in a default container).
	ErrNoSpace = errors.New("shm: not enough shared memory")
	// ErrExists is wrapped when a segment of that name already exists (a
	// concurrent job with the same name, or a stale one: see [Cleanup]).
	ErrExists = errors.New("shm: arena already exists")
	// ErrRankTaken is wrapped when two endpoints join as the same rank.
	ErrRankTaken = errors.New("shm: rank already joined")
	// ErrJoinTimeout is wrapped when not all ranks joined within the join
	// timeout.
	ErrJoinTimeout = errors.New("shm: join timed out")
	// ErrNoEnv is wrapped by [ReadEnv] and [JoinEnv] when the environment
	// does not say how to join: no launcher variable is set (see
	// ErrNoLauncher), or those that are set are incomplete, malformed or of
	// a launcher ReadEnv does not read.
	ErrNoEnv = errors.New("shm: no arena in the environment")
	// ErrNoLauncher, which wraps ErrNoEnv, is wrapped by [ReadEnv] when no
	// launcher variable is set at all: the process was not started as one
	// of several ranks, and [JoinEnv] joins a world of one.
	ErrNoLauncher = fmt.Errorf("%w: no launcher", ErrNoEnv)
)

// Abort kinds stored in a rank's abort record.
const (
	abortUser     = 1 // Endpoint.Abort
	abortPeerDead = 2 // a waiter found the peer's process gone
	abortPeerLeft = 3 // a waiter found the peer's endpoint closed
)

// AbortError is the error every rank returns once the arena is aborted. It
// wraps [ErrAborted], and [ErrPeerDead] when a rank died or left.
type AbortError struct {
	// Rank is the rank that aborted the arena first.
	Rank int
	// Peer is the rank found dead or gone, or -1.
	Peer int
	// PID is the process id of Peer when it died (0 if unknown).
	PID int
	// Cause describes why Rank aborted.
	Cause string
	kind  uint32
}

func (e *AbortError) Error() string {
	switch e.kind {
	case abortPeerDead:
		return fmt.Sprintf("shm: arena aborted by rank %d: rank %d (pid %d) died", e.Rank, e.Peer, e.PID)
	case abortPeerLeft:
		return fmt.Sprintf("shm: arena aborted by rank %d: rank %d left the arena while awaited", e.Rank, e.Peer)
	}
	if e.Rank < 0 {
		return "shm: arena aborted: " + e.Cause
	}
	return fmt.Sprintf("shm: arena aborted by rank %d: %s", e.Rank, e.Cause)
}

// Is reports whether target is ErrAborted, or ErrPeerDead for a death.
func (e *AbortError) Is(target error) bool {
	switch target {
	case ErrAborted:
		return true
	case ErrPeerDead:
		return e.kind == abortPeerDead || e.kind == abortPeerLeft
	}
	return false
}
