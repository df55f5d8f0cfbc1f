package circulant

import (
	"fmt"
	"runtime"
	"sync"
)

// VerifySchedules computes the baseblock, receive and send schedules of
// every rank of p and checks the four correctness conditions of [BC]
// section 2:
//
//  1. recv_r[k] = send_f[k] with f = (r - skip[k]) mod p: what r receives
//     is what its from-rank sends;
//  2. send_r[k] = recv_t[k] with t = (r + skip[k]) mod p;
//  3. for r > 0 the receive schedule is b and the q-1 blocks -1..-q other
//     than b-q (b = baseblock(r) in [0, q)), and b arrives in the round of
//     the largest skip index of r's canonical decomposition; the root's
//     receive schedule is a permutation of -1..-q and its baseblock is q;
//  4. for r > 0, send_r[k] is b-q or a block received in an earlier round
//     of the phase (recv_r[j], j < k); the root sends block k in round k.
//
// It uses GOMAXPROCS goroutines and 2pq bytes of memory.
func VerifySchedules(p int) error {
	_, err := verifySchedules(p, runtime.GOMAXPROCS(0))
	return err
}

// scheduleStats is what verifySchedules observed.
type scheduleStats struct {
	maxViolations int // receive-schedule look-ups of one rank's send schedule
	violations    int // in total
}

