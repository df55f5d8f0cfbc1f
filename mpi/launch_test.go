package mpi

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestLookupMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	for _, in := range Find() {
		if in.OK() || in.Err() == nil || in.MPICC != "" || in.MPIRun != "" {
			t.Errorf("%s found in an empty PATH: %+v", in.Impl, in)
		}
		msg := in.Err().Error()
		for _, want := range map[Impl][]string{
			OpenMPI: {"mpicc.openmpi (Debian package libopenmpi-dev)", "mpirun.openmpi (Debian package openmpi-bin)"},
			MPICH:   {"mpicc.mpich (Debian package libmpich-dev)", "mpirun.mpich (Debian package mpich)"},
		}[in.Impl] {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: %q does not name %q", in.Impl, msg, want)
			}
		}
		if _, err := in.Command(context.Background(), 2, "prog"); err == nil {
			t.Errorf("%s: Command without an installation", in.Impl)
		}
	}
	if in := Lookup("lam"); in.OK() || !strings.Contains(in.Err().Error(), `"lam"`) {
		t.Errorf("unknown implementation: %+v", in)
	}
}

func TestLookupFound(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"mpicc.mpich", "mpirun.mpich", "mpirun.openmpi"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir)
	got := Find()
	if len(got) != 2 || got[0].Impl != OpenMPI || got[1].Impl != MPICH {
		t.Fatalf("Find() = %+v", got)
	}
	if !got[1].OK() || got[1].MPICC != filepath.Join(dir, "mpicc.mpich") || got[1].PkgConfig != "mpich" {
		t.Errorf("MPICH: %+v", got[1])
	}
	if got[0].OK() || !slices.Equal(got[0].Missing, []string{"mpicc.openmpi (Debian package libopenmpi-dev)"}) {
		t.Errorf("Open MPI: %+v", got[0])
	}
}

func TestArgs(t *testing.T) {
	root := []string{}
	if os.Geteuid() == 0 {
		root = []string{"--allow-run-as-root"}
	}
	ompi := Installation{Impl: OpenMPI, MPICC: "mpicc.openmpi", MPIRun: "mpirun.openmpi"}
	mpich := Installation{Impl: MPICH, MPICC: "mpicc.mpich", MPIRun: "mpirun.mpich"}
	over := strconv.Itoa(runtime.NumCPU() + 1)
	cases := []struct {
		in   Installation
		np   int
		want []string
	}{
		{ompi, 1, slices.Concat([]string{"mpirun.openmpi"}, root, []string{"-np", "1", "--bind-to", "core", "--map-by", "core",
			"--mca", "pml", "ob1", "--mca", "btl", "self,vader", "prog", "-x", "1"})},
		{ompi, runtime.NumCPU() + 1, slices.Concat([]string{"mpirun.openmpi"}, root, []string{"-np", over, "--oversubscribe",
			"--bind-to", "none", "--mca", "mpi_yield_when_idle", "1", "--mca", "pml", "ob1", "--mca", "btl", "self,vader", "prog", "-x", "1"})},
		{mpich, 1, []string{"mpirun.mpich", "-np", "1", "-bind-to", "core", "prog", "-x", "1"}},
		{mpich, runtime.NumCPU() + 1, []string{"mpirun.mpich", "-np", over, "-bind-to", "none", "prog", "-x", "1"}},
	}
	for _, c := range cases {
		if got := c.in.Args(c.np, "prog", "-x", "1"); !slices.Equal(got, c.want) {
			t.Errorf("%s np=%d:\n got %q\nwant %q", c.in.Impl, c.np, got, c.want)
		}
	}
	if _, err := ompi.Command(context.Background(), 0, "prog"); err == nil {
		t.Error("np 0 accepted")
	}
}

func TestTypes(t *testing.T) {
	sizes := map[Datatype]int{Byte: 1, Int8: 1, Int16: 2, Int32: 4, Int64: 8, Uint8: 1, Uint16: 2, Uint32: 4, Uint64: 8,
		Float32: 4, Float64: 8, Complex64: 8, Complex128: 16}
	for d, n := range sizes {
		if d.Size() != n || !d.Valid() {
			t.Errorf("%v: size %d, want %d", d, d.Size(), n)
		}
	}
	if Datatype(0).Valid() || numDatatypes.Valid() || Datatype(0).Size() != 0 {
		t.Error("invalid datatypes reported valid")
	}
	if TypeOf[int8]() != Int8 || TypeOf[uint64]() != Uint64 || TypeOf[float32]() != Float32 || TypeOf[complex128]() != Complex128 {
		t.Error("TypeOf mapping")
	}
	applies := []struct {
		op   Op
		d    Datatype
		want bool
	}{
		{Sum, Float64, true}, {Sum, Complex64, true}, {Sum, Byte, false},
		{Max, Int8, true}, {Max, Complex128, false}, {Min, Byte, false},
		{BAnd, Uint32, true}, {BXor, Byte, true}, {BOr, Float32, false},
		{Op(0), Int32, false}, {Sum, Datatype(0), false},
	}
	for _, a := range applies {
		if got := a.op.Applies(a.d); got != a.want {
			t.Errorf("%v.Applies(%v) = %v", a.op, a.d, got)
		}
	}
	if Sum.String() != "sum" || Float64.String() != "float64" || ThreadMultiple.String() != "multiple" {
		t.Error("names")
	}
}
