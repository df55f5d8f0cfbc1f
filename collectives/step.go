package collectives

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/shmcoll/shmcoll/shm"
	"github.com/shmcoll/shmcoll/simd"
)

// The step protocol. Every algorithm is a sequence of steps; a step is one
// use of one half of each rank's slot (step e uses half e&1), and every
// rank goes through the same steps. In step e a rank
//
//  1. makes sure that every rank has begun step e-1 (so that every read of
//     its slot half from step e-2 is over) — known for free when step e-1
//     was "fully dependent" (this rank's result needed every rank's step
//     e-1 data), else by one load per peer;
//  2. writes the call descriptor for step e into its descriptor area and
//     its data into its slot half;
//  3. posts phases on counter e&1: value e<<16 | phase, phase >= 1, in
//     increasing order; every rank posts at least phase 1 in every step,
//     and the first post also writes the descriptor's hash into the
//     inline bytes of the counter (the same cache line, so a waiter gets
//     both with one transfer);
//  4. reads a peer's slot half only after waiting for the phase that the
//     peer posted after writing what is read, and compares the peer's
//     descriptor the first time it waits for it in the step.
//
// Counter values only increase (step × phase), so nothing is ever reset and
// there is no ABA. Within a step, each algorithm file states why a range of
// a rank's own slot half is not rewritten before its readers are done.

// ctr is the counter of step e: counters 0 and 1 alternate, so that each
// holds the descriptor of its step in its inline bytes.
func ctr(e uint64) int { return int(e & 1) }

const lineBytes = 64

func stepVal(e uint64, phase int) uint64 { return e<<16 | uint64(phase) }

// call holds the arguments of the collective being run, as raw bytes. The
// entry points fill it (Comm.start hands out the Comm's own, so that calls
// do not allocate) and pass it to the algorithm and its helpers; the step
// protocol reads only the descriptor made of it (describe).
type call struct {
	coll  Collective
	alg   Algorithm
	typ   simd.Type
	esz   int
	count int // elements: per rank (allreduce, bcast, reduce, scan) or per block (the others)
	root  int
	opID  uint64
	aux   uint64 // hash of irregular counts; alltoall: alltoallInPlace in place
	red   reducer
	send  []byte // nil: in place
	recv  []byte
	// irregular counts and displacements, in elements
	counts, displs   []int
	rcounts, rdispls []int
}

// newCall returns the Comm's call, reset for a call of coll with alg on
// type t: every field zero but those. Field by field, not a composite
// literal, which would build the call apart and copy it in.
func (c *Comm) newCall(coll Collective, alg Algorithm, t simd.Type) *call {
	a := &c.args
	a.coll, a.alg, a.typ, a.esz = coll, alg, t, t.Size()
	a.count, a.root, a.opID, a.aux = 0, 0, 0, 0
	a.red = reducer{}
	a.send, a.recv = nil, nil
	a.counts, a.displs, a.rcounts, a.rdispls = nil, nil, nil, nil
	return a
}

// callDesc is the descriptor of the call in progress, as every step of it
// publishes it: four words of the call's fields and their hash with the
// call's number (describe).
type callDesc struct {
	w    [4]uint64
	hash uint64
}

func (d *callDesc) coll() Collective { return Collective(d.w[0]) }
func (d *callDesc) alg() Algorithm   { return Algorithm(d.w[0] >> 8) }
func (d *callDesc) typ() simd.Type   { return simd.Type(d.w[0] >> 16) }

// describe makes a the call in progress, the one whose descriptor the
// following steps publish. The hash (four independent multiplies and one
// mix with the call number) covers everything but the step, which the
// counter's value carries: a peer whose counter reached step e on this
// counter is at step e (it cannot begin e+2 before this rank begins e+1).
func (c *Comm) describe(a *call) {
	c.desc.w = [4]uint64{
		uint64(a.coll) | uint64(a.alg)<<8 | uint64(a.typ)<<16 | uint64(uint32(int32(a.root)))<<32,
		uint64(a.count), a.opID, a.aux,
	}
	c.hashDesc()
}

