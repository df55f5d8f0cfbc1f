package collectives

import (
	"context"

	"github.com/shmcoll/shmcoll/simd"
)

// Early return. A rank whose own part of a call is done, and whose data
// the others read from the arena (its slot or its counter's line, never
// its private buffer), returns without waiting for the ranks it did not
// read from: the root of bcast and scatter, the non-roots of reduce and
// gather, a bcast non-root once it has copied the root's vector, scan's
// ranks below the last, a reduce-scatter rank whose block is empty. It leaves two things of the call's last step e
// unchecked, which settle does at the rank's next call on the
// communicator (await, the entry of every call), after a nonblocking call
// before its request completes, or at Close:
//
//   - the slot rule: the next step, e+1, writes the slot half and counter
//     line of step e-1, so every rank must have begun step e (and so have
//     finished reading step e-1) before it. A rank begins step e only
//     after its reads of step e-1, so a rank's step-e data stays in place
//     until every reader has begun step e+1, which the check of step e+2
//     waits for.
//   - the descriptors: every rank must find a mismatch in the call. settle
//     compares the descriptor of every peer that the rank did not wait for
//     in step e, and fails as the call itself would have (the error names
//     the call that mismatched, and the communicator is aborted).
//
// No rank reads mismatched data either way: a rank reads a peer's step
// data only after comparing that peer's descriptor with its own (wait),
// and a reduction's result is written only after every operand's
// descriptor was compared. A dead peer fails settle's wait within the
// liveness timeout, as any wait.

// leave ends this rank's part of step e of the current call without the
// final check: settle makes it before the rank's next use of the
// communicator.
func (c *Comm) leave(e uint64) { c.late = e }

// settle makes the check that an early return left out (see leave): it
// waits until every peer has posted step c.late and compares their
// descriptors (again, for those the step waited for). Called with no check
// outstanding it does nothing. A failure is the failure of the call that
// returned early (its collective and number).
func (c *Comm) settle(ctx context.Context) error {
	e := c.late
	if e == 0 {
		return nil
	}
	c.late = 0
	for i := 1; i < c.size; i++ {
		q := c.rank + i
		if q >= c.size {
			q -= c.size
		}
		if err := c.wait(ctx, q, e, 1); err != nil {
			return err
		}
	}
	c.synced = e
	return nil
}

// prepareSend, on a rank whose post the others wait for (send: the root of
// bcast, the non-roots of reduce, every rank of a barrier), asks at the
// call's entry for every line its first step writes: its counter's line
// (Endpoint.Prepare) and, for data that does not travel inline, the first n
// bytes of its slot half (simd.PrefetchW). The receivers hold these lines
// from the last use of the slot half and poll the counter, so each store
// must take its line back first, and the post, stored after the data,
// becomes visible only after all of them; asked for here, the transfers run
// at once and overlap the checks and the descriptor before the post. A
// prefetch changes no data: where a rank still reads the slot half (a call
// that then does not take the small-call path, see smallOK), it only has to
// fetch its lines again.
func (c *Comm) prepareSend(send bool, n int) {
	if !send {
		return
	}
	e := c.step + 1
	c.ep.Prepare(ctr(e))
	if n > tinyBytes && n <= c.half && !c.adv.over {
		simd.PrefetchW(c.slotHalf(c.rank, e)[:n])
	}
}
