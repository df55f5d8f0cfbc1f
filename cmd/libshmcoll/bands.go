//go:build mpi

package main

/*
#include "shmcoll.h"
*/
import "C"

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/shmcoll/shmcoll/collectives"
)

// defaultBands are the sizes each collective is served in, per
// communicator size p ("*" for any p not listed): the total bytes of the
// call's type signature (allreduce, bcast, reduce, scan, exscan: the
// vector; reduce_scatter, allgatherv: the whole vector; reduce_scatter_block,
// allgather, alltoall, gather, scatter: one rank's block). Calls of 0
// bytes pass. alltoallv's bytes differ between ranks, so its band is all or
// nothing: served when it contains 0. Every collective is served at every
// size: shmcoll is faster than Open MPI and MPICH at the sizes and process
// counts docs/PERFORMANCE.md measures on one node. SHMCOLL_MPI_BANDS
// overrides entries, in the same form with ';' between them:
//
//	SHMCOLL_MPI_BANDS='allreduce@2=1:inf;bcast=4K:64M;alltoallv=none'
const defaultBands = `
allreduce            *  1 inf
reduce_scatter_block *  1 inf
reduce_scatter       *  1 inf
allgather            *  1 inf
allgatherv           *  1 inf
bcast                *  1 inf
reduce               *  1 inf
barrier              *  0 inf
alltoall             *  1 inf
alltoallv            *  0 inf
scatter              *  1 inf
gather               *  1 inf
scan                 *  1 inf
exscan               *  1 inf
`

// loadBands fills the C tables from the defaults, then env.
func loadBands(env string) error {
	for c := range C.SC_NCOLL {
		for p := range C.SC_BAND_P {
			C.sc_band_min[c][p], C.sc_band_max[c][p] = 1, -1 // nothing until set
		}
	}
	for _, line := range strings.Split(defaultBands, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if err := setBand(f[0], f[1], f[2], f[3]); err != nil {
			return fmt.Errorf("default bands: %w", err)
		}
	}
	for _, e := range strings.Split(env, ";") {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		lhs, rhs, ok := strings.Cut(e, "=")
		if !ok {
			return fmt.Errorf("%q: want collective[@p]=min:max or collective[@p]=none", e)
		}
		coll, p, _ := strings.Cut(lhs, "@")
		if p == "" {
			p = "*"
		}
		lo, hi := "1", "0"
		if rhs != "none" {
			if lo, hi, ok = strings.Cut(rhs, ":"); !ok {
				return fmt.Errorf("%q: want collective[@p]=min:max or collective[@p]=none", e)
			}
		}
		if err := setBand(strings.TrimSpace(coll), p, lo, hi); err != nil {
			return err
		}
	}
	return nil
}

func setBand(coll, p, lo, hi string) error {
	c, err := collectives.ParseCollective(coll)
	if err != nil {
		return err
	}
	l, err := parseBytes(lo)
	if err != nil {
		return err
	}
	h, err := parseBytes(hi)
	if err != nil {
		return err
	}
	first, last := 0, C.SC_BAND_P-1
	if p != "*" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 {
			return fmt.Errorf("process count %q: want a number from 1, or *", p)
		}
		first = min(n, C.SC_BAND_P-1)
		last = first
	}
	for i := first; i <= last; i++ {
		C.sc_band_min[c][i], C.sc_band_max[c][i] = C.int64_t(l), C.int64_t(h)
	}
	return nil
}

// parseBytes reads a size: a number with an optional K, M or G (powers of
// 1024), or inf.
func parseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "inf" {
		return math.MaxInt64, nil
	}
	mul := int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mul, s = 1<<10, s[:len(s)-1]
	case strings.HasSuffix(s, "M"):
		mul, s = 1<<20, s[:len(s)-1]
	case strings.HasSuffix(s, "G"):
		mul, s = 1<<30, s[:len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mul {
		return 0, fmt.Errorf("size %q: want a number of bytes, optionally with K, M or G, or inf", s)
	}
	return n * mul, nil
}
