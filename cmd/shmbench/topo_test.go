package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestTopoBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-time", "0s"}, "-time"},
		{[]string{"-format", "xml"}, "-format"},
		{[]string{"-cpus", "9999"}, "CPU 9999 is not in the topology"},
		{[]string{"-cpus", "x"}, "-cpus"},
		{[]string{"-size", "lots"}, "-size"},
		{[]string{"-bogus"}, "bogus"},
		{[]string{"extra"}, "unexpected arguments"},
	} {
		code, _, errOut := shmbench(t, append([]string{"topo"}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("topo %v: exit %d, %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
}

func decodeTopo(t *testing.T, out string) *topoReport {
	t.Helper()
	var rep topoReport
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return &rep
}

func TestTopo(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("one CPU: no pair to measure")
	}
	dir := t.TempDir()
	code, out, errOut := shmbench(t, "topo", "-time", "5ms", "-size", "1M", "-format", "json", "-cpus", "0,1", "-plot", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	rep := decodeTopo(t, out)
	if len(rep.CPUs) != 2 || len(rep.LatencyNS) != 2 || rep.Type != "topo" || rep.CopyBytes != 1<<20 {
		t.Fatalf("report %+v", rep)
	}
	l := rep.LatencyNS
	if l[0][0] != 0 || l[1][1] != 0 || l[0][1] <= 0 || l[0][1] != l[1][0] || rep.LatencyMinNS[0][1] > l[0][1] {
		t.Errorf("latency matrix %v (min %v)", l, rep.LatencyMinNS)
	}
	if len(rep.CopyGBps) != len(rep.Nodes) || rep.CopyGBps[0][0] <= 0 {
		t.Errorf("copy bandwidth %v for nodes %v", rep.CopyGBps, rep.Nodes)
	}
	png, err := os.ReadFile(filepath.Join(dir, "topo_latency.png"))
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("heatmap: %v", err)
	}
	code, out, _ = shmbench(t, "topo", "-time", "5ms", "-size", "0", "-cpus", "0,1")
	if code != 0 || !strings.Contains(out, "one-way latency through the channels") || !strings.Contains(out, "pairs: 1;") {
		t.Errorf("table: exit %d\n%s", code, out)
	}
}

// TestTopoFake measures a fake topology of more CPUs than the host has:
// pairs on one host CPU are reported as not measured, the others are.
func TestTopoFake(t *testing.T) {
	if runtime.NumCPU() != 2 {
		t.Skip("the expected mapping assumes 2 host CPUs")
	}
	t.Setenv("SHMCOLL_TOPOLOGY", "2x2")
	code, out, errOut := shmbench(t, "topo", "-time", "2ms", "-size", "0", "-format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	rep := decodeTopo(t, out)
	if len(rep.CPUs) != 4 || len(rep.Nodes) != 2 || rep.CopyGBps != nil {
		t.Fatalf("report %+v", rep)
	}
	for i := range 4 {
		for j := range 4 {
			sameHost := i%2 == j%2
			if got := rep.LatencyNS[i][j]; (got > 0) == sameHost {
				t.Errorf("latency[%d][%d] = %v (same host CPU: %v)", i, j, got, sameHost)
			}
		}
	}
	if len(rep.Notes) != 2 {
		t.Errorf("notes %q", rep.Notes)
	}
}
