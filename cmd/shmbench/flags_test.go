package main

import (
	"errors"
	"io"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestRunAliases checks that each nccl-tests and OSU flag gives the same
// configuration as shmbench's own flag it stands for.
func TestRunAliases(t *testing.T) {
	for _, c := range []struct{ alias, own []string }{
		{[]string{"-b", "8", "-e", "1M", "-f", "4"}, []string{"-sizes", "8:1M:4"}},
		{[]string{"-b", "1k", "-e", "1g", "-f", "8"}, []string{"-sizes", "1K:1G:8"}},
		{[]string{"-b", "64"}, []string{"-sizes", "64:64M:2"}},
		{[]string{"-e", "256"}, []string{"-sizes", "8:256:2"}},
		{[]string{"-b", "32M", "-e", "32M"}, []string{"-sizes", "32M"}},
		{[]string{"-m", "4:4096"}, []string{"-sizes", "4:4K"}},
		{[]string{"-m", "1024"}, []string{"-sizes", "1:1024"}},
		{[]string{"-m", "16M:"}, []string{"-sizes", "16M:64M"}},
		{[]string{"-n", "50"}, []string{"-iters", "50"}},
		{[]string{"-i", "50"}, []string{"-iters", "50"}},
		{[]string{"-c", "1"}, []string{"-check"}},
		{[]string{"-c"}, []string{"-check"}},
		{[]string{"-c", "0"}, []string{"-check=false"}},
		{[]string{"-c=1", "-n", "3"}, []string{"-check", "-iters", "3"}},
		{[]string{"-d", "float"}, []string{"-dtype", "float32"}},
		{[]string{"-d", "double"}, []string{"-dtype", "float64"}},
		{[]string{"-d", "half"}, []string{"-dtype", "float16"}},
		{[]string{"-d", "bfloat16"}, []string{"-dtype", "bfloat16"}},
		{[]string{"-d", "int32"}, []string{"-dtype", "int32"}},
		{[]string{"-o", "max"}, []string{"-op", "max"}},
		{[]string{"-o", "prod", "-d", "int8"}, []string{"-op", "prod", "-dtype", "int8"}},
		{[]string{"-r", "1", "-coll", "bcast"}, []string{"-root", "1", "-coll", "bcast"}},
	} {
		a, err := parseRun(c.alias, io.Discard, io.Discard)
		if err != nil {
			t.Errorf("%q: %v", c.alias, err)
			continue
		}
		o, err := parseRun(c.own, io.Discard, io.Discard)
		if err != nil {
			t.Errorf("%q: %v", c.own, err)
			continue
		}
		if !reflect.DeepEqual(a, o) {
			t.Errorf("%q gives\n%+v\n%q gives\n%+v", c.alias, a, c.own, o)
		}
	}
}

// TestRunWarmIters checks -w and -x, which have no flag of shmbench's own
// (-warmup is a duration): the count reaches the timing, 0 included.
func TestRunWarmIters(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int
	}{{[]string{"-w", "7"}, 7}, {[]string{"-x", "3"}, 3}, {[]string{"-w", "0"}, 0}} {
		cfg, err := parseRun(c.args, io.Discard, io.Discard)
		if err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		if !cfg.tm.warmByCount || cfg.tm.warmIters != c.want {
			t.Errorf("%q: timing %+v, want %d warm-up iterations", c.args, cfg.tm, c.want)
		}
	}
	cfg, err := parseRun(nil, io.Discard, io.Discard)
	if err != nil || cfg.tm.warmByCount || cfg.tm.warmup != 20*time.Millisecond {
		t.Errorf("defaults: %+v, %v", cfg.tm, err)
	}
}

// TestAliasConflicts refuses an alias given with the flag it stands for.
func TestAliasConflicts(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-n", "5", "-iters", "5"}, "-n and -iters"},
		{[]string{"-n", "5", "-i", "5"}, "-n and -i"},
		{[]string{"-b", "8", "-sizes", "8"}, "-sizes"},
		{[]string{"-e", "8", "-m", "8"}, "-m"},
		{[]string{"-m", "8", "-sizes", "8"}, "-m and -sizes"},
		{[]string{"-w", "5", "-warmup", "1ms"}, "-w and -warmup"},
		{[]string{"-w", "5", "-x", "5"}, "-w and -x"},
		{[]string{"-c", "1", "-check"}, "-c and -check"},
		{[]string{"-d", "float", "-dtype", "float32"}, "-d and -dtype"},
		{[]string{"-o", "max", "-op", "max"}, "-o and -op"},
		{[]string{"-r", "1", "-root", "1"}, "-r and -root"},
		{[]string{"-n", "0"}, "-n 0"},
		{[]string{"-w", "-1"}, "-w -1"},
		{[]string{"-c", "2"}, "-c"},
		{[]string{"-f", "1"}, "factor"},
		{[]string{"-b", "1M", "-e", "1K"}, "lo <= hi"},
		{[]string{"-d", "fp8"}, "-dtype"},
		{[]string{"-o", "avgx"}, "-op"},
	} {
		_, err := parseRun(c.args, io.Discard, io.Discard)
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want a usage error naming %q", c.args, err, c.want)
		}
	}
}

