package collectives

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrDeclined is wrapped by the error of an Alltoallv that the
// communicator's band (SetAlltoallvBand) declined. Every rank of the call
// returns it, no rank's receive buffer has been written, and the
// communicator stays usable: the caller moves the data another way.
var ErrDeclined = errors.New("collectives: call outside the communicator's band")

// SetAlltoallvBand makes the communicator's Alltoallv and IAlltoallv calls
// decline, with an error wrapping ErrDeclined on every rank, when keep
// reports false for the largest number of bytes one rank sends in the call.
// An alltoallv's sizes differ per rank, so no rank can decide alone; the
// first step of the call already brings every rank every rank's send and
// receive counts (the headers its mismatch check reads), so every rank
// takes the same decision there, before any data reaches a receive buffer,
// at no extra step. keep must be the same on every rank; nil, the default,
// serves every call. Not safe to call while a call is in progress.
func (c *Comm) SetAlltoallvBand(keep func(bytes int) bool) { c.a2avKeep = keep }

// a2avDecline is the decision of SetAlltoallvBand for the alltoallv whose
// first step e is checked: the headers are in c.sc.srcs (a2avCheck). A
// declined call closes step e as a finished one (every rank has begun it,
// and nobody reads past the headers) and returns the error.
func (c *Comm) a2avDecline(e uint64, esz int) error {
	if c.a2avKeep == nil {
		return nil
	}
	le, most := binary.LittleEndian, 0
	for _, h := range c.sc.srcs[:c.size] {
		n := 0
		for t := range c.size {
			n += int(le.Uint64(h[8+8*t:]))
		}
		most = max(most, n)
	}
	if c.a2avKeep(most * esz) {
		return nil
	}
	c.full = true
	c.end(e)
	return &Error{Rank: c.rank, Coll: CollAlltoallv, Seq: c.seq,
		Err: fmt.Errorf("%w: a rank sends %d bytes", ErrDeclined, most*esz)}
}
