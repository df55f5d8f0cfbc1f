//go:build mpi

package main

import (
	"testing"

	"github.com/shmcoll/shmcoll/collectives"
)

func TestBands(t *testing.T) {
	if err := loadBands("bcast=4K:64K,16M:inf; allreduce@2=none ;alltoallv=none"); err != nil {
		t.Fatal(err)
	}
	defer loadBands("")
	cases := []struct {
		coll  collectives.Collective
		p     int
		bytes int64
		want  bool
	}{
		{collectives.CollBcast, 3, 4095, false},
		{collectives.CollBcast, 3, 4096, true},
		{collectives.CollBcast, 100, 65536, true},
		{collectives.CollBcast, 3, 65537, false},
		{collectives.CollBcast, 3, 16 << 20, true},
		{collectives.CollAllreduce, 2, 8, false},
		{collectives.CollAllreduce, 3, 8, true},
		{collectives.CollAllreduce, 3, 0, false},
		{collectives.CollBarrier, 3, 0, true},
		{collectives.CollAlltoallv, 3, 0, false},
	}
	for _, c := range cases {
		if got := inBand(c.coll, c.p, c.bytes); got != c.want {
			t.Errorf("%v p=%d %d bytes: served %v, want %v", c.coll, c.p, c.bytes, got, c.want)
		}
	}
	if err := loadBands("allreduce@3-5=none;bcast@8-inf=none;reduce@70=none"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		coll collectives.Collective
		p    int
		want bool
	}{
		{collectives.CollAllreduce, 2, true}, {collectives.CollAllreduce, 3, false}, {collectives.CollAllreduce, 5, false},
		{collectives.CollAllreduce, 6, true}, {collectives.CollBcast, 7, true}, {collectives.CollBcast, 8, false},
		{collectives.CollBcast, 1000, false}, {collectives.CollReduce, 64, false}, {collectives.CollReduce, 63, true},
	} {
		if got := inBand(c.coll, c.p, 16<<20); got != c.want {
			t.Errorf("%v p=%d 16 MiB: served %v, want %v", c.coll, c.p, got, c.want)
		}
	}
	// The shipped bands pass alltoallv; 'alltoallv@2=1:1M' serves it at
	// p = 2 up to 1 MiB sent by any rank, and not from 3 ranks.
	if err := loadBands(""); err != nil {
		t.Fatal(err)
	}
	if inBand(collectives.CollAlltoallv, 2, 8) {
		t.Errorf("shipped bands serve alltoallv at p = 2, 8 B")
	}
	if err := loadBands("alltoallv@2=1:1M"); err != nil {
		t.Fatal(err)
	}
	if !inBand(collectives.CollAlltoallv, 2, 1<<20) || inBand(collectives.CollAlltoallv, 2, 1<<20+1) ||
		inBand(collectives.CollAlltoallv, 3, 8) {
		t.Errorf("alltoallv@2=1:1M: alltoallv at p = 2 1 MiB %v, 1 MiB + 1 %v, p = 3 8 B %v; want true, false, false",
			inBand(collectives.CollAlltoallv, 2, 1<<20), inBand(collectives.CollAlltoallv, 2, 1<<20+1), inBand(collectives.CollAlltoallv, 3, 8))
	}
	if err := loadBands("all"); err != nil {
		t.Fatal(err)
	}
	if !inBand(collectives.CollAlltoallv, 4, 0) || !inBand(collectives.CollBcast, 2, 1<<20) || inBand(collectives.CollBcast, 2, 0) {
		t.Errorf("SHMCOLL_MPI_BANDS=all does not serve every call of a byte or more")
	}
	// A near pair's bands: what sets p = 2 sets them, "near" sets them alone.
	if err := loadBands("bcast@2=64:inf;allreduce@near=1K:inf;reduce@2=1:inf;reduce@3-inf=none"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		coll  collectives.Collective
		bytes int64
		near  bool // served on a near pair
		two   bool // served at p = 2
	}{
		{collectives.CollBcast, 8, false, false}, {collectives.CollBcast, 64, true, true},
		{collectives.CollAllreduce, 512, false, true}, {collectives.CollAllreduce, 1024, true, true},
		{collectives.CollReduce, 8, true, true},
	} {
		if got := inBandNear(c.coll, c.bytes); got != c.near {
			t.Errorf("%v near pair %d bytes: served %v, want %v", c.coll, c.bytes, got, c.near)
		}
		if got := inBand(c.coll, 2, c.bytes); got != c.two {
			t.Errorf("%v p=2 %d bytes: served %v, want %v", c.coll, c.bytes, got, c.two)
		}
	}
	for _, bad := range []string{"bcast", "bcast=1", "nosuch=1:2", "bcast@0=1:2", "bcast@1=1:2", "alltoallv@near=1:2", "bcast=1:2,3:4,5:6,7:8,9:10", "bcast=x:2", "bcast@5-3=1:2", "bcast@0-3=1:2", "bcast@3-=1:2"} {
		if err := loadBands(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
