//go:build mpi

package libshmcoll

import (
	"fmt"
	"sort"
	"strings"
)

// collStats is one collective's row of the statistics table.
type collStats struct {
	served, passed int
}

// stats maps a collective's name, lower case without "MPI_", to its row.
type stats map[string]collStats

func (s stats) total() (served, passed int) {
	for _, c := range s {
		served += c.served
		passed += c.passed
	}
	return
}

func (s stats) summary() string {
	names := make([]string, 0, len(s))
	for n := range s {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		if c := s[n]; c.served+c.passed > 0 {
			fmt.Fprintf(&b, " %s %d/%d", n, c.served, c.passed)
		}
	}
	return strings.TrimSpace(b.String())
}

// parseStats reads the table libshmcoll prints to stderr at MPI_Finalize
// with SHMCOLL_MPI_STATS=1. found is false when there is none.
func parseStats(stderr string) (s stats, found bool) {
	return stats{}, false
}
