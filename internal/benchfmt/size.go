package benchfmt

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

var units = []struct {
	suffix string
	shift  uint
}{{"G", 30}, {"M", 20}, {"K", 10}}

// ParseSize parses a byte count: an integer with an optional binary suffix
// K, M or G (also KiB, MiB, GiB, KB, MB, GB, lower case too; all mean
// powers of 1024) or B.
func ParseSize(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	iec := false
	if rest, ok := strings.CutSuffix(t, "IB"); ok {
		t, iec = rest, true
	} else {
		t = strings.TrimSuffix(t, "B")
	}
	var shift uint
	for _, u := range units {
		if rest, ok := strings.CutSuffix(t, u.suffix); ok {
			t, shift = rest, u.shift
			break
		}
	}
	if iec && shift == 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad size %q (want a byte count such as 8, 64K or 256M)", s)
	}
	if n > math.MaxInt64>>shift {
		return 0, fmt.Errorf("size %q too large", s)
	}
	return n << shift, nil
}

// FormatSize writes a byte count the way ParseSize reads it, with the
// largest binary suffix that divides it exactly.
func FormatSize(n int64) string {
	for _, u := range units {
		if n != 0 && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// MaxSizes bounds how many sizes a list may expand to.
const MaxSizes = 256

// ParseSizes parses a comma-separated list of sizes and ranges. A range
// lo:hi runs over lo, 2 lo, 4 lo, ... up to hi; lo:hi:f multiplies by f
// (an integer >= 2) instead. The result keeps the order given, without
// repeats.
func ParseSizes(s string) ([]int64, error) {
	var out []int64
	seen := map[int64]bool{}
	add := func(n int64) error {
		if !seen[n] {
			if len(out) == MaxSizes {
				return fmt.Errorf("more than %d sizes in %q", MaxSizes, s)
			}
			seen[n] = true
			out = append(out, n)
		}
		return nil
	}
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("empty size list")
	}
	for _, item := range strings.Split(s, ",") {
		parts := strings.Split(item, ":")
		if len(parts) > 3 {
			return nil, fmt.Errorf("bad size range %q (want lo:hi or lo:hi:factor)", item)
		}
		lo, err := ParseSize(parts[0])
		if err != nil {
			return nil, err
		}
		if len(parts) == 1 {
			if err := add(lo); err != nil {
				return nil, err
			}
			continue
		}
		hi, err := ParseSize(parts[1])
		if err != nil {
			return nil, err
		}
		f := int64(2)
		if len(parts) == 3 {
			if f, err = strconv.ParseInt(parts[2], 10, 64); err != nil || f < 2 {
				return nil, fmt.Errorf("bad factor in size range %q (want an integer >= 2)", item)
			}
		}
		if lo < 1 || hi < lo {
			return nil, fmt.Errorf("bad size range %q (want 1 <= lo <= hi)", item)
		}
		for n := lo; n <= hi; n *= f {
			if err := add(n); err != nil {
				return nil, err
			}
			if n > hi/f {
				break
			}
		}
	}
	return out, nil
}