// hashDesc sets the hash of the descriptor's words (see describe).
func (c *Comm) hashDesc() {
	w := &c.desc.w
	h := (w[0]*0x9e3779b97f4a7c15 + w[1]*0xc2b2ae3d27d4eb4f + w[2]*0x165667b19e3779f9 + w[3]*0xd6e8feb86659fd93 ^ c.seq) * 0xff51afd7ed558ccd
	c.desc.hash = (h ^ h>>29) | 1 // never 0: a zeroed line is no call
}

// scratch is per-Comm memory reused by every call, so that calls do not
// allocate.
type scratch struct {
	pre   []int    // packed prefix of the blocks' pieces in a segment, len p+1
	uoff  []int    // user offset (elements) of each block's piece in a segment
	srcs  [][]byte // k-way kernel sources, len p
	chunk [][]byte // chunks of srcs (reduceDirect), len p
	whole [][]byte // the ranks' inputs (directAllreduce), len p

	counts, displs   []int // block counts and displacements of the call
	rcounts, rdispls []int
}

func (s *scratch) init(p int) {
	s.pre = make([]int, p+1)
	s.uoff = make([]int, p)
	s.srcs = make([][]byte, p)
	s.chunk = make([][]byte, p)
	s.whole = make([][]byte, p)
	s.counts, s.displs = make([]int, p), make([]int, p)
	s.rcounts, s.rdispls = make([]int, p), make([]int, p)
}

// Descriptor layout. The full descriptor of step e is written into the
// rank's descriptor area (fullDescOff + (e&1)*lineBytes), read only to
// name a mismatch; the counter's line carries its 8-byte hash (inline bytes
// 0..8), so a waiter checks the call with the one transfer that brings the
// counter, and the other tinyBytes inline bytes carry tiny payloads.
const (
	dSeq      = 0  // u64 call sequence number
	dStep     = 8  // u64 step number
	dColl     = 16 // u8
	dAlg      = 17 // u8
	dType     = 18 // u8
	dRoot     = 20 // i32
	dCount    = 24 // u64
	dOp       = 32 // u64 operator id
	dAux      = 40 // u64 hash of irregular counts
	descBytes = 48

	// fullDescOff is where the full descriptors start in the descriptor
	// area (Split uses the bytes before it).
	fullDescOff = 256
	// tinyBytes is the payload that fits beside the descriptor hash in the
	// counter's line: vectors up to this size travel with the counter.
	tinyBytes = shm.InlineBytes - 8
)

// countCall counts a new call of coll with alg on type t, field by field (no
// Stats copies through the stack); its descriptor names them until describe.
func (c *Comm) countCall(coll Collective, alg Algorithm, t simd.Type) {
	c.seq++
	s, l := &c.total, &c.last
	s.Calls += l.Calls
	s.Steps += l.Steps
	s.Rounds += l.Rounds
	s.Sent += l.Sent
	s.Received += l.Received
	s.Reduced += l.Reduced
	*l = Stats{Calls: 1}
	c.desc = callDesc{w: [4]uint64{uint64(coll) | uint64(alg)<<8 | uint64(t)<<16}}
}

// begin starts the next step of the current call: it waits until every
// rank has begun the previous step if that is not known, writes the
// call's full descriptor for the step (see Descriptor layout) and asks for
// the counter's line, owned ahead of the post (see post). The caller then
// writes its slot half (or its tiny payload) and posts phase 1, which
// publishes the descriptor's hash.
func (c *Comm) begin(ctx context.Context) (uint64, error) {
	e := c.step + 1
	if c.synced+1 < e {
		for q := range c.size {
			if q == c.rank {
				continue
			}
			if err := c.ep.Wait(ctx, q, ctr(e-1), stepVal(e-1, 0)); err != nil {
				return e, c.fail(err)
			}
		}
		c.synced = e - 1
	}
	c.step = e
	d := (*[descBytes]byte)(c.ownDesc[int(e&1)*lineBytes:])
	le := binary.LittleEndian
	le.PutUint64(d[dSeq:], c.seq)
	le.PutUint64(d[dStep:], e)
	le.PutUint64(d[dColl:], c.desc.w[0])
	le.PutUint64(d[dCount:], c.desc.w[1])
	le.PutUint64(d[dOp:], c.desc.w[2])
	le.PutUint64(d[dAux:], c.desc.w[3])
	c.ep.Prepare(ctr(e))
	c.full = false
	return e, nil
}

