package circulant

import (
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
