package tests

// Fuzz targets for what the commands and the environment parse: arena
// names (a name must never lead outside /dev/shm), SHMCOLL_* variables,
// algorithm, collective, type, operator, binding, arena-kind and policy
// names, and the size lists of shmbench. Any input gives a value that
// round-trips or an error; never a panic.

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shmcoll/shmcoll/collectives"
	"github.com/shmcoll/shmcoll/internal/benchfmt"
	"github.com/shmcoll/shmcoll/launch"
	"github.com/shmcoll/shmcoll/numa"
	"github.com/shmcoll/shmcoll/shm"
	"github.com/shmcoll/shmcoll/simd"
)

func FuzzArenaName(f *testing.F) {
	for _, s := range []string{"abc", "a/b", "..", "../../etc/passwd", "shmcoll.0.x", "shmcoll.1.x", "-x", "x-", "", strings.Repeat("z", 64), strings.Repeat("z", 65), "a\x00b", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := shm.ValidName(name)
		path, perr := shm.SegmentPath(name)
		if (err == nil) != (perr == nil) {
			t.Fatalf("ValidName(%q) = %v but SegmentPath = %v", name, err, perr)
		}
		if err != nil {
			if !errors.Is(err, shm.ErrBadName) {
				t.Fatalf("ValidName(%q) = %v, not ErrBadName", name, err)
			}
			return
		}
		if filepath.Dir(path) != "/dev/shm" || !strings.HasPrefix(filepath.Base(path), "shmcoll.") || filepath.Clean(path) != path {
			t.Fatalf("name %q leads to %q", name, path)
		}
		for _, c := range []byte(filepath.Base(path)) {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
				t.Fatalf("name %q gives path %q with byte %q", name, path, c)
			}
		}
	})
}

func FuzzEnvironment(f *testing.F) {
	f.Add("0", "2", "abc")
	f.Add("1", "2", "fd:3")
	f.Add("2", "2", "fd:-1")
	f.Add("x", "", "../x")
	f.Add("9223372036854775807", "9223372036854775807", "fd:99999999999999999999")
	f.Fuzz(func(t *testing.T, rank, size, arena string) {
		if strings.ContainsRune(rank+size+arena, 0) {
			return // not representable in an environment
		}
		t.Setenv(shm.EnvRank, rank)
		t.Setenv(shm.EnvSize, size)
		t.Setenv(shm.EnvArena, arena)
		j, err := shm.ReadEnv()
		if err != nil {
			if !errors.Is(err, shm.ErrNoEnv) && !errors.Is(err, shm.ErrBadSize) && !errors.Is(err, shm.ErrBadName) {
				t.Fatalf("ReadEnv: %v wraps no sentinel", err)
			}
			return
		}
		if j.Size < 1 || j.Rank < 0 || j.Rank >= j.Size {
			t.Fatalf("accepted rank %d of %d", j.Rank, j.Size)
		}
		if (j.FD >= 0) == (j.Name != "") {
			t.Fatalf("accepted both or neither of fd %d and name %q", j.FD, j.Name)
		}
		if j.Name != "" && shm.ValidName(j.Name) != nil {
			t.Fatalf("accepted bad name %q", j.Name)
		}
	})
}

func FuzzNames(f *testing.F) {
	for _, s := range []string{"auto", "flat", "CIRCULANT", "allreduce", "reduce_scatter", "float64", "bfloat16", "sum", "maxloc", "core", "socket", "none", "memfd", "named", "compact", "spread", "", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if a, err := collectives.ParseAlgorithm(s); err == nil {
			if b, err := collectives.ParseAlgorithm(a.String()); err != nil || b != a || !strings.EqualFold(a.String(), s) {
				t.Fatalf("algorithm %q -> %v does not round-trip", s, a)
			}
		} else if !errors.Is(err, collectives.ErrInvalidArgument) {
			t.Fatalf("ParseAlgorithm(%q): %v", s, err)
		}
		if c, err := collectives.ParseCollective(s); err == nil {
			if d, err := collectives.ParseCollective(c.String()); err != nil || d != c {
				t.Fatalf("collective %q -> %v does not round-trip", s, c)
			}
		} else if !errors.Is(err, collectives.ErrInvalidArgument) {
			t.Fatalf("ParseCollective(%q): %v", s, err)
		}
		if ty, err := simd.ParseType(s); err == nil {
			if u, err := simd.ParseType(ty.String()); err != nil || u != ty || ty.Size() <= 0 {
				t.Fatalf("type %q -> %v does not round-trip", s, ty)
			}
		}
		if op, err := simd.ParseOp(s); err == nil {
			if o, err := simd.ParseOp(op.String()); err != nil || o != op {
				t.Fatalf("operator %q -> %v does not round-trip", s, op)
			}
		}
		if b, err := launch.ParseBind(s); err == nil {
			if c, err := launch.ParseBind(b.String()); err != nil || c != b {
				t.Fatalf("bind %q -> %v does not round-trip", s, b)
			}
		}
		if k, err := launch.ParseArenaKind(s); err == nil {
			if l, err := launch.ParseArenaKind(k.String()); err != nil || l != k {
				t.Fatalf("arena kind %q -> %v does not round-trip", s, k)
			}
		}
		if p, err := numa.ParsePolicy(s); err == nil {
			if q, err := numa.ParsePolicy(p.String()); err != nil || q != p {
				t.Fatalf("policy %q -> %v does not round-trip", s, p)
			}
		}
	})
}

