package shm

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// launcherFreeEnv is the test's environment without any variable ReadEnv
// reads, for ranks that get a fake launcher's.
func launcherFreeEnv() []string {
	return slices.DeleteFunc(os.Environ(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(launcherVars, k) || strings.HasPrefix(k, "SLURM_")
	})
}

// TestJoinEnvFakeLaunchers starts ranks as processes with the environment
// each launcher would give them on one node, and checks that they find one
// another with JoinEnv and exchange data (every word checked). Hydra's ranks
// get their own socket pair as PMI_FD, as the proxy gives them, whose
// creator (this test) is their proxy, and start under a shell each.
func TestJoinEnvFakeLaunchers(t *testing.T) {
	const p = 3
	job := strconv.FormatUint(uint64(time.Now().UnixNano()%1e9), 10)
	for _, tc := range []struct {
		name  string
		arena string // the arena's name, to check that nothing is left
		vars  func(r int) []string
		pmiFD bool
	}{
		{"openmpi", arenaName("ompi", "testnode", job), func(r int) []string {
			return []string{"OMPI_COMM_WORLD_LOCAL_RANK=" + strconv.Itoa(r), "OMPI_COMM_WORLD_LOCAL_SIZE=" + strconv.Itoa(p),
				"OMPI_COMM_WORLD_RANK=" + strconv.Itoa(r), "OMPI_MCA_ess_base_jobid=" + job, "PMIX_RANK=" + strconv.Itoa(r),
				"PMIX_HOSTNAME=testnode"}
		}, false},
		{"mpich", arenaName("mpich", "testnode", strconv.Itoa(os.Getpid()), strconv.FormatUint(procStartOf(os.Getpid()), 10)), func(r int) []string {
			return []string{"MPI_LOCALRANKID=" + strconv.Itoa(r), "MPI_LOCALNRANKS=" + strconv.Itoa(p), "PMI_RANK=" + strconv.Itoa(r),
				"PMI_SIZE=" + strconv.Itoa(p), "PMI_FD=3", "MPIR_CVAR_CH3_INTERFACE_HOSTNAME=testnode"}
		}, true},
		{"slurm", arenaName("slurm", job, "0", "0"), func(r int) []string {
			return []string{"SLURM_JOB_ID=" + job, "SLURM_STEP_ID=0", "SLURM_LOCALID=" + strconv.Itoa(r), "SLURM_NODEID=0",
				"SLURM_PROCID=" + strconv.Itoa(r), "SLURM_STEP_TASKS_PER_NODE=" + strconv.Itoa(p), "PMI_RANK=" + strconv.Itoa(r)}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			namesMu.Lock()
			testNames = append(testNames, tc.arena)
			namesMu.Unlock()
			cmds := make([]*exec.Cmd, p)
			outs := make([]*syncBuffer, p)
			for r := range p {
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				if tc.pmiFD {
					// Through a shell that stays the rank's parent, as a
					// wrapper script would: the proxy is found through the
					// socket, not the parent.
					cmd = exec.Command("/bin/sh", "-c", `"$0" "$@"; st=$?; exit $st`, os.Args[0], "-test.run=^$")
				}
				cmd.Env = append(launcherFreeEnv(), envRole+"=stress", "SHMCOLL_TEST_ENVJOIN=1", "SHMCOLL_TEST_SLOT=65536",
					"SHMCOLL_TEST_ROUNDS=50", "SHMCOLL_TEST_WORDS=1024")
				cmd.Env = append(cmd.Env, tc.vars(r)...)
				if tc.pmiFD {
					fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
					if err != nil {
						t.Fatal(err)
					}
					mine, theirs := os.NewFile(uintptr(fds[0]), "pmi"), os.NewFile(uintptr(fds[1]), "pmi-rank")
					defer mine.Close()
					defer theirs.Close()
					cmd.ExtraFiles = []*os.File{theirs} // descriptor 3
				}
				outs[r] = new(syncBuffer)
				cmd.Stdout, cmd.Stderr = outs[r], outs[r]
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				cmds[r] = cmd
			}
			for r, cmd := range cmds {
				if err := cmd.Wait(); err != nil || !strings.HasSuffix(outs[r].String(), "ok\n") {
					t.Errorf("rank %d: %v: %s", r, err, outs[r])
				}
			}
			if path, _ := SegmentPath(tc.arena); fileExists(path) {
				t.Errorf("%s left behind", path)
			}
		})
	}
}

// TestJoinEnvUnknownLauncherProcesses: processes with the variables of a
// launcher JoinEnv cannot read each fail at once with an error naming
// them, rather than each running alone.
func TestJoinEnvUnknownLauncherProcesses(t *testing.T) {
	for r := range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(launcherFreeEnv(), envRole+"=stress", "SHMCOLL_TEST_ENVJOIN=1", "SHMCOLL_TEST_SLOT=65536",
			"SHMCOLL_TEST_ROUNDS=1", "SHMCOLL_TEST_WORDS=16", fmt.Sprintf("PMI_RANK=%d", r), "PMI_SIZE=2")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), `PMI_RANK="`+strconv.Itoa(r)+`"`) {
			t.Errorf("rank %d: %v: %s", r, err, out)
		}
	}
}
