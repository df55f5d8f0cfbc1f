package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/shmcoll/shmcoll/collectives"
)

// TestSelectCommand: shmbench select prints the decision and its reason,
// and rejects a bad collective.
func TestSelectCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if rc := runSelect([]string{"-coll", "allreduce", "-bytes", "4M", "-np", "2", "-arena"}, &out, &errb); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	if s := out.String(); !strings.Contains(s, ": direct\n") || !strings.Contains(s, "because: every buffer comes from Alloc") {
		t.Errorf("output %q", s)
	}
	out.Reset()
	if rc := runSelect([]string{"-coll", "allgather", "-bytes", "16M", "-np", "2", "-cpus", "fit", "-cma"}, &out, &errb); rc != 0 {
		t.Fatalf("rc %d: %s", rc, errb.String())
	}
	if s := out.String(); !strings.Contains(s, ": single\n") || !strings.Contains(s, "because: cross-memory attach is on") {
		t.Errorf("output %q", s)
	}
	out.Reset()
	if rc := runSelect([]string{"-coll", "allgather", "-bytes", "16M", "-np", "2", "-cpus", "fit", "-cma=false"}, &out, &errb); rc != 0 || strings.Contains(out.String(), "single") {
		t.Errorf("-cma=false: rc %d, %q", rc, out.String())
	}
	out.Reset()
	if rc := runSelect([]string{"-coll", "barrier", "-bytes", "0", "-np", "4", "-cpus", "fit", "-table", "/nonexistent"}, &out, &errb); rc == 0 {
		t.Error("a missing table file: rc 0")
	}
	out.Reset()
	for pl, want := range map[string]string{"near": ": flat\n", "far": ": single\n", "unknown": ": single\n"} {
		if rc := runSelect([]string{"-coll", "allgather", "-bytes", "8M", "-np", "2", "-cpus", "fit", "-placement", pl}, &out, &errb); rc != 0 || !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "placement") {
			t.Errorf("-placement %s: rc %d, %q, want %q", pl, rc, out.String(), want)
		}
		out.Reset()
	}
	if rc := runSelect([]string{"-coll", "allgather", "-placement", "close"}, &out, &errb); rc != 2 || !strings.Contains(errb.String(), "-placement") {
		t.Errorf("bad placement: rc %d, %q", rc, errb.String())
	}
	if rc := runSelect([]string{"-coll", "nosuch"}, &out, &errb); rc != 2 || !strings.Contains(errb.String(), "nosuch") {
		t.Errorf("bad collective: rc %d, %q", rc, errb.String())
	}
}

// TestWriteOverrides: tune's report lists each built-in override for a
// measured p with what was measured in its range, and the merged table.
func TestWriteOverrides(t *testing.T) {
	tab, err := collectives.ParseTable("t", []byte("allreduce 2 fit 0 inf flat flat\nbarrier 3 fit 0 inf flat -\n"))
	if err != nil {
		t.Fatal(err)
	}
	var rep bytes.Buffer
	writeOverrides(&rep, tab)
	s := rep.String()
	if !strings.Contains(s, "## Overrides") || !strings.Contains(s, "allreduce p=2 [0, 512K): replicated (measured: flat)") {
		t.Errorf("report:\n%s", s)
	}
	if !strings.Contains(s, "allreduce             2  fit   0       512K    replicated") {
		t.Errorf("merged table missing:\n%s", s)
	}
}