func FuzzSizes(f *testing.F) {
	for _, s := range []string{"8:64M:8", "8,1K,64K", "1G", "4KiB", "1:2", "0", "-1", "1K:8", "8:256M", "1:1099511627776:2", ",", "9223372036854775807G"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sizes, err := benchfmt.ParseSizes(s)
		if err != nil {
			return
		}
		seen := map[int64]bool{}
		for _, n := range sizes {
			if n < 0 || seen[n] {
				t.Fatalf("ParseSizes(%q) = %v: negative or repeated", s, sizes)
			}
			seen[n] = true
		}
		if len(sizes) > benchfmt.MaxSizes {
			t.Fatalf("ParseSizes(%q): %d sizes", s, len(sizes))
		}
	})
}

// FuzzShmrunCommandLine runs the shmrun binary on fuzzed command lines. The
// only program it can start is "prog" (/bin/true, through a PATH that holds
// nothing else; arguments with '/' are dropped), and numbers above 16 are
// not tried, so that no input starts thousands of processes. Whatever the
// flags, shmrun must end within a minute with one of its documented exit
// statuses (0, 1, 2 for bad usage, 124 for -timeout, 127 for a program not
// found), never crash, and leave nothing in /dev/shm.
func FuzzShmrunCommandLine(f *testing.F) {
	shmrun := tool(f, "cmd/shmrun")
	bin := f.TempDir()
	if err := os.Symlink("/bin/true", filepath.Join(bin, "prog")); err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{"-np 2 prog", "-np 0 prog", "-bind core -np 2 prog", "-arena named -np 3 prog",
		"-slot 64K -np 1 prog", "-timeout 1ms -np 2 prog", "-np 2", "-h", "-np 2 -map spread -bind socket prog",
		"-np 2 -grace 0s -noprefix prog x y", "-np 1 nosuchprog", "--np=3 prog", "-np 2 -slot 1G -arena memfd prog"} {
		f.Add(s)
	}
	digits := regexp.MustCompile(`[0-9]+`)
	f.Fuzz(func(t *testing.T, line string) {
		var args []string
		for _, a := range strings.Fields(line) {
			if strings.ContainsAny(a, "/\x00") {
				continue
			}
			for _, d := range digits.FindAllString(a, -1) {
				if n, err := strconv.Atoi(d); err != nil || n > 16 {
					return
				}
			}
			args = append(args, a)
		}
		if len(args) > 16 {
			return
		}
		before := shmSnapshot()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, shmrun, args...)
		cmd.Env = []string{"PATH=" + bin}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.Run()
		if ctx.Err() != nil {
			t.Fatalf("shmrun %q did not end within a minute:\n%s", args, out.String())
		}
		code := cmd.ProcessState.ExitCode()
		switch code {
		case 0, 1, 2, 124, 127:
		default:
			t.Fatalf("shmrun %q: exit status %d:\n%s", args, code, out.String())
		}
		if strings.Contains(out.String(), "panic:") || strings.Contains(out.String(), "goroutine ") {
			t.Fatalf("shmrun %q crashed:\n%s", args, out.String())
		}
		for p := range shmSnapshot() {
			if !before[p] && segmentCreator(p) == cmd.Process.Pid {
				os.Remove(p)
				t.Fatalf("shmrun %q left %s", args, p)
			}
		}
	})
}

// FuzzShmbenchSchedule runs "shmbench schedule" (pure computation, no
// processes) on fuzzed flags with numbers up to 64: exit 0 or 2 (bad
// usage), never a crash or a hang.
func FuzzShmbenchSchedule(f *testing.F) {
	if testing.Short() {
		f.Skip("builds shmbench")
	}
	bench := tool(f, "cmd/shmbench")
	for _, s := range []string{"-p 5", "-p 0", "-p 7 -rank 3 -root 2", "-p 8 -format json -coll allreduce", "-p 6 -skips sqrt",
		"-p 4 -skips zigzag", "-p 3 -rank 9", "-p -1", "-p 64 -skips linear -format json"} {
		f.Add(s)
	}
	digits := regexp.MustCompile(`[0-9]+`)
	f.Fuzz(func(t *testing.T, line string) {
		args := []string{"schedule"}
		for _, a := range strings.Fields(line) {
			if strings.Contains(a, "\x00") {
				return // not representable in argv
			}
			for _, d := range digits.FindAllString(a, -1) {
				if n, err := strconv.Atoi(d); err != nil || n > 64 {
					return
				}
			}
			args = append(args, a)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bench, args...)
		out, _ := cmd.CombinedOutput()
		if ctx.Err() != nil {
			t.Fatalf("shmbench %q did not end within a minute", args)
		}
		if code := cmd.ProcessState.ExitCode(); code != 0 && code != 2 || bytes.Contains(out, []byte("panic:")) {
			t.Fatalf("shmbench %q: exit %d:\n%s", args, code, out)
		}
	})
}
