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

// The size bands each collective is served in, per communicator size p
// (a number from 2, a range lo-hi or lo-inf, or "*" for every p; later
// lines override earlier ones, and every p from 64 up shares one entry),
// or for a near pair ("near": two ranks whose barrier shows that they
// share a core or its cache, timed when the communicator is set up; an
// entry for p = 2 sets the near pair's bands too, so near entries come
// after it; alltoallv has none), as up to four ranges min:max of the total
// bytes of the call's type signature (allreduce, bcast, reduce, scan,
// exscan: the vector; reduce_scatter, allgatherv: the whole vector;
// reduce_scatter_block, allgather, alltoall, gather, scatter: one rank's
// block; alltoallv: the most bytes one rank sends, which differ between
// ranks and which every rank learns in the served call's first step, so an
// alltoallv outside its band runs that step and then passes) or "none".
// The shipped bands pass alltoallv at every p: a declined call pays the
// served first step on top of the MPI's call, which at p = 2 made 16 MiB
// calls slower preloaded than plain, so serving the smaller calls, where
// the preloaded call is faster, is left to SHMCOLL_MPI_BANDS (for example
// 'alltoallv@2=1:1M').
// Calls of 0 bytes pass (alltoallv: where the band starts above 0). The
// shipped ranges (defaultBands, per MPI in link_*.go) are where shmcoll
// through this library was faster than the MPI it was built for, at p = 2
// for every p, with entries for more ranks where p = 4 and 8 differed
// (docs/PERFORMANCE.md, "libshmcoll").
// SHMCOLL_MPI_BANDS overrides entries, in the same form with ';' between
// them, or is "all" to serve every call of at least one byte:
//
//	SHMCOLL_MPI_BANDS='allreduce@2=1:inf;bcast=4K:64K,16M:inf;alltoallv=none'
const allBands = `
allreduce            *  1:inf
reduce_scatter_block *  1:inf
reduce_scatter       *  1:inf
allgather            *  1:inf
allgatherv           *  1:inf
bcast                *  1:inf
reduce               *  1:inf
barrier              *  0:inf
alltoall             *  1:inf
alltoallv            *  0:inf
scatter              *  1:inf
gather               *  1:inf
scan                 *  1:inf
exscan               *  1:inf
`

// loadBands fills the C tables from the defaults, then env.
func loadBands(env string) error {
	for c := range C.SC_NCOLL {
		for p := range C.SC_BAND_P {
			for k := range C.SC_BANDS {
				C.sc_band_min[c][p][k], C.sc_band_max[c][p][k] = 1, 0 // empty
			}
		}
	}
	table := defaultBands
	if strings.TrimSpace(env) == "all" {
		table, env = allBands, ""
	}
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 3 {
			return fmt.Errorf("default bands: %q: want collective p ranges", line)
		}
		if err := setBand(f[0], f[1], f[2]); err != nil {
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
			return fmt.Errorf("%q: want collective[@p]=min:max[,min:max...] or collective[@p]=none", e)
		}
		coll, p, _ := strings.Cut(lhs, "@")
		if p == "" {
			p = "*"
		}
		if err := setBand(strings.TrimSpace(coll), p, rhs); err != nil {
			return err
		}
	}
	return nil
}

// setBand sets the ranges of coll for p ("*": every p) from
// "min:max[,min:max...]" or "none".
func setBand(coll, p, ranges string) error {
	c, err := collectives.ParseCollective(coll)
	if err != nil {
		return err
	}
	var lo, hi [C.SC_BANDS]int64
	for k := range lo {
		lo[k], hi[k] = 1, 0
	}
	if ranges = strings.TrimSpace(ranges); ranges != "none" {
		rs := strings.Split(ranges, ",")
		if len(rs) > C.SC_BANDS {
			return fmt.Errorf("%s: %q: at most %d ranges", coll, ranges, C.SC_BANDS)
		}
		for k, r := range rs {
			a, b, ok := strings.Cut(r, ":")
			if !ok {
				return fmt.Errorf("%s: range %q: want min:max", coll, r)
			}
			if lo[k], err = parseBytes(a); err != nil {
				return err
			}
			if hi[k], err = parseBytes(b); err != nil {
				return err
			}
		}
	}
	// Rows 2 to SC_BAND_P-1 are process counts, row SC_BAND_NEAR a near
	// pair, which whatever sets p = 2 sets too.
	first, last := 2, C.SC_BAND_P-1
	switch p {
	case "*":
	case "near":
		if c == collectives.CollAlltoallv {
			// Its band is decided in the served call, per p (shmcollJoin).
			return fmt.Errorf("%s@near: alltoallv has bands per process count only", coll)
		}
		first, last = C.SC_BAND_NEAR, C.SC_BAND_NEAR
	default:
		a, b, isRange := strings.Cut(p, "-")
		lo, err1 := strconv.Atoi(a)
		hi, err2 := lo, error(nil)
		if isRange && b != "inf" {
			hi, err2 = strconv.Atoi(b)
		}
		if err1 != nil || err2 != nil || lo < 2 || hi < lo {
			return fmt.Errorf("%s: process count %q: want a number from 2, a range lo-hi or lo-inf, near, or *", coll, p)
		}
		if isRange && b == "inf" {
			hi = C.SC_BAND_P - 1
		}
		first, last = min(lo, C.SC_BAND_P-1), min(hi, C.SC_BAND_P-1)
	}
	set := func(i int) {
		for k := range lo {
			C.sc_band_min[c][i][k], C.sc_band_max[c][i][k] = C.int64_t(lo[k]), C.int64_t(hi[k])
		}
	}
	for i := first; i <= last; i++ {
		set(i)
	}
	if first == 2 {
		set(C.SC_BAND_NEAR)
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

// inBand reports whether the bands serve a call of coll on p ranks with
// the given bytes (entry.c's sc_in_band, for tests), on a pair that is
// not near.
func inBand(coll collectives.Collective, p int, bytes int64) bool {
	return inBandRow(coll, min(p, C.SC_BAND_P-1), bytes)
}

// inBandNear is inBand for a near pair.
func inBandNear(coll collectives.Collective, bytes int64) bool {
	return inBandRow(coll, C.SC_BAND_NEAR, bytes)
}

func inBandRow(coll collectives.Collective, i int, bytes int64) bool {
	for k := range C.SC_BANDS {
		if bytes >= int64(C.sc_band_min[coll][i][k]) && bytes <= int64(C.sc_band_max[coll][i][k]) {
			return true
		}
	}
	return false
}
