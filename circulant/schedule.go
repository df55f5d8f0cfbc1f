package circulant

import (
	"fmt"
	"math"
)

// maxQ bounds q = CeilLog2(p) for any int p (64-bit).
const maxQ = 63

// Schedules holds the skip table of [BC] for p ranks and computes, for any
// rank, its baseblock and its receive and send schedules in O(log p) time
// without allocating ([BC] Algorithms 2 to 6). Schedules are relative to
// root 0: for root r0, rank r uses the schedules of (r - r0) mod p.
//
// In round k (0 <= k < q) of every phase of the n-block broadcast
// ([BroadcastRound]), rank r receives block recv[k] from rank
// (r - skip[k]) mod p and sends block send[k] to rank (r + skip[k]) mod p,
// both shifted by the phase's block offset; negative entries are blocks of
// earlier phases. The schedules satisfy the four correctness conditions of
// [BC] section 2 ([VerifySchedules]).
//
// A Schedules value is immutable and safe for concurrent use.
type Schedules struct {
	p, q int
	skip [64]int // skip[0..q] ascending
}

// MaxSchedulesP is the largest p [NewSchedules] accepts: the search works
// with ranks up to 2p, which must not overflow int.
const MaxSchedulesP = math.MaxInt / 4

// NewSchedules returns the schedules of 1 <= p <= [MaxSchedulesP] ranks.
func NewSchedules(p int) (*Schedules, error) {
	if p < 1 || p > MaxSchedulesP {
		return nil, fmt.Errorf("%w: p = %d, want 1 <= p <= %d", ErrInvalidArgument, p, MaxSchedulesP)
	}
	s := &Schedules{p: p, q: CeilLog2(p)}
	v := p
	for k := s.q; k >= 0; k-- {
		s.skip[k] = v
		v = (v + 1) / 2
	}
	return s, nil
}

// P returns the number of ranks.
func (s *Schedules) P() int { return s.p }

// Q returns the number of rounds of a phase, CeilLog2(p).
func (s *Schedules) Q() int { return s.q }

// Skip returns skip[k], 0 <= k <= q: skip[0] = 1, skip[q] = p.
func (s *Schedules) Skip(k int) int { return s.skip[k] }

// SkipTable returns a copy of skip[0..q], as [SkipTable](p).
func (s *Schedules) SkipTable() []int { return append([]int(nil), s.skip[:s.q+1]...) }

// To returns the rank that r sends to in round k: (r + skip[k]) mod p.
func (s *Schedules) To(r, k int) int { return (r + s.skip[k]) % s.p }

// From returns the rank that r receives from in round k: (r - skip[k]) mod p.
func (s *Schedules) From(r, k int) int { return (r - s.skip[k] + s.p) % s.p }

func (s *Schedules) checkRank(r int) {
	if r < 0 || r >= s.p {
		panic(fmt.Sprintf("circulant: rank %d out of range [0, %d)", r, s.p))
	}
}

// Baseblock returns the baseblock of rank r ([BC] Algorithm 3): the
// smallest skip index of r's canonical decomposition into distinct skips
// (greedy, largest skip first); q for the root r = 0. Rank r > 0 receives
// its baseblock in the round of the largest skip index of that
// decomposition and sends it first, in round 0 of the next phase.
func (s *Schedules) Baseblock(r int) int {
	s.checkRank(r)
	return s.baseblock(r)
}

func (s *Schedules) baseblock(r int) int {
	acc := 0
	for k := s.q - 1; k >= 0; k-- {
		if acc+s.skip[k] == r {
			return k
		}
		if acc+s.skip[k] < r {
			acc += s.skip[k]
		}
	}
	return s.q
}

// RecvSchedule writes the receive schedule of rank r, recv[k] for
// k = 0..q-1, into recv (which must have at least Q() entries) and returns
// recv[:q] ([BC] Algorithms 4 and 5). For r > 0 the entries are the
// baseblock b and the blocks -1..-q except b-q; for the root they are a
// permutation of -1..-q, which a broadcast never uses. O(log p), no
// allocation.
func (s *Schedules) RecvSchedule(r int, recv []int) []int {
	s.checkRank(r)
	recv = recv[:s.q]
	var d recvDFS
	b := s.baseblock(r)
	d.run(s, r, b, s.q)
	for k := range recv {
		recv[k] = s.recvEntry(int(d.out[k&63]), b)
	}
	return recv
}

func (s *Schedules) recvEntry(e, b int) int {
	if e == s.q {
		return b
	}
	return e - s.q
}

