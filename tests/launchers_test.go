package tests

// Programs that join with collectives.JoinEnv under each launcher: alone (a
// world of one), under the environments Open MPI's mpirun, MPICH's Hydra and
// Slurm's srun give their ranks (faked, on this node), and under the real
// mpirun of both MPIs. Each rank runs launchRank (an allreduce whose exact
// result it checks).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shmcoll/shmcoll/collectives"
	"github.com/shmcoll/shmcoll/shm"
)

// launcherPrefixes start the names of the variables of the launchers
// JoinEnv reads or recognises.
var launcherPrefixes = []string{"SHMCOLL_RANK=", "SHMCOLL_SIZE=", "SHMCOLL_ARENA=", "SHMCOLL_REQUIRE_LAUNCHER=",
	"OMPI_", "PMIX_", "PMI_", "MPI_LOCAL", "MPIR_CVAR_", "HYDI_", "SLURM_", "MV2_", "PALS_", "ALPS_", "FLUX_", "JSM_"}

// noLauncherEnv is the test's environment without any launcher variable.
func noLauncherEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return slices.ContainsFunc(launcherPrefixes, func(p string) bool { return strings.HasPrefix(kv, p) })
	})
}

// clearLauncherEnv unsets every launcher variable for the rest of the test.
func clearLauncherEnv(t *testing.T) {
	for _, kv := range os.Environ() {
		if slices.ContainsFunc(launcherPrefixes, func(p string) bool { return strings.HasPrefix(kv, p) }) {
			k, _, _ := strings.Cut(kv, "=")
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
}

// TestJoinEnvSingleton: a program started without a launcher gets a
// communicator of one rank on which every collective works; with
// RequireLauncher it gets an error instead.
func TestJoinEnvSingleton(t *testing.T) {
	clearLauncherEnv(t)
	ctx := context.Background()
	c, err := collectives.JoinEnv(ctx, collectives.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Rank() != 0 || c.Size() != 1 {
		t.Fatalf("rank %d of %d", c.Rank(), c.Size())
	}
	send := []float64{1.5, -2, 3}
	recv := make([]float64, 3)
	if err := collectives.Allreduce(ctx, c, send, recv, collectives.Sum); err != nil || !slices.Equal(recv, send) {
		t.Errorf("allreduce: %v %v", recv, err)
	}
	all := make([]float64, 3)
	if err := collectives.Allgather(ctx, c, send, all); err != nil || !slices.Equal(all, send) {
		t.Errorf("allgather: %v %v", all, err)
	}
	if err := collectives.Bcast(ctx, c, send, 0); err != nil {
		t.Errorf("bcast: %v", err)
	}
	if err := collectives.Barrier(ctx, c); err != nil {
		t.Errorf("barrier: %v", err)
	}
	if _, err := collectives.JoinEnv(ctx, collectives.Options{RequireLauncher: true}); !errors.Is(err, shm.ErrNoLauncher) {
		t.Errorf("RequireLauncher: %v", err)
	}
}

// rankEnv is one fake rank's launcher variables.
type rankEnv func(r, p int) []string

// runFakeLauncher starts p copies of the rank program with env(r, p) each,
// as the launcher would on this node, and returns each one's output and
// error. With pmiFD each rank gets a socket pair of its own as descriptor
// 3, as Hydra's proxy gives them.
func runFakeLauncher(t *testing.T, p int, env rankEnv, pmiFD bool) ([]string, []error) {
	t.Helper()
	cmds := make([]*exec.Cmd, p)
	outs := make([]*strings.Builder, p)
	for r := range p {
		cmd := exec.Command(os.Args[0], "-test.run=^TestLaunchRankHelper$")
		cmd.Env = append(noLauncherEnv(), envLaunchMode+"=launchers")
		cmd.Env = append(cmd.Env, env(r, p)...)
		if pmiFD {
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			mine, theirs := os.NewFile(uintptr(fds[0]), "pmi"), os.NewFile(uintptr(fds[1]), "pmi-rank")
			defer mine.Close()
			defer theirs.Close()
			cmd.ExtraFiles = []*os.File{theirs}
		}
		outs[r] = new(strings.Builder)
		cmd.Stdout, cmd.Stderr = outs[r], outs[r]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[r] = cmd
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				cmd.Process.Kill()
				cmd.Wait()
			}
		})
	}
	out := make([]string, p)
	errs := make([]error, p)
	for r, cmd := range cmds {
		errs[r] = cmd.Wait()
		out[r] = outs[r].String()
	}
	return out, errs
}

