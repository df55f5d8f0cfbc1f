package main

import (
	"bytes"
	"strings"
	"testing"
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
	if rc := runSelect([]string{"-coll", "barrier", "-bytes", "0", "-np", "4", "-cpus", "fit", "-table", "/nonexistent"}, &out, &errb); rc == 0 {
		t.Error("a missing table file: rc 0")
	}
	if rc := runSelect([]string{"-coll", "nosuch"}, &out, &errb); rc != 2 || !strings.Contains(errb.String(), "nosuch") {
		t.Errorf("bad collective: rc %d, %q", rc, errb.String())
	}
}
