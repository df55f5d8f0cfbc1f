package main

import (
	"fmt"
	"slices"

	"github.com/shmcoll/shmcoll/internal/benchfmt"
)

// benchColls are the collectives shmbench run measures, in docs/DESIGN.md's
// names and order.
var benchColls = []string{
	"allreduce", "reduce_scatter_block", "reduce_scatter", "allgather", "allgatherv",
	"bcast", "reduce", "barrier", "alltoall", "alltoallv", "scatter", "gather", "scan", "exscan",
}

// reducing reports whether coll combines values with an operator.
func reducing(coll string) bool {
	switch coll {
	case "allreduce", "reduce_scatter_block", "reduce_scatter", "reduce", "scan", "exscan":
		return true
	}
	return false
}

// layout is how one case cuts its vector: every length is in elements.
// The v-variants (reduce_scatter, allgatherv, alltoallv) use irregular
// block counts, the same on every rank.
type layout struct {
	coll  string
	p     int
	root  int   // of bcast, reduce, scatter and gather
	n     int   // elements of the full vector (docs/DESIGN.md's bytes / element size)
	m     int   // elements of a regular block (n/p for the blocked collectives)
	count []int // irregular block counts (v-variants); for alltoallv, row of rank 0
	displ []int // packed displacements of count

	// alltoallv: scount[q][t] elements go from rank q to rank t, from
	// sdispl[q][t] of q's send buffer to rdispl[t][q] of t's receive
	// buffer (both packed in rank order).
	scount, sdispl, rcount, rdispl [][]int
}

// newLayout rounds bytes to whole elements (and, for the blocked
// collectives, to whole blocks of at least one element).
func newLayout(coll string, bytes int64, esz, p int) layout {
	n := int(bytes / int64(esz))
	l := layout{coll: coll, p: p}
	switch coll {
	case "barrier":
		return l
	case "reduce_scatter_block", "allgather", "alltoall", "scatter", "gather":
		l.m = max(n/p, 1)
		l.n = l.m * p
	case "reduce_scatter", "allgatherv", "alltoallv":
		l.m = max(n/p, 1)
		l.count, l.displ = irregular(l.m, p, 0)
		l.n = l.displ[p-1] + l.count[p-1]
		if coll == "alltoallv" {
			l.matrix()
		}
	default:
		l.n = max(n, 1)
	}
	return l
}

// irregular returns p block counts around m (from m/2 up to m/2+m, rotated
// by shift) and their packed displacements. The counts of any rotation
// are the same multiset, so every rank of an alltoallv sends and receives
// the same total.
func irregular(m, p, shift int) (count, displ []int) {
	count, displ = make([]int, p), make([]int, p)
	for j := range p {
		k := (j + shift) % p
		if p > 1 {
			count[j] = m/2 + k*m/(p-1)
		} else {
			count[j] = m
		}
		if j > 0 {
			displ[j] = displ[j-1] + count[j-1]
		}
	}
	return count, displ
}

// matrix fills the alltoallv counts: rank q sends the counts of
// irregular rotated by q, so every rank sends and receives l.n elements.
func (l *layout) matrix() {
	p := l.p
	l.scount, l.sdispl = make([][]int, p), make([][]int, p)
	l.rcount, l.rdispl = make([][]int, p), make([][]int, p)
	for q := range p {
		l.scount[q], l.sdispl[q] = irregular(l.m, p, q)
	}
	for t := range p {
		l.rcount[t], l.rdispl[t] = make([]int, p), make([]int, p)
		for q := range p {
			l.rcount[t][q] = l.scount[q][t]
			if q > 0 {
				l.rdispl[t][q] = l.rdispl[t][q-1] + l.rcount[t][q-1]
			}
		}
	}
}

// bytes is the case's size as docs/DESIGN.md counts it.
func (l layout) bytes(esz int) int64 { return int64(l.n) * int64(esz) }

// sendLen and recvLen are the lengths of rank r's buffers (recv of bcast
// is its one buffer; 0 means the rank passes nil).
func (l layout) sendLen(r int) int {
	switch l.coll {
	case "barrier", "bcast":
		return 0
	case "reduce_scatter_block", "reduce_scatter", "alltoall", "alltoallv", "allreduce", "reduce", "scan", "exscan":
		return l.n
	case "allgather", "gather":
		return l.m
	case "allgatherv":
		return l.count[r]
	case "scatter":
		if r == l.root {
			return l.n
		}
		return 0
	}
	panic("shmbench: no layout for " + l.coll)
}

