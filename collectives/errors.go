package collectives

import (
	"errors"
	"fmt"
	"strings"

	"github.com/shmcoll/shmcoll/shm"
)

// Sentinel errors; the errors of this package wrap them where they apply, so
// callers can test with errors.Is.
var (
	// ErrInvalidArgument is wrapped when a call's arguments are wrong on the
	// calling rank (buffer lengths, counts, root, operator for the type).
	// Such a call returns at once on that rank and aborts the communicator,
	// so that the other ranks do not wait for it forever.
	ErrInvalidArgument = errors.New("collectives: invalid argument")
	// ErrMismatch is wrapped when the ranks called different collectives, or
	// the same one with different types, operators, counts, roots or
	// algorithms. Every rank returns an error wrapping it: from the call,
	// or, on a rank that returned early from it (see [Bcast]), from its
	// next call on the communicator, the Wait of its next nonblocking
	// call, or its Close.
	ErrMismatch = errors.New("collectives: call descriptors differ between ranks")
	// ErrAborted is wrapped by every error once the communicator is aborted:
	// by a mismatch, a peer's death, a cancelled context, a panic in a user
	// operator or an explicit [Comm.Abort]. It is [shm.ErrAborted].
	ErrAborted = shm.ErrAborted
	// ErrPeerDead is wrapped (beside ErrAborted) when a rank died.
	ErrPeerDead = shm.ErrPeerDead
	// ErrClosed is returned by calls on a closed communicator.
	ErrClosed = errors.New("collectives: communicator closed")
	// ErrNotCommutative is wrapped when an algorithm that reorders operands
	// is pinned for a non-commutative user operator.
	ErrNotCommutative = errors.New("collectives: algorithm needs a commutative operator")
	// ErrHeapFull is wrapped when Alloc finds no free span of the size
	// asked for in the rank's heap (Options.HeapBytes).
	ErrHeapFull = errors.New("collectives: arena heap full")
)

// Error is the error of a failed collective call: which rank, which call,
// and why.
type Error struct {
	Rank int        // the calling rank
	Coll Collective // the collective
	Seq  uint64     // the call's sequence number on the communicator (1 = first call)
	Err  error      // the cause
}

// Error returns the message: the rank, the collective, the call number
// and the cause.
func (e *Error) Error() string {
	return fmt.Sprintf("collectives: rank %d: %v (call %d): %v", e.Rank, e.Coll, e.Seq, e.Err)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is ErrMismatch, ErrInvalidArgument or
// ErrNotCommutative and the communicator was aborted for that reason by
// some rank, so that every rank's error matches what the detecting rank
// found (errors.Is(err, ErrMismatch) holds on every rank of a mismatched
// call).
func (e *Error) Is(target error) bool {
	if target != ErrMismatch && target != ErrInvalidArgument && target != ErrNotCommutative {
		return false
	}
	var ae *shm.AbortError
	return errors.As(e.Err, &ae) && strings.Contains(ae.Cause, target.Error())
}
