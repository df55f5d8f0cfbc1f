package circulant

import (
	"fmt"
	"runtime"
	"sync"
)

// NumRounds returns the number of rounds of the n-block broadcast of
// [BC] Algorithm 1 and of every collective derived from it (reduction,
// allgatherv, reduce-scatter): n-1+q, or 0 for p == 1. It panics if n < 1.
func (s *Schedules) NumRounds(n int) int {
	if n < 1 {
		panic(fmt.Sprintf("circulant: %d blocks, want n >= 1", n))
	}
	if s.q == 0 {
		return 0
	}
	return n - 1 + s.q
}

// VirtualRounds returns the number x of leading virtual rounds of [BC]
// Algorithm 1 for n blocks: x = (q - (n-1) mod q) mod q. They are skipped,
// so that the last real round is the last round of a phase.
func (s *Schedules) VirtualRounds(n int) int {
	if s.q == 0 {
		return 0
	}
	return (s.q - (n-1)%s.q) % s.q
}

// Round returns, for round i (0 <= i < NumRounds(n)) of the n-block
// broadcast, the round k within the phase (the skip index: peers are
// r ± skip[k]) and the block offset of the phase: in that round a rank
// sends block send[k] + offset and receives recv[k] + offset of its
// (root-relative) schedules, see [CapBlock]. With x virtual rounds, round
// i is Algorithm 1's round i+x: k = (i+x) mod q, offset = q*((i+x)/q) - x.
func (s *Schedules) Round(n, i int) (k, offset int) {
	if i < 0 || i >= s.NumRounds(n) {
		panic(fmt.Sprintf("circulant: round %d out of range [0, %d)", i, s.NumRounds(n)))
	}
	x := s.VirtualRounds(n)
	g := i + x
	return g % s.q, s.q*(g/s.q) - x
}

// CapBlock maps a scheduled block number v to a real block of an n-block
// collective: -1 (nothing to transfer) for v < 0, n-1 for v > n-1 (the
// last phase caps its blocks; this capped receipt is the only receipt of
// block n-1 for ranks with baseblock > 0, and no block is received twice),
// v otherwise.
func CapBlock(v, n int) int {
	if v < 0 {
		return -1
	}
	if v > n-1 {
		return n - 1
	}
	return v
}

// BlockRound is one rank's part of one round of an n-block collective:
// send block SendBlock to To and receive block RecvBlock from From; -1
// means no transfer in that direction.
type BlockRound struct {
	K         int // round within the phase: peers are rank ± skip[K]
	To, From  int
	SendBlock int
	RecvBlock int
}

// RankSchedule is one rank's baseblock and receive and send schedules for
// a given root: the schedules of the root-relative rank (rank-root) mod p.
// It answers the rounds of the rooted n-block collectives in O(1).
type RankSchedule struct {
	s          *Schedules
	Rank, Root int
	Baseblock  int
	Recv, Send []int // q entries each
}

// ForRank computes rank's schedules for a broadcast from root (or a
// reduction to root). O(log p).
func (s *Schedules) ForRank(rank, root int) (*RankSchedule, error) {
	if rank < 0 || rank >= s.p || root < 0 || root >= s.p {
		return nil, fmt.Errorf("%w: rank %d, root %d for p = %d", ErrInvalidArgument, rank, root, s.p)
	}
	rel := (rank - root + s.p) % s.p
	rs := &RankSchedule{s: s, Rank: rank, Root: root, Baseblock: s.baseblock(rel),
		Recv: make([]int, s.q), Send: make([]int, s.q)}
	s.RecvSchedule(rel, rs.Recv)
	s.SendSchedule(rel, rs.Send)
	return rs, nil
}

// BroadcastRound returns round i (0 <= i < NumRounds(n)) of the n-block
// broadcast from Root ([BC] Algorithm 1). Nothing is sent to the root and
// the root receives nothing. After the last round every rank holds blocks
// 0..n-1, each received exactly once.
func (rs *RankSchedule) BroadcastRound(n, i int) BlockRound {
	s := rs.s
	k, off := s.Round(n, i)
	br := BlockRound{K: k, To: s.To(rs.Rank, k), From: s.From(rs.Rank, k), SendBlock: -1, RecvBlock: -1}
	if br.To != rs.Root {
		br.SendBlock = CapBlock(rs.Send[k]+off, n)
	}
	if rs.Rank != rs.Root {
		br.RecvBlock = CapBlock(rs.Recv[k]+off, n)
	}
	return br
}

