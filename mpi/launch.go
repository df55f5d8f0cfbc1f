package mpi

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"time"
)

// Impl names an MPI implementation.
type Impl string

// The implementations shmcoll supports, by the suffix Debian gives their
// commands (mpicc.openmpi, mpirun.mpich, ...).
const (
	OpenMPI Impl = "openmpi"
	MPICH   Impl = "mpich"
)

// Impls lists the supported implementations in a fixed order.
var Impls = []Impl{OpenMPI, MPICH}

// Installation is what was found of one MPI implementation on this machine.
type Installation struct {
	Impl      Impl
	MPICC     string   // path of the compiler wrapper, "" when missing
	MPIRun    string   // path of the launcher, "" when missing
	PkgConfig string   // pkg-config module the cgo binding links with
	Missing   []string // what is absent and which Debian package provides it
}

// OK reports whether both the compiler wrapper and the launcher were found.
func (in Installation) OK() bool { return in.MPICC != "" && in.MPIRun != "" }

// Err returns nil when the installation is usable, or an error naming exactly
// what is missing.
func (in Installation) Err() error {
	if in.OK() {
		return nil
	}
	msg := fmt.Sprintf("mpi: %s is not usable: missing", in.Impl)
	for i, m := range in.Missing {
		if i > 0 {
			msg += ","
		}
		msg += " " + m
	}
	return fmt.Errorf("%s", msg)
}

type implInfo struct {
	mpicc, mpirun, pkgConfig, devPkg, binPkg string
}

var implInfos = map[Impl]implInfo{
	OpenMPI: {"mpicc.openmpi", "mpirun.openmpi", "ompi-c", "libopenmpi-dev", "openmpi-bin"},
	MPICH:   {"mpicc.mpich", "mpirun.mpich", "mpich", "libmpich-dev", "mpich"},
}

// Lookup reports what is installed of impl, searching PATH. An unknown impl
// yields an installation whose Missing says so.
func Lookup(impl Impl) Installation {
	in := Installation{Impl: impl}
	info, ok := implInfos[impl]
	if !ok {
		in.Missing = []string{fmt.Sprintf("support for %q (known: openmpi, mpich)", string(impl))}
		return in
	}
	in.PkgConfig = info.pkgConfig
	if p, err := exec.LookPath(info.mpicc); err == nil {
		in.MPICC = p
	} else {
		in.Missing = append(in.Missing, fmt.Sprintf("%s (Debian package %s)", info.mpicc, info.devPkg))
	}
	if p, err := exec.LookPath(info.mpirun); err == nil {
		in.MPIRun = p
	} else {
		in.Missing = append(in.Missing, fmt.Sprintf("%s (Debian package %s)", info.mpirun, info.binPkg))
	}
	return in
}

// Find reports every supported implementation, installed or not, in the order
// of [Impls].
func Find() []Installation {
	out := make([]Installation, len(Impls))
	for i, impl := range Impls {
		out[i] = Lookup(impl)
	}
	return out
}

// Oversubscribed reports whether np ranks are more than this machine's CPUs,
// which decides the launch line (see [Installation.Args]).
func Oversubscribed(np int) bool { return np > runtime.NumCPU() }

// Args returns the full command line that starts np ranks of prog with args.
// These are the launch lines of the performance anchors: with at most one rank
// per CPU every rank is bound to a core; beyond that ranks are unbound,
// Open MPI is told to oversubscribe and to yield when idle. Open MPI always
// uses the ob1 PML over the self and vader (shared memory) BTLs, and gets
// --allow-run-as-root when running as root.
func (in Installation) Args(np int, prog string, args ...string) []string {
	over := Oversubscribed(np)
	var argv []string
	switch in.Impl {
	case OpenMPI:
		argv = []string{in.MPIRun}
		if os.Geteuid() == 0 {
			argv = append(argv, "--allow-run-as-root")
		}
		argv = append(argv, "-np", strconv.Itoa(np))
		if over {
			argv = append(argv, "--oversubscribe", "--bind-to", "none", "--mca", "mpi_yield_when_idle", "1")
		} else {
			argv = append(argv, "--bind-to", "core", "--map-by", "core")
		}
		argv = append(argv, "--mca", "pml", "ob1", "--mca", "btl", "self,vader")
	default:
		argv = []string{in.MPIRun, "-np", strconv.Itoa(np)}
		if over {
			argv = append(argv, "-bind-to", "none")
		} else {
			argv = append(argv, "-bind-to", "core")
		}
	}
	argv = append(argv, prog)
	return append(argv, args...)
}

// Command returns an exec.Cmd that launches np ranks of prog with args (see
// [Installation.Args]). When ctx ends the launcher is interrupted (it then
// stops its ranks) and killed 10 s later if still running. The ranks inherit cmd.Env (the current environment
// when nil): both launchers pass the whole environment to local ranks.
func (in Installation) Command(ctx context.Context, np int, prog string, args ...string) (*exec.Cmd, error) {
	if err := in.Err(); err != nil {
		return nil, err
	}
	if np < 1 {
		return nil, fmt.Errorf("%w: np %d < 1", ErrArgument, np)
	}
	argv := in.Args(np, prog, args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	// On cancellation interrupt the launcher rather than kill it, so that it
	// takes its ranks down with it; kill it only if it does not exit.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	return cmd, nil
}