func (l layout) recvLen(r int) int {
	switch l.coll {
	case "barrier":
		return 0
	case "reduce_scatter_block", "scatter":
		return l.m
	case "reduce_scatter":
		return l.count[r]
	case "gather", "reduce":
		if r == l.root {
			return l.n
		}
		return 0
	}
	return l.n
}

// input is the length of the vector rank q contributes: its send buffer,
// or, for bcast, the root's buffer.
func (l layout) inputLen(q int) int {
	if l.coll == "bcast" {
		if q == l.root {
			return l.n
		}
		return 0
	}
	return l.sendLen(q)
}

// source says where element i of rank r's result comes from: for a
// reducing collective, element j of the inputs of ranks qlo..qhi-1
// combined; otherwise element j of rank qlo's input (qhi = qlo+1). ok is
// false for an element with no defined value (exscan on rank 0).
func (l layout) source(r, i int) (qlo, qhi, j int, ok bool) {
	switch l.coll {
	case "allreduce", "reduce":
		return 0, l.p, i, true
	case "scan":
		return 0, r + 1, i, true
	case "exscan":
		return 0, r, i, r > 0
	case "reduce_scatter_block":
		return 0, l.p, r*l.m + i, true
	case "reduce_scatter":
		return 0, l.p, l.displ[r] + i, true
	case "bcast":
		return l.root, l.root + 1, i, true
	case "scatter":
		return l.root, l.root + 1, r*l.m + i, true
	case "allgather", "gather":
		return i / l.m, i/l.m + 1, i % l.m, true
	case "allgatherv":
		q := owner(l.displ, l.count, i)
		return q, q + 1, i - l.displ[q], true
	case "alltoall":
		q := i / l.m
		return q, q + 1, r*l.m + i%l.m, true
	case "alltoallv":
		// Rank r receives count(q, r) elements from q, packed in rank order.
		q := owner(l.rdispl[r], l.rcount[r], i)
		return q, q + 1, l.sdispl[q][r] + i - l.rdispl[r][q], true
	}
	panic("shmbench: no layout for " + l.coll)
}

// owner returns the block holding element i of a packed layout.
func owner(displ, count []int, i int) int {
	q, _ := slices.BinarySearch(displ, i+1)
	q--
	for q > 0 && count[q] == 0 { // empty blocks share a displacement
		q--
	}
	for i >= displ[q]+count[q] {
		q++
	}
	return q
}

// dest is the inverse of source for the element j of rank q's input: the
// rank that receives it (-1: every rank) and where. ok is false when the
// element reaches no rank's result (never, for the layouts here).
func (l layout) dest(q, j int) (r, i int, ok bool) {
	switch l.coll {
	case "allreduce", "scan", "exscan":
		return -1, j, true
	case "reduce":
		return l.root, j, true
	case "reduce_scatter_block":
		return j / l.m, j % l.m, true
	case "reduce_scatter":
		b := owner(l.displ, l.count, j)
		return b, j - l.displ[b], true
	case "bcast":
		return -1, j, true
	case "scatter":
		return j / l.m, j % l.m, true
	case "allgather":
		return -1, q*l.m + j, true
	case "gather":
		return l.root, q*l.m + j, true
	case "allgatherv":
		return -1, l.displ[q] + j, true
	case "alltoall":
		return j / l.m, q*l.m + j%l.m, true
	case "alltoallv":
		t := owner(l.sdispl[q], l.scount[q], j)
		return t, l.rdispl[t][q] + j - l.sdispl[q][t], true
	}
	return 0, 0, false
}

// caseSpec is one case of a sweep.
type caseSpec struct {
	coll, algo string
	bytes      int64 // requested
	lay        layout
}

// sweep lists the cases of a run on p ranks: for each collective and
// algorithm the sizes in order, skipping sizes that round to the previous
// one; barrier runs once.
func sweep(colls []string, algos func(coll string) []string, sizes []int64, esz, p int) []caseSpec {
	var out []caseSpec
	for _, coll := range colls {
		for _, algo := range algos(coll) {
			last := int64(-1)
			for _, b := range sizes {
				lay := newLayout(coll, b, esz, p)
				if got := lay.bytes(esz); got == last {
					continue
				} else {
					last = got
				}
				out = append(out, caseSpec{coll: coll, algo: algo, bytes: b, lay: lay})
				if coll == "barrier" {
					break
				}
			}
		}
	}
	return out
}

func (c caseSpec) String() string {
	return fmt.Sprintf("%s/%s/%s", c.coll, c.algo, benchfmt.FormatSize(c.bytes))
}