// TestRunRootOutOfRange refuses a root that is not a rank, on the
// command line and against the ranks started.
func TestRunRootOutOfRange(t *testing.T) {
	code, _, errOut := shmbench(t, "run", "-np", "2", "-r", "2", "-coll", "bcast", "-sizes", "8")
	if code != 2 || !strings.Contains(errOut, "-root 2: not a rank of 2") {
		t.Errorf("exit %d: %s", code, errOut)
	}
}

// TestRunRootAndWarmup runs the rooted collectives from rank 1 with a
// fixed number of warm-up and timed iterations, every element checked.
func TestRunRootAndWarmup(t *testing.T) {
	code, out, errOut := shmbench(t, "run", "-np", "3", "-coll", "bcast,reduce,scatter,gather", "-r", "1",
		"-b", "8", "-e", "4K", "-f", "8", "-w", "2", "-n", "9", "-c", "1", "-format", "csv")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "bcast,") || strings.HasPrefix(line, "reduce,") || strings.HasPrefix(line, "scatter,") || strings.HasPrefix(line, "gather,") {
			rows++
			if !strings.Contains(line, ",9,") || !strings.HasSuffix(line, ",ok") {
				t.Errorf("row %q: want 9 iterations, checked ok", line)
			}
		}
	}
	if rows != 4*4 {
		t.Errorf("%d rows, want 16:\n%s", rows, out)
	}
}

// TestCompareAliases maps compare's aliases the same way.
func TestCompareAliases(t *testing.T) {
	for _, c := range []struct{ alias, own []string }{
		{[]string{"-b", "8", "-e", "64K", "-f", "8"}, []string{"-sizes", "8:64K:8"}},
		{[]string{"-m", "8:1K"}, []string{"-sizes", "8:1K"}},
		{[]string{"-n", "20"}, []string{"-iters", "20"}},
		{[]string{"-i", "20"}, []string{"-iters", "20"}},
		{[]string{"-d", "float"}, []string{"-dtype", "float32"}},
		{[]string{"-d", "double"}, []string{"-dtype", "float64"}},
	} {
		a, err := parseCompare(c.alias, io.Discard)
		if err != nil {
			t.Fatalf("%q: %v", c.alias, err)
		}
		o, err := parseCompare(c.own, io.Discard)
		if err != nil {
			t.Fatalf("%q: %v", c.own, err)
		}
		if !reflect.DeepEqual(a, o) {
			t.Errorf("%q gives\n%+v\n%q gives\n%+v", c.alias, a, c.own, o)
		}
	}
}

// TestTuneAliases maps tune's (-o is its output file there, not the
// operator).
func TestTuneAliases(t *testing.T) {
	for _, c := range []struct{ alias, own []string }{
		{[]string{"-b", "8", "-e", "64K", "-f", "8"}, []string{"-sizes", "8:64K:8"}},
		{[]string{"-m", "8:1K"}, []string{"-sizes", "8:1K"}},
		{[]string{"-d", "float"}, []string{"-dtype", "float32"}},
	} {
		a, err := parseTune(c.alias, io.Discard)
		if err != nil {
			t.Fatalf("%q: %v", c.alias, err)
		}
		o, err := parseTune(c.own, io.Discard)
		if err != nil {
			t.Fatalf("%q: %v", c.own, err)
		}
		a.sizesFlag, o.sizesFlag = "", "" // the spelling; the sizes are compared
		if !reflect.DeepEqual(a, o) {
			t.Errorf("%q gives\n%+v\n%q gives\n%+v", c.alias, a, c.own, o)
		}
	}
}

// TestHelp checks every command's -h: it succeeds, shows no flag that
// shmbench passes only to its own child processes, shows each default at
// most once, and says nothing about the machine it runs on.
func TestHelp(t *testing.T) {
	internal := map[string][]string{"membw": {"worker", "cpu", "size"}}
	defaults := regexp.MustCompile(`\(default`)
	for name := range commands {
		code, out, errOut := shmbench(t, name, "-h")
		help := out + errOut
		if code != 0 || !strings.Contains(strings.ToLower(help), "usage: shmbench "+name) {
			t.Errorf("%s -h: exit %d, help starts %.60q", name, code, help)
			continue
		}
		for _, f := range internal[name] {
			if strings.Contains(help, "  -"+f+" ") || strings.Contains(help, "  -"+f+"\n") {
				t.Errorf("%s -h shows the internal flag -%s", name, f)
			}
		}
		if strings.Contains(help, "internal") {
			t.Errorf("%s -h mentions internal flags:\n%s", name, help)
		}
		// A flag's entry: its line and the indented usage below it.
		for _, entry := range regexp.MustCompile(`(?m)^  -.*(\n    \t.*)*`).FindAllString(help, -1) {
			if n := len(defaults.FindAllString(entry, -1)); n > 1 {
				t.Errorf("%s -h: default shown %d times: %q", name, n, entry)
			}
		}
		for _, machine := range []string{"hypervisor", "vCPU", "this machine"} {
			if strings.Contains(help, machine) {
				t.Errorf("%s -h speaks of the machine (%q)", name, machine)
			}
		}
	}
	// run's -np defaults to the machine's CPUs (at most 8): said in words.
	_, out, errOut := shmbench(t, "run", "-h")
	if np := regexp.MustCompile(`  -np int\n.*\(default \d+\)`).FindString(out + errOut); np != "" {
		t.Errorf("run -h shows this machine's default for -np: %q", np)
	}
}