func verifySchedules(p, workers int) (scheduleStats, error) {
	var st scheduleStats
	s, err := NewSchedules(p)
	if err != nil {
		return st, err
	}
	q := s.q
	if q == 0 {
		if s.Baseblock(0) != 0 {
			return st, verifyErr("p = 1: root baseblock %d", s.Baseblock(0))
		}
		return st, nil
	}
	recv := make([]int8, p*q)
	send := make([]int8, p*q)
	base := make([]int8, p)
	if workers < 1 {
		workers = 1
	}
	if p < 1024 {
		workers = 1
	}
	type result struct {
		st  scheduleStats
		err error
	}
	res := make([]result, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		lo, hi := p*w/workers, p*(w+1)/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			var rb, sb [maxQ + 1]int
			for r := lo; r < hi; r++ {
				s.RecvSchedule(r, rb[:])
				v := s.sendSchedule(r, sb[:q])
				res[w].st.violations += v
				res[w].st.maxViolations = max(res[w].st.maxViolations, v)
				b := s.baseblock(r)
				base[r] = int8(b)
				for k := 0; k < q; k++ {
					recv[r*q+k] = int8(rb[k])
					send[r*q+k] = int8(sb[k])
				}
				if err := s.checkLocal(r, b, rb[:q], sb[:q]); err != nil {
					res[w].err = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, r := range res {
		if r.err != nil {
			return st, r.err
		}
		st.violations += r.st.violations
		st.maxViolations = max(st.maxViolations, r.st.maxViolations)
	}
	// Conditions 1 and 2, column by column.
	for k := 0; k < q; k++ {
		sk := s.skip[k]
		for r := 0; r < p; r++ {
			f := r - sk
			if f < 0 {
				f += p
			}
			t := r + sk
			if t >= p {
				t -= p
			}
			if recv[r*q+k] != send[f*q+k] {
				return st, verifyErr("p = %d r = %d k = %d: condition 1: receives %d, from-rank %d sends %d", p, r, k, recv[r*q+k], f, send[f*q+k])
			}
			if send[r*q+k] != recv[t*q+k] {
				return st, verifyErr("p = %d r = %d k = %d: condition 2: sends %d, to-rank %d receives %d", p, r, k, send[r*q+k], t, recv[t*q+k])
			}
		}
	}
	return st, nil
}

// checkLocal checks conditions 3 and 4 for one rank.
func (s *Schedules) checkLocal(r, b int, recv, send []int) error {
	p, q := s.p, s.q
	var seen [2*maxQ + 2]bool // seen[blk+q] for blk in -q..q-1
	if r == 0 {
		if b != q {
			return verifyErr("p = %d: root baseblock %d, want q = %d", p, b, q)
		}
		for k, v := range recv {
			if v < -q || v > -1 || seen[v+q] {
				return verifyErr("p = %d: root receive schedule is not a permutation of -1..-q (round %d: %d)", p, k, v)
			}
			seen[v+q] = true
		}
		for k, v := range send {
			if v != k {
				return verifyErr("p = %d: root sends %d in round %d", p, v, k)
			}
		}
		return nil
	}
	if b < 0 || b >= q {
		return verifyErr("p = %d r = %d: baseblock %d out of [0, q)", p, r, b)
	}
	for k, v := range recv {
		ok := v == b || (v >= -q && v <= -1 && v != b-q)
		if !ok || seen[v+q] {
			return verifyErr("p = %d r = %d: condition 3: round %d receives %d (baseblock %d)", p, r, k, v, b)
		}
		seen[v+q] = true
	}
	// The round of the baseblock: the largest skip index of the canonical
	// (greedy) decomposition of r, whose smallest index must be b.
	acc, first, last := 0, -1, -1
	for k := q - 1; k >= 0; k-- {
		if acc+s.skip[k] <= r {
			acc += s.skip[k]
			if first < 0 {
				first = k
			}
			last = k
			if acc == r {
				break
			}
		}
	}
	if acc != r || last != b {
		return verifyErr("p = %d r = %d: canonical decomposition ends in %d, baseblock %d", p, r, last, b)
	}
	if recv[first] != b {
		return verifyErr("p = %d r = %d: condition 3: baseblock %d not received in round %d", p, r, b, first)
	}
	for k, v := range send {
		ok := v == b-q
		for j := 0; j < k && !ok; j++ {
			ok = recv[j] == v
		}
		if !ok {
			return verifyErr("p = %d r = %d: condition 4: round %d sends %d before receiving it", p, r, k, v)
		}
	}
	return nil
}

// VerifyBroadcast runs the n-block broadcast from root among all p ranks
// and then the reduction to root (the broadcast reversed), tracking block
// indices and contributor sets, and checks: every transfer is matched by
// the peer's (same round, same block), a rank sends only blocks it holds,
// no block is received twice, every rank ends with all n blocks after
// NumRounds(n) rounds with (p-1)n transfers; in the reduction every
// non-root sends each partial block exactly once, after every
// contribution to it arrived, no contribution is counted twice, and the
// root ends with every rank's contribution to every block. Time and
// memory O(p n (q + p/64)).
func VerifyBroadcast(p, n, root int) error {
	s, err := NewSchedules(p)
	if err != nil {
		return err
	}
	if n < 1 || root < 0 || root >= p {
		return fmt.Errorf("%w: n = %d, root = %d for p = %d", ErrInvalidArgument, n, root, p)
	}
	ranks := make([]*RankSchedule, p)
	for r := range ranks {
		if ranks[r], err = s.ForRank(r, root); err != nil {
			return err
		}
	}
	nr := s.NumRounds(n)
	have := make([]bool, p*n)
	for j := 0; j < n; j++ {
		have[root*n+j] = true
	}
	moved := 0
	for i := 0; i < nr; i++ {
		for r := 0; r < p; r++ {
			br := ranks[r].BroadcastRound(n, i)
			if br.SendBlock >= 0 {
				if !have[r*n+br.SendBlock] {
					return verifyErr("broadcast p = %d n = %d root = %d round %d: rank %d sends block %d it does not hold", p, n, root, i, r, br.SendBlock)
				}
				if pr := ranks[br.To].BroadcastRound(n, i); pr.From != r || pr.RecvBlock != br.SendBlock {
					return verifyErr("broadcast p = %d n = %d round %d: rank %d sends block %d to %d, which expects block %d from %d", p, n, i, r, br.SendBlock, br.To, pr.RecvBlock, pr.From)
				}
			}
			if br.RecvBlock >= 0 {
				if pr := ranks[br.From].BroadcastRound(n, i); pr.To != r || pr.SendBlock != br.RecvBlock {
					return verifyErr("broadcast p = %d n = %d round %d: rank %d expects block %d from %d, which sends %d", p, n, i, r, br.RecvBlock, br.From, pr.SendBlock)
				}
			}
		}
		for r := 0; r < p; r++ {
			if b := ranks[r].BroadcastRound(n, i).RecvBlock; b >= 0 {
				if have[r*n+b] {
					return verifyErr("broadcast p = %d n = %d round %d: rank %d receives block %d twice", p, n, i, r, b)
				}
				have[r*n+b] = true
				moved++
			}
		}
	}
	for i, h := range have {
		if !h {
			return verifyErr("broadcast p = %d n = %d root = %d: rank %d lacks block %d", p, n, root, i/n, i%n)
		}
	}
	if moved != (p-1)*n {
		return verifyErr("broadcast p = %d n = %d: %d transfers, want %d", p, n, moved, (p-1)*n)
	}
	// The reduction, with contributor sets.
	w := (p + 63) / 64
	part := make([]uint64, p*n*w)
	for r := 0; r < p; r++ {
		for j := 0; j < n; j++ {
			part[(r*n+j)*w+r/64] |= 1 << (r % 64)
		}
	}
	done := make([]bool, p*n)
	for i := 0; i < nr; i++ {
		// First every send of the round, so that a contribution arriving in
		// the round in which its receiver sends that block is caught.
		for r := 0; r < p; r++ {
			rr := ranks[r].ReduceRound(n, i)
			if rr.SendBlock < 0 {
				continue
			}
			if r == root {
				return verifyErr("reduce p = %d n = %d round %d: the root sends block %d", p, n, i, rr.SendBlock)
			}
			if done[r*n+rr.SendBlock] {
				return verifyErr("reduce p = %d n = %d round %d: rank %d sends block %d twice", p, n, i, r, rr.SendBlock)
			}
			done[r*n+rr.SendBlock] = true
		}
		for r := 0; r < p; r++ {
			rr := ranks[r].ReduceRound(n, i)
			if rr.RecvBlock >= 0 {
				if pr := ranks[rr.From].ReduceRound(n, i); pr.To != r || pr.SendBlock != rr.RecvBlock {
					return verifyErr("reduce p = %d n = %d round %d: rank %d expects block %d from %d, which sends %d", p, n, i, r, rr.RecvBlock, rr.From, pr.SendBlock)
				}
			}
			if rr.SendBlock < 0 {
				continue
			}
			pr := ranks[rr.To].ReduceRound(n, i)
			if pr.From != r || pr.RecvBlock != rr.SendBlock {
				return verifyErr("reduce p = %d n = %d round %d: rank %d sends block %d to %d, which expects %d from %d", p, n, i, r, rr.SendBlock, rr.To, pr.RecvBlock, pr.From)
			}
			if done[rr.To*n+pr.RecvBlock] {
				return verifyErr("reduce p = %d n = %d round %d: rank %d gets a contribution to block %d after sending it", p, n, i, rr.To, pr.RecvBlock)
			}
			src := part[(r*n+rr.SendBlock)*w : (r*n+rr.SendBlock+1)*w]
			dst := part[(rr.To*n+pr.RecvBlock)*w : (rr.To*n+pr.RecvBlock+1)*w]
			for x := range dst {
				if dst[x]&src[x] != 0 {
					return verifyErr("reduce p = %d n = %d round %d: contribution counted twice at rank %d", p, n, i, rr.To)
				}
				dst[x] |= src[x]
			}
		}
	}
	for r := 0; r < p; r++ {
		for j := 0; j < n; j++ {
			if r != root && !done[r*n+j] {
				return verifyErr("reduce p = %d n = %d: rank %d never sends block %d", p, n, r, j)
			}
		}
	}
	for j := 0; j < n; j++ {
		if !isAll(part[(root*n+j)*w:(root*n+j+1)*w], p) {
			return verifyErr("reduce p = %d n = %d root = %d: block %d incomplete", p, n, root, j)
		}
	}
	return nil
}