// stepBuf returns rank q's buffer of step e: its tiny payload when tiny
// (the whole step's data fits in tinyBytes), else its slot half.
func (c *Comm) stepBuf(q int, e uint64, tiny bool) []byte {
	if tiny {
		return c.tiny(q, e)
	}
	return c.slotHalf(q, e)
}

// tiny returns the tiny payload bytes of rank q in step e: the inline
// bytes of q's counter after the descriptor hash. Written by q before it
// posts phase 1 of step e; reused like the slot halves (two steps later).
func (c *Comm) tiny(q int, e uint64) []byte {
	return c.ep.Inline(q, ctr(e))[8 : 8+tinyBytes : 8+tinyBytes]
}

// end closes step e: if the algorithm made this rank depend on every
// rank's step-e data (it set c.full), every rank has begun step e. It
// counts the step.
func (c *Comm) end(e uint64) {
	c.last.Steps++
	if c.full {
		c.synced = e
	}
}

// endAll posts phase of step e, waits until every rank has posted it (so
// this rank depends on every rank's step: after it, nobody reads this
// rank's data of the step any more) and closes the step.
func (c *Comm) endAll(ctx context.Context, e uint64, phase int) error {
	c.post(e, phase)
	if err := c.waitAll(ctx, e, phase); err != nil {
		return err
	}
	c.full = true
	c.end(e)
	return nil
}

// next returns the rank i after this one, (rank + i) mod p for 0 <= i <=
// p, without a division: the order in which a rank visits its peers.
func (c *Comm) next(i int) int {
	if q := c.rank + i; q < c.size {
		return q
	}
	return c.rank + i - c.size
}

// waitAll waits for phase of step e from every other rank.
func (c *Comm) waitAll(ctx context.Context, e uint64, phase int) error {
	for i := 1; i < c.size; i++ {
		if err := c.wait(ctx, c.next(i), e, phase); err != nil {
			return err
		}
	}
	return nil
}

// post publishes phase of step e. The step's first post writes the
// descriptor hash beside the counter, not begin: that store would take the
// line from the peers that poll it and delay the stores after it (the data,
// the counter); begin asks for the line (Endpoint.Prepare), ordering nothing.
func (c *Comm) post(e uint64, phase int) {
	if c.hashed != e {
		binary.LittleEndian.PutUint64(c.ep.Inline(c.rank, ctr(e)), c.desc.hash)
		c.hashed = e
	}
	c.ep.Post(ctr(e), stepVal(e, phase))
}

// wait waits until peer q has posted phase of step e, and checks q's
// descriptor.
func (c *Comm) wait(ctx context.Context, q int, e uint64, phase int) error {
	return c.waitData(ctx, q, e, phase, nil)
}

// waitData is wait before reading data, q's bytes of the phase: a small
// range (at most shm.TouchBytes) travels with the counter (WaitData). Every
// wait compares q's descriptor hash, which came with the counter (checkDesc
// names a mismatch): a record of the peers compared would cost a line.
func (c *Comm) waitData(ctx context.Context, q int, e uint64, phase int, data []byte) error {
	if len(data) > shm.TouchBytes {
		data = nil
	}
	if err := c.ep.WaitData(ctx, q, ctr(e), stepVal(e, phase), data); err != nil {
		return c.fail(err)
	}
	if binary.LittleEndian.Uint64(c.ep.Inline(q, ctr(e))) != c.desc.hash {
		return c.checkDesc(q, e)
	}
	return nil
}

