//go:build mpi

package main

/*
#include "shmcoll.h"
*/
import "C"

import (
	"fmt"
	"os"
	"strings"

	"github.com/shmcoll/shmcoll/collectives"
	"github.com/shmcoll/shmcoll/mpi"
)

// passNames name the reasons of shmcoll.h's SC_PASS_*, in order.
var passNames = [C.SC_NPASS]string{"off", "comm", "datatype", "op", "size", "fallback", "declined"}

//export shmcollFinalize
func shmcollFinalize(print C.int) {
	commMu.Lock()
	cs := comms.Load()
	comms.Store(nil)
	commMu.Unlock()
	if cs != nil {
		// Only the arenas: the MPI frees its communicators itself, and
		// freeing hier's here (collective) could meet the ranks in
		// different orders.
		for _, s := range *cs {
			if s != nil {
				s.c.Close()
			}
		}
	}
	mpi.Detach()
	if print != 0 {
		os.Stderr.WriteString(statsTable())
	}
}

// statsTable is the SHMCOLL_MPI_STATS report: one line per collective
// called, "shmcoll: <collective> served=<n> passed=<n>", then the served
// calls per algorithm (alg:<name>=<n>) and the passed ones per reason
// (pass:<reason>=<n>).
func statsTable() string {
	var b strings.Builder
	fmt.Fprintf(&b, "shmcoll: libshmcoll statistics of pid %d (served: shmcoll; passed: the MPI)\n", os.Getpid())
	for c := range collectives.Collective(C.SC_NCOLL) {
		var nserved, npassed uint64
		var algs, passes []string
		for a := range served[c] {
			if n := served[c][a].Load(); n > 0 {
				nserved += n
				name := collectives.Algorithm(a).String()
				if a == hierAlg {
					name = "hier"
				}
				algs = append(algs, fmt.Sprintf("alg:%s=%d", name, n))
			}
		}
		for r := range passNames {
			if n := uint64(C.sc_passed(C.int(c), C.int(r))); n > 0 {
				npassed += n
				passes = append(passes, fmt.Sprintf("pass:%s=%d", passNames[r], n))
			}
		}
		if nserved+npassed == 0 {
			continue
		}
		fmt.Fprintf(&b, "shmcoll: %v served=%d passed=%d", c, nserved, npassed)
		for _, s := range append(algs, passes...) {
			b.WriteString(" " + s)
		}
		b.WriteString("\n")
	}
	return b.String()
}
