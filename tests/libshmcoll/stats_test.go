//go:build mpi

package libshmcoll

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// collStats is one collective's line of the statistics.
type collStats struct {
	served, passed int
	algs           map[string]int // served calls per algorithm
	reasons        map[string]int // passed calls per reason
}

// stats maps a collective's name ("allreduce", "reduce_scatter_block", ...)
// to its line, summed over the tables printed (one per node).
type stats map[string]*collStats

func (s stats) total() (served, passed int) {
	for _, c := range s {
		served += c.served
		passed += c.passed
	}
	return
}

// reason sums the calls passed for reason over every collective.
func (s stats) reason(reason string) int {
	n := 0
	for _, c := range s {
		n += c.reasons[reason]
	}
	return n
}

func (s stats) summary() string {
	names := make([]string, 0, len(s))
	for n := range s {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, " %s %d/%d", n, s[n].served, s[n].passed)
		var rs []string
		for r, k := range s[n].reasons {
			rs = append(rs, fmt.Sprintf("%s=%d", r, k))
		}
		sort.Strings(rs)
		if len(rs) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(rs, ","))
		}
	}
	return "served/passed:" + b.String()
}

// parseStats reads what libshmcoll prints to stderr at MPI_Finalize with
// SHMCOLL_MPI_STATS=1: a heading line "shmcoll: libshmcoll statistics ...",
// then per collective called
//
//	shmcoll: <collective> served=<n> passed=<n> [alg:<name>=<n>]... [pass:<reason>=<n>]...
//
// found reports whether a heading was seen.
func parseStats(stderr string) (s stats, found bool) {
	s = stats{}
	for line := range strings.Lines(stderr) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "shmcoll: ")
		if !ok {
			continue
		}
		if strings.HasPrefix(rest, "libshmcoll statistics") {
			found = true
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 3 || !strings.HasPrefix(f[1], "served=") {
			continue
		}
		c := s[f[0]]
		if c == nil {
			c = &collStats{algs: map[string]int{}, reasons: map[string]int{}}
			s[f[0]] = c
		}
		for _, kv := range f[1:] {
			k, v, ok := strings.Cut(kv, "=")
			n, err := strconv.Atoi(v)
			if !ok || err != nil {
				continue
			}
			switch {
			case k == "served":
				c.served += n
			case k == "passed":
				c.passed += n
			case strings.HasPrefix(k, "alg:"):
				c.algs[k[4:]] += n
			case strings.HasPrefix(k, "pass:"):
				c.reasons[k[5:]] += n
			}
		}
	}
	return s, found
}

func TestParseStats(t *testing.T) {
	out := "warning: x\n" +
		"shmcoll: libshmcoll statistics of pid 12 (served: shmcoll; passed: the MPI)\n" +
		"shmcoll: allreduce served=10 passed=3 alg:ring=6 alg:hier=4 pass:size=2 pass:datatype=1\n" +
		"shmcoll: barrier served=2 passed=0 alg:dissemination=2\n" +
		"shmcoll: libshmcoll statistics of pid 14 (served: shmcoll; passed: the MPI)\n" +
		"shmcoll: allreduce served=1 passed=1 alg:ring=1 pass:fallback=1\n"
	s, found := parseStats(out)
	if !found {
		t.Fatal("no heading found")
	}
	if served, passed := s.total(); served != 13 || passed != 4 {
		t.Errorf("total %d served, %d passed; want 13, 4", served, passed)
	}
	a := s["allreduce"]
	if a == nil || a.algs["ring"] != 7 || a.algs["hier"] != 4 || a.reasons["size"] != 2 || s.reason("fallback") != 1 {
		t.Errorf("allreduce: %+v", a)
	}
	if _, found := parseStats("shmcoll: allreduce served=1 passed=0\n"); found {
		t.Error("a table without heading found")
	}
}
