package main

import (
	"strconv"
	"strings"
	"testing"
)

// TestMembw runs the two worker processes on small buffers and checks the
// table: a positive rate per size and the bound 4n/rate computed from it.
func TestMembw(t *testing.T) {
	code, out, errs := shmbench(t, "membw", "-sizes", "64K,1M", "-trials", "2", "-time", "20ms")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("want a header and 2 rows:\n%s", out)
	}
	for i, n := range []int64{64 << 10, 1 << 20} {
		f := strings.Fields(lines[i+1])
		if len(f) != 4 {
			t.Fatalf("row %q", lines[i+1])
		}
		rate, err1 := strconv.ParseFloat(f[1], 64)
		bound, err2 := strconv.ParseFloat(f[3], 64)
		if err1 != nil || err2 != nil || rate <= 0 {
			t.Fatalf("row %q: rate %v %v, bound %v", lines[i+1], rate, err1, err2)
		}
		// The rate is printed to 0.01 GB/s, the bound to 0.1 µs.
		if want := membwBound(n, rate*1e9); bound < want*0.995-0.1 || bound > want*1.005+0.1 {
			t.Errorf("size %d: bound %.1f, want 4n/rate = %.1f", n, bound, want)
		}
	}
}

func TestMembwBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-sizes", "x"}, {"-trials", "0"}, {"-time", "0s"}} {
		if code, out, errs := shmbench(t, append([]string{"membw"}, args...)...); code != 2 {
			t.Errorf("%v: exit %d, want 2\n%s%s", args, code, out, errs)
		}
	}
}