// checkDesc names how q's descriptor of step e, whose hash differs from
// this rank's, differs from it.
func (c *Comm) checkDesc(q int, e uint64) error {
	o := fullDescOff + int(e&1)*lineBytes
	md, pd := c.ep.Descriptor(c.rank)[o:][:descBytes], c.ep.Descriptor(q)[o:][:descBytes]
	le := binary.LittleEndian
	u64 := func(d []byte, i int) uint64 { return le.Uint64(d[i:]) }
	root := func(d []byte) int32 { return int32(le.Uint32(d[dRoot:])) }
	coll, alg := Collective(md[dColl]), Algorithm(md[dAlg])
	var what string
	switch {
	case u64(pd, dSeq) != c.seq:
		what = fmt.Sprintf("rank %d is at call %d (%v), rank %d at call %d (%v): the ranks made different numbers of calls or steps",
			c.rank, c.seq, coll, q, u64(pd, dSeq), Collective(pd[dColl]))
	case pd[dColl] != md[dColl]:
		what = fmt.Sprintf("rank %d called %v, rank %d called %v", c.rank, coll, q, Collective(pd[dColl]))
	case pd[dType] != md[dType]:
		what = fmt.Sprintf("rank %d passed %v, rank %d passed %v", c.rank, simd.Type(md[dType]), q, simd.Type(pd[dType]))
	case u64(pd, dOp) != u64(md, dOp):
		what = fmt.Sprintf("ranks %d and %d passed different operators", c.rank, q)
	case u64(pd, dCount) != u64(md, dCount):
		what = fmt.Sprintf("rank %d passed count %d, rank %d count %d", c.rank, u64(md, dCount), q, u64(pd, dCount))
	case root(pd) != root(md):
		what = fmt.Sprintf("rank %d passed root %d, rank %d root %d", c.rank, root(md), q, root(pd))
	case coll == CollAlltoall && u64(pd, dAux) != u64(md, dAux):
		in, out := c.rank, q
		if u64(md, dAux) != alltoallInPlace {
			in, out = q, c.rank
		}
		what = fmt.Sprintf("rank %d called alltoall in place and rank %d did not: send nil on every rank or on none", in, out)
	case pd[dAlg] != md[dAlg] && (pd[dAlg] == byte(Direct) || alg == Direct):
		in, out := c.rank, q
		if alg != Direct {
			in, out = q, c.rank
		}
		what = fmt.Sprintf("rank %d passed buffers from Alloc and rank %d did not (rank %d chose algorithm %v, rank %d %v): a call takes arena buffers on every rank or on none",
			in, out, c.rank, alg, q, Algorithm(pd[dAlg]))
	case pd[dAlg] != md[dAlg]:
		what = fmt.Sprintf("rank %d chose algorithm %v, rank %d %v", c.rank, alg, q, Algorithm(pd[dAlg]))
	case u64(pd, dAux) != u64(md, dAux):
		what = fmt.Sprintf("ranks %d and %d passed different count vectors", c.rank, q)
	case u64(pd, dStep) != e:
		what = fmt.Sprintf("ranks %d and %d are at different steps", c.rank, q)
	default:
		what = fmt.Sprintf("rank %d's call descriptor does not match its hash (the arena was written by someone else)", q)
	}
	return c.mismatch(what)
}

// mismatch aborts the communicator with a descriptor-mismatch cause.
func (c *Comm) mismatch(what string) error {
	c.ep.Abort(fmt.Errorf("%w: %v call %d: %s", ErrMismatch, c.desc.coll(), c.seq, what))
	return c.fail(c.ep.Err())
}

// fail turns a cause into the call's error; an error that is not already
// an abort aborts the communicator so that no rank waits for this one.
func (c *Comm) fail(err error) error {
	if err == nil {
		err = ErrAborted
	}
	if !errors.Is(err, shm.ErrAborted) && !errors.Is(err, ErrClosed) {
		c.ep.Abort(fmt.Errorf("rank %d: %v call %d: %w", c.rank, c.desc.coll(), c.seq, err))
		if ae := c.ep.Err(); ae != nil {
			err = fmt.Errorf("%w (%w)", err, ae)
		}
	}
	return &Error{Rank: c.rank, Coll: c.desc.coll(), Seq: c.seq, Err: err}
}

// slotHalf returns the half of rank q's slot that step e uses.
func (c *Comm) slotHalf(q int, e uint64) []byte {
	s := c.ep.Slot(q)
	o := int(e&1) * c.half
	return s[o : o+c.half : o+c.half]
}

// run runs the call a with the algorithm f, recovering a panic of a user
// operator into an abort.
func (c *Comm) run(ctx context.Context, a *call, f impl) (err error) {
	if a.red.user != nil {
		defer func() {
			if r := recover(); r != nil {
				err = c.fail(fmt.Errorf("user operator panicked: %v", r))
			}
		}()
	}
	c.describe(a)
	return f(c, ctx, a)
}
