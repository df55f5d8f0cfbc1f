package circulant

import (
	"errors"
	"fmt"
	"math/bits"
)

// ErrInvalidSkips is returned (wrapped) when a skip sequence cannot drive
// the circulant reduce-scatter for the given number of ranks.
var ErrInvalidSkips = errors.New("circulant: invalid skip sequence")

// ErrInvalidArgument is returned (wrapped) for a bad number of ranks, rank,
// root, block count or block size vector.
var ErrInvalidArgument = errors.New("circulant: invalid argument")

// CeilLog2 returns ceil(log2 p) for p >= 1 (0 for p == 1): the number of
// rounds of the halving schedules. It panics if p < 1.
func CeilLog2(p int) int {
	if p < 1 {
		panic("circulant: CeilLog2 of p < 1")
	}
	return bits.Len(uint(p - 1))
}

// HalvingSkips returns the skip sequence of [RS] Algorithms 1 and 2:
// p, ceil(p/2), ceil(p/4), ..., 1, descending, with CeilLog2(p)+1 entries.
// HalvingSkips(1) is [1]. Round k of a plan uses the pair (s[k], s[k+1]).
func HalvingSkips(p int) []int {
	mustP(p)
	s := make([]int, 0, CeilLog2(p)+1)
	s = append(s, p)
	for v := p; v > 1; {
		v = (v + 1) / 2
		s = append(s, v)
	}
	return s
}

// SkipTable returns the ascending skip table of [BC] Algorithm 2:
// skip[0] = 1, skip[k] = ceil(skip[k+1]/2), skip[q] = p, q = CeilLog2(p).
// It is [HalvingSkips] reversed.
func SkipTable(p int) []int {
	s := HalvingSkips(p)
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
	return s
}

// PowerOfTwoSkips returns the straight power-of-two halving sequence of
// [RS] Corollary 2 (Bruck et al.): p, then repeatedly the largest power of
// two smaller than the previous skip, down to 1. It has CeilLog2(p)+1
// entries.
func PowerOfTwoSkips(p int) []int {
	mustP(p)
	s := []int{p}
	for v := p; v > 1; {
		v = 1 << (bits.Len(uint(v-1)) - 1) // largest power of two < v
		s = append(s, v)
	}
	return s
}

// LinearSkips returns p, p-1, ..., 1 ([RS] Corollary 2): p-1 rounds of one
// block each, the fully connected (folklore) reduce-scatter.
func LinearSkips(p int) []int {
	mustP(p)
	s := make([]int, p)
	for i := range s {
		s[i] = p - i
	}
	return s
}

// SqrtSkips returns the square-root scheme of [RS] Corollary 2: with
// c = ceil(sqrt p), the skips p, p-c, p-2c, ... as long as they exceed c,
// then halving with rounding up from the last of them down to 1. It takes
// about sqrt(p) + log2(sqrt p) rounds, each moving at most c blocks.
func SqrtSkips(p int) []int {
	mustP(p)
	c := ceilSqrt(p)
	s := []int{p}
	for v := p - c; v > c; v -= c {
		s = append(s, v)
	}
	for v := s[len(s)-1]; v > 1; {
		v = (v + 1) / 2
		s = append(s, v)
	}
	return s
}

func ceilSqrt(p int) int {
	c := 1
	for c*c < p {
		c++
	}
	return c
}

// CheckSkips reports whether skips can drive the circulant reduce-scatter,
// allreduce, allgather and alltoall plans of this package for p ranks. The
// sequence must be strictly descending from skips[0] = p to a last entry
// of 1 (for p == 1 just [1]), every 0 < i < p must be a sum of distinct
// skips other than skips[0] ([RS] Corollary 2), and every round must move
// no more blocks than its skip: skips[k] <= 2*skips[k+1]. Without the last
// condition a rank would receive into a partial result it sends in the
// same round, and that contribution would be lost (for example p = 10 with
// 10, 4, 3, 2, 1: every i is a sum, yet the plan is wrong). The last
// condition implies the sum condition; both are checked so that the error
// names the first violation.
func CheckSkips(p int, skips []int) error {
	if p < 1 {
		return fmt.Errorf("%w: p = %d, want p >= 1", ErrInvalidSkips, p)
	}
	if len(skips) == 0 || skips[0] != p {
		return fmt.Errorf("%w: p = %d: first skip must be p, have %v", ErrInvalidSkips, p, head(skips))
	}
	if skips[len(skips)-1] != 1 {
		return fmt.Errorf("%w: p = %d: last skip must be 1, have %d", ErrInvalidSkips, p, skips[len(skips)-1])
	}
	for k := 0; k+1 < len(skips); k++ {
		if skips[k+1] >= skips[k] {
			return fmt.Errorf("%w: p = %d: skips not strictly descending at index %d (%d, %d)", ErrInvalidSkips, p, k, skips[k], skips[k+1])
		}
	}
	// Sum condition, greedily from the largest skip below p: the set of
	// sums of distinct skips s[k+1..] is every integer in [0, sum] exactly
	// when each skip is at most one more than the sum of the smaller ones.
	sum := 0
	for k := len(skips) - 1; k >= 1; k-- {
		if skips[k] > sum+1 && sum+1 < p {
			return fmt.Errorf("%w: p = %d: %d is not a sum of distinct skips", ErrInvalidSkips, p, sum+1)
		}
		sum += skips[k]
	}
	if sum < p-1 {
		return fmt.Errorf("%w: p = %d: %d is not a sum of distinct skips", ErrInvalidSkips, p, sum+1)
	}
	for k := 0; k+1 < len(skips); k++ {
		if skips[k] > 2*skips[k+1] {
			return fmt.Errorf("%w: p = %d: round %d moves %d blocks with skip %d (skips[k] > 2*skips[k+1])", ErrInvalidSkips, p, k, skips[k]-skips[k+1], skips[k+1])
		}
	}
	return nil
}

func head(s []int) []int {
	if len(s) > 8 {
		return s[:8]
	}
	return s
}

func mustP(p int) {
	if p < 1 {
		panic(fmt.Sprintf("circulant: p = %d, want p >= 1", p))
	}
}