// recvDFS is the state of the depth-first search of [BC] Algorithms 4-5:
// a doubly linked list of the skip indices still to be assigned, and the
// target R = r + p. Indices are masked so that the compiler can drop
// bounds checks: skip indices are at most q <= 63, the list end is q+1.
type recvDFS struct {
	skip     *[64]int
	q, limit int
	target   int
	nxt, prv [128]uint8
	out      [64]uint8 // out[k] = skip index e_k found for round k
}

// run fills out[0..limit-1] with the skip indices e_k of rank r (baseblock
// b) found by the search (e_k == q stands for the baseblock, else the
// block is e_k - q). The search assigns rounds in increasing order, so it
// stops as soon as round limit-1 is assigned.
func (d *recvDFS) run(s *Schedules, r, b, limit int) {
	q := s.q
	if q == 0 {
		return
	}
	d.skip, d.q, d.limit, d.target = &s.skip, q, limit, r+s.p
	end := uint8(q + 1)
	for e := 0; e <= q; e++ {
		d.nxt[e&127] = uint8(e - 1)
		d.prv[e&127] = uint8(e + 1)
	}
	d.nxt[0] = end
	d.prv[q&127] = end
	d.nxt[end&127] = uint8(q)
	d.prv[end&127] = 0
	d.unlink(uint8(b))
	if k := d.search(0, 2*s.p, uint8(q), 0); k < limit {
		panic(fmt.Sprintf("circulant: receive schedule search found %d of %d rounds (p = %d, r = %d)", k, limit, s.p, r))
	}
}

func (d *recvDFS) unlink(e uint8) {
	n, p := d.nxt[e&127], d.prv[e&127]
	d.nxt[p&127] = n
	d.prv[n&127] = p
}

// search looks for intermediate ranks c = rp + skip[e] on the way to
// target, for rounds k, k+1, ...: the accepted rank for round k lies in
// [target - skip[k+1], target - skip[k]] (closed at the bottom, see the
// reference notes D1) and below the previously accepted one (bound).
func (d *recvDFS) search(rp, bound int, e uint8, k int) int {
	end := uint8(d.q + 1)
	for e != end {
		if k == d.limit {
			return k
		}
		c := rp + d.skip[e&63]
		if c <= d.target-d.skip[k&63] && c < bound {
			if c <= d.target-d.skip[(k+1)&63] {
				// c is too far from the target for round k: go deeper.
				k = d.search(c, bound, d.nxt[e&127], k)
				if k == d.limit {
					return k
				}
			}
			if rp > d.target-d.skip[(k+1)&63] {
				// k advanced in the recursion; the caller's candidate is the
				// one for the new round.
				return k
			}
			bound = c
			d.out[k&63] = e
			k++
			d.unlink(e)
		}
		e = d.nxt[e&127]
	}
	return k
}

// SendSchedule writes the send schedule of rank r, send[k] for
// k = 0..q-1, into send (at least Q() entries) and returns send[:q]
// ([BC] Algorithm 6). send[k] is the block that rank (r + skip[k]) mod p
// receives in round k; for the root it is k. O(log p): at most a few
// (4 in every p tested) receive-schedule look-ups, no allocation.
func (s *Schedules) SendSchedule(r int, send []int) []int {
	s.checkRank(r)
	send = send[:s.q]
	s.sendSchedule(r, send)
	return send
}

// sendSchedule is Algorithm 6 and returns the number of receive-schedule
// look-ups ("violations") it needed.
func (s *Schedules) sendSchedule(r int, send []int) (violations int) {
	q := s.q
	if q == 0 {
		return 0
	}
	if r == 0 {
		for k := range send {
			send[k] = k
		}
		return 0
	}
	sk := &s.skip
	b := s.baseblock(r)
	var d recvDFS // reused by the look-ups
	lookup := func(k int) int {
		t := (r + sk[k]) % s.p
		tb := s.baseblock(t)
		d.run(s, t, tb, k+1)
		return s.recvEntry(int(d.out[k&63]), tb)
	}
	rv, c, e := r, b, s.p
	for k := q - 1; k > 0; k-- {
		if rv < sk[k] { // lower part
			if rv+sk[k] < e || e < sk[k-1] || (k == 1 && b > 0) {
				send[k] = c
			} else {
				send[k] = lookup(k)
				violations++
			}
			if e > sk[k] {
				e = sk[k]
			}
		} else { // upper part
			c = k - q
			e -= sk[k]
			if rv > sk[k] || rv <= e || k == 1 || e < sk[k-1] {
				send[k] = c
			} else {
				send[k] = lookup(k)
				violations++
			}
			rv -= sk[k]
		}
	}
	send[0] = b - q
	return violations
}