// ReduceRound returns round i (0 <= i < NumRounds(n)) of the n-block
// reduction to Root: the broadcast run backwards, round NumRounds(n)-1-i
// with every transfer reversed. The rank sends its partial result of
// SendBlock to To and reduces the partial result of RecvBlock received
// from From into its own (local accumulator on the left). Every non-root
// sends each of its n partial blocks exactly once, after all contributions
// to it have arrived; the root ends with the complete reduction.
func (rs *RankSchedule) ReduceRound(n, i int) BlockRound {
	b := rs.BroadcastRound(n, rs.s.NumRounds(n)-1-i)
	return BlockRound{K: b.K, To: b.From, From: b.To, SendBlock: b.RecvBlock, RecvBlock: b.SendBlock}
}

// Table holds the schedules of every rank of p, so that a rank can look
// up any other rank's schedules in O(1): the collectives in which every
// rank is a root (allgatherv, [BC] Algorithm 7, and reduce-scatter) need
// the schedules of all root-relative ranks. It takes 2pq+p bytes.
type Table struct {
	s          *Schedules
	base       []int8
	recv, send []int8 // [rel*q + k]
}

// NewTable computes the schedules of all ranks, using up to GOMAXPROCS
// goroutines for large p. O(p log p).
func (s *Schedules) NewTable() *Table {
	p, q := s.p, s.q
	t := &Table{s: s, base: make([]int8, p), recv: make([]int8, p*q), send: make([]int8, p*q)}
	workers := runtime.GOMAXPROCS(0)
	if p < 1<<14 {
		workers = 1
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		lo, hi := p*w/workers, p*(w+1)/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			var rb, sb [64]int
			for r := lo; r < hi; r++ {
				t.base[r] = int8(s.baseblock(r))
				s.RecvSchedule(r, rb[:])
				s.SendSchedule(r, sb[:])
				for k := 0; k < q; k++ {
					t.recv[r*q+k] = int8(rb[k])
					t.send[r*q+k] = int8(sb[k])
				}
			}
		}()
	}
	wg.Wait()
	return t
}

// Schedules returns the schedules the table was built from.
func (t *Table) Schedules() *Schedules { return t.s }

// Baseblock returns the baseblock of root-relative rank rel.
func (t *Table) Baseblock(rel int) int { return int(t.base[rel]) }

// Recv returns recv[k] of root-relative rank rel.
func (t *Table) Recv(rel, k int) int { return int(t.recv[rel*t.s.q+k]) }

// Send returns send[k] of root-relative rank rel.
func (t *Table) Send(rel, k int) int { return int(t.send[rel*t.s.q+k]) }

// AllgathervSend returns the block of root's data that rank packs for its
// to-rank in round i of the n-block allgatherv ([BC] Algorithm 7: p
// simultaneous broadcasts, one message per round), or -1 if none; the
// to-rank's own data is never sent to it. Root j's data is split into n
// blocks. In the message, blocks are packed in increasing root order.
func (t *Table) AllgathervSend(rank, root, n, i int) int {
	s := t.s
	k, off := s.Round(n, i)
	if s.To(rank, k) == root {
		return -1
	}
	return CapBlock(t.Send((rank-root+s.p)%s.p, k)+off, n)
}

// AllgathervRecv returns the block of root's data that rank unpacks from
// its from-rank's message in round i, or -1 if none (always -1 for
// root == rank).
func (t *Table) AllgathervRecv(rank, root, n, i int) int {
	s := t.s
	if root == rank {
		return -1
	}
	k, off := s.Round(n, i)
	return CapBlock(t.Recv((rank-root+s.p)%s.p, k)+off, n)
}

// ReduceScatterSend returns the block of root's part whose partial result
// rank sends to its peer in round i of the n-block reduce-scatter ([BC]:
// p simultaneous reductions, root j collecting part j), or -1. The peer is
// the from-rank of broadcast round NumRounds(n)-1-i, and so is the round's
// K: reduce-scatter round i is allgatherv round NumRounds(n)-1-i reversed.
func (t *Table) ReduceScatterSend(rank, root, n, i int) int {
	return t.AllgathervRecv(rank, root, n, t.s.NumRounds(n)-1-i)
}

// ReduceScatterRecv returns the block of root's part whose partial result
// rank receives in round i (from the to-rank of broadcast round
// NumRounds(n)-1-i) and reduces into its own, or -1.
func (t *Table) ReduceScatterRecv(rank, root, n, i int) int {
	return t.AllgathervSend(rank, root, n, t.s.NumRounds(n)-1-i)
}