// TestJoinEnvFakeLaunchers runs the rank program under each launcher's
// environment (the ranks of one node of a job that spans two), alone, and
// in a Slurm batch script; each rank must join its node's ranks and get the
// exact allreduce.
func TestJoinEnvFakeLaunchers(t *testing.T) {
	job := strconv.FormatInt(time.Now().UnixNano()%1e9, 10)
	sbatch := []string{"SLURM_JOB_ID=" + job, "SLURM_NODEID=0", "SLURM_LOCALID=0", "SLURM_PROCID=0", "SLURM_TASKS_PER_NODE=4(x2)",
		"SLURM_NNODES=2", "SLURM_NTASKS=8"}
	for _, tc := range []struct {
		name  string
		p     int // ranks started on this node
		size  int // the size each must see
		env   rankEnv
		pmiFD bool
	}{
		{"none", 1, 1, func(r, p int) []string { return nil }, false},
		{"sbatch", 1, 1, func(r, p int) []string { return sbatch }, false},
		{"openmpi", 3, 3, func(r, p int) []string {
			// The second node of the job runs ranks 3 and 4.
			return append(slices.Clip(sbatch), "OMPI_COMM_WORLD_LOCAL_RANK="+strconv.Itoa(r), "OMPI_COMM_WORLD_LOCAL_SIZE="+strconv.Itoa(p),
				"OMPI_COMM_WORLD_RANK="+strconv.Itoa(r), "OMPI_COMM_WORLD_SIZE=5", "OMPI_MCA_ess_base_jobid="+job,
				"PMIX_RANK="+strconv.Itoa(r), "PMIX_HOSTNAME=node1")
		}, false},
		{"mpich", 3, 3, func(r, p int) []string {
			return append(slices.Clip(sbatch), "MPI_LOCALRANKID="+strconv.Itoa(r), "MPI_LOCALNRANKS="+strconv.Itoa(p),
				"PMI_RANK="+strconv.Itoa(2+r), "PMI_SIZE=5", "PMI_FD=3")
		}, true},
		{"slurm", 3, 3, func(r, p int) []string {
			// Node 1 of a step with tasks 2,3 per node: tasks 2, 3, 4.
			return []string{"SLURM_JOB_ID=" + job, "SLURM_STEP_ID=1", "SLURM_STEPID=1", "SLURM_NODEID=1",
				"SLURM_LOCALID=" + strconv.Itoa(r), "SLURM_PROCID=" + strconv.Itoa(2+r), "SLURM_STEP_TASKS_PER_NODE=2,3",
				"SLURM_STEP_NUM_TASKS=5", "SLURM_STEP_NUM_NODES=2", "PMI_RANK=" + strconv.Itoa(2+r)}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errs := runFakeLauncher(t, tc.p, tc.env, tc.pmiFD)
			for r := range tc.p {
				if want := fmt.Sprintf("allreduce ok %d %d\n", r, tc.size); errs[r] != nil || !strings.Contains(out[r], want) {
					t.Errorf("rank %d: %v: %q; want %q", r, errs[r], out[r], want)
				}
			}
		})
	}
	// The arenas' segments are gone (other tests' may exist meanwhile).
	var left []string
	for _, name := range []string{"ompi-node1-" + job, "slurm-" + job + "-1-1"} {
		if path, err := shm.SegmentPath(name); err != nil {
			t.Error(err)
		} else if _, err := os.Stat(path); err == nil {
			left = append(left, path)
		}
	}
	mpich, _ := shm.SegmentPath(fmt.Sprintf("mpich-%d", os.Getpid()))
	more, _ := filepath.Glob(mpich + "-*")
	if left = append(left, more...); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// TestJoinEnvUnknownLauncher: ranks of a launcher JoinEnv does not read
// (here a bare PMI one) each fail at once naming its variables, instead of
// running as worlds of one.
func TestJoinEnvUnknownLauncher(t *testing.T) {
	out, errs := runFakeLauncher(t, 2, func(r, p int) []string {
		return []string{"PMI_RANK=" + strconv.Itoa(r), "PMI_SIZE=" + strconv.Itoa(p)}
	}, false)
	for r := range 2 {
		if want := `PMI_RANK="` + strconv.Itoa(r) + `"`; errs[r] == nil || !strings.Contains(out[r], want) || strings.Contains(out[r], "allreduce ok") {
			t.Errorf("rank %d: %v: %q; want a failure naming %s", r, errs[r], out[r], want)
		}
	}
}

// TestJoinEnvMPIRun runs the rank program under the real mpirun of Open MPI
// and of MPICH (2 ranks), where installed.
func TestJoinEnvMPIRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts mpirun")
	}
	for _, l := range []struct {
		name string
		args []string
	}{
		{"mpirun.openmpi", []string{"--allow-run-as-root", "--oversubscribe", "-np", "2", "-x", envLaunchMode}},
		{"mpirun.mpich", []string{"-np", "2"}},
	} {
		t.Run(l.name, func(t *testing.T) {
			bin, err := exec.LookPath(l.name)
			if err != nil {
				t.Skipf("%s not installed", l.name)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, append(l.args, os.Args[0], "-test.run=^TestLaunchRankHelper$")...)
			cmd.Env = append(noLauncherEnv(), envLaunchMode+"=launchers")
			out, err := cmd.CombinedOutput()
			for r := range 2 {
				if want := fmt.Sprintf("allreduce ok %d 2\n", r); err != nil || !strings.Contains(string(out), want) {
					t.Errorf("%v: %s; want %q", err, out, want)
				}
			}
		})
	}
}

// TestJoinEnvRequireLauncher: a program started alone with
// SHMCOLL_REQUIRE_LAUNCHER=1 fails, saying that no launcher started it.
func TestJoinEnvRequireLauncher(t *testing.T) {
	out, errs := runFakeLauncher(t, 1, func(r, p int) []string { return []string{shm.EnvRequireLauncher + "=1"} }, false)
	if errs[0] == nil || !strings.Contains(out[0], "no launcher") || strings.Contains(out[0], "allreduce ok") {
		t.Errorf("%v: %q; want a failure saying no launcher", errs[0], out[0])
	}
}
