//go:build mpi

package libshmcoll

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// mpiImpl is the MPI the tests run under, chosen by the build tags
// (impl_openmpi_test.go, impl_mpich_test.go).
type mpiImpl struct {
	name    string // "openmpi" or "mpich"
	tags    string // build tags of the library for this MPI
	mpicc   string
	mpifort string
	mpirun  string
}

// workDir holds what the tests build once per run: the library, the MPICH
// suite's objects and binaries, the C programs.
var workDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "shmcoll-libtests-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	workDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// needMPI skips the test when the MPI's compiler or launcher is missing.
func needMPI(t *testing.T, tools ...string) {
	t.Helper()
	for _, c := range append([]string{impl.mpicc, impl.mpirun}, tools...) {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("%s not found: %v", c, err)
		}
	}
}

var lib struct {
	once sync.Once
	path string
	skip string
	err  error
}

// library returns the path of libshmcoll.so for this MPI: the one named by
// SHMCOLL_LIBSHMCOLL, or one built from this module's cmd/libshmcoll once
// per test run, so that the tests test the code beside them.
func library(t *testing.T) string {
	t.Helper()
	lib.once.Do(func() {
		if p := os.Getenv("SHMCOLL_LIBSHMCOLL"); p != "" {
			lib.path, lib.err = filepath.Abs(p)
			return
		}
		src, err := filepath.Abs(filepath.Join("..", "..", "cmd", "libshmcoll"))
		if err != nil {
			lib.err = err
			return
		}
		if _, err := os.Stat(src); err != nil {
			lib.skip = fmt.Sprintf("no library to test: %v", err)
			return
		}
		out := filepath.Join(workDir, "libshmcoll.so")
		cmd := exec.Command("go", "build", "-buildmode=c-shared", "-tags", impl.tags, "-o", out, ".")
		cmd.Dir = src
		if b, err := cmd.CombinedOutput(); err != nil {
			lib.err = fmt.Errorf("go build -buildmode=c-shared -tags %s ./cmd/libshmcoll: %v\n%s", impl.tags, err, b)
			return
		}
		lib.path = out
	})
	if lib.skip != "" {
		t.Skip(lib.skip)
	}
	if lib.err != nil {
		t.Fatal(lib.err)
	}
	return lib.path
}

// job is one mpirun.
type job struct {
	np      int
	prog    string
	args    []string
	env     []string      // KEY=VALUE set in every rank
	preload string        // library preloaded into the ranks, "" for none
	timeout time.Duration // the launcher's process group is killed after it
	dir     string
}

type jobResult struct {
	stdout, stderr string
	err            error // from the launcher; nil when every rank exited 0
	timedOut       bool
	elapsed        time.Duration
}

func (r jobResult) output() string { return r.stdout + r.stderr }

// argv is the launch line: oversubscribed and unbound, since the tests run
// more ranks than this machine has cores; the environment and the preload
// go to the ranks only, not to the launcher.
func (j job) argv() []string {
	env := j.env
	if j.preload != "" {
		env = append([]string{"LD_PRELOAD=" + j.preload}, env...)
	}
	var a []string
	switch impl.name {
	case "openmpi":
		a = []string{impl.mpirun}
		if os.Geteuid() == 0 {
			a = append(a, "--allow-run-as-root")
		}
		a = append(a, "-np", fmt.Sprint(j.np), "--oversubscribe", "--bind-to", "none",
			"--mca", "mpi_yield_when_idle", "1", "--mca", "pml", "ob1", "--mca", "btl", "self,vader")
		for _, kv := range env {
			a = append(a, "-x", kv)
		}
	default:
		a = []string{impl.mpirun, "-np", fmt.Sprint(j.np), "-bind-to", "none"}
		for _, kv := range env {
			k, v, _ := strings.Cut(kv, "=")
			a = append(a, "-genv", k, v)
		}
	}
	a = append(a, j.prog)
	return append(a, j.args...)
}

// run starts the job and waits for it. At the timeout the whole process
// group (launcher, proxies, ranks) is killed, so a hang ends the job.
func (j job) run(ctx context.Context) jobResult {
	timeout := j.timeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	argv := j.argv()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = j.dir
	if impl.name == "openmpi" {
		// Open MPI keeps a session directory per job under one directory per
		// user, which a job that ends removes when it is empty: a job
		// starting at that moment fails to make its own ("A call to mkdir
		// was unable to create the desired directory"). The tests run jobs
		// at once, so each gets a base directory of its own.
		dir, err := os.MkdirTemp("", "shmcoll-ompi-")
		if err != nil {
			return jobResult{err: err}
		}
		defer os.RemoveAll(dir)
		cmd.Env = append(os.Environ(), "OMPI_MCA_orte_tmpdir_base="+dir)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	r := jobResult{stdout: stdout.String(), stderr: stderr.String(), err: err, elapsed: time.Since(start)}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		r.timedOut = true
	}
	if cmd.Process != nil {
		// Ranks that outlive their launcher would hold the next job's CPUs.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	return r
}

func (j job) String() string { return strings.Join(j.argv(), " ") }

// compile builds an MPI program with the MPI's C compiler (or Fortran
// compiler for .f90) into workDir and returns the binary's path.
func compile(t *testing.T, src string, extra ...string) string {
	t.Helper()
	base := strings.TrimSuffix(filepath.Base(src), filepath.Ext(src))
	out := filepath.Join(workDir, impl.name+"-"+base)
	cc := impl.mpicc
	args := []string{"-O2", "-Wall", "-o", out, src}
	if filepath.Ext(src) == ".f90" {
		cc = impl.mpifort
	}
	args = append(args, extra...)
	cmd := exec.Command(cc, args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", cc, strings.Join(args, " "), err, b)
	}
	return out
}

// shmEntries lists /dev/shm's entries named shmcoll.*.
func shmEntries(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir("/dev/shm")
	if err != nil {
		t.Fatalf("/dev/shm: %v", err)
	}
	var names []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "shmcoll.") {
			names = append(names, e.Name())
		}
	}
	return names
}

// noNewShm fails the test if entries named shmcoll.* that were not in before
// are still in /dev/shm a few seconds after the job ended. Other processes
// of this machine may create and remove their own meanwhile: only an entry
// that stays is reported.
func noNewShm(t *testing.T, before []string) {
	t.Helper()
	var left []string
	for range 10 {
		left = left[:0]
		for _, n := range shmEntries(t) {
			if !slices.Contains(before, n) {
				left = append(left, n)
			}
		}
		if len(left) == 0 {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Errorf("left in /dev/shm: %s", strings.Join(left, " "))
}
