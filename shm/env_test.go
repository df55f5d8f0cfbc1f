package shm

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
)

// launcherVars are the variables ReadEnv consults; tests clear them.
var launcherVars = []string{
	EnvRank, EnvSize, EnvArena, EnvRequireLauncher,
	"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "PMIX_HOSTNAME",
	"MPI_LOCALRANKID", "MPI_LOCALNRANKS", "PMI_FD", "MPIR_CVAR_CH3_INTERFACE_HOSTNAME",
	"SLURM_STEP_ID", "SLURM_STEPID", "SLURM_JOB_ID", "SLURM_JOBID", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_PROCID",
	"SLURM_STEP_TASKS_PER_NODE", "SLURM_PTY_PORT",
}

func init() { launcherVars = append(launcherVars, foreignVars...) }

// clearLauncherEnv empties every variable ReadEnv reads (empty counts as
// not set), for the rest of the test.
func clearLauncherEnv(t *testing.T) {
	for _, k := range launcherVars {
		t.Setenv(k, "")
	}
}

// fakeEnv is the environment of one fake rank: variables, and the pid and
// start time of the Hydra proxy its PMI_FD leads to.
type fakeEnv struct {
	vars  map[string]string
	proxy int
}

func (f fakeEnv) read() (EnvJoin, error) {
	return environ{
		get:        func(k string) string { return f.vars[k] },
		hydraProxy: func(string) (int, uint64) { return f.proxy, 4242 },
	}.read()
}

// with returns a copy of vars with kv ("K", "v", ...) added.
func with(vars map[string]string, kv ...string) map[string]string {
	m := maps.Clone(vars)
	if m == nil {
		m = map[string]string{}
	}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// sbatchVars is what a batch script of a two-node allocation with 4 tasks
// per node passes on to whatever it runs (mpirun's ranks on the first
// node included): the batch step's task variables, and no step id.
var sbatchVars = map[string]string{
	"SLURM_JOB_ID": "7001", "SLURM_JOBID": "7001", "SLURM_NNODES": "2", "SLURM_NTASKS": "8",
	"SLURM_TASKS_PER_NODE": "4(x2)", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_NODEID": "0",
	"SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_CPUS_ON_NODE": "4", "SLURM_GTIDS": "0",
}

// srunVars returns the variables of task procid of a job step whose tasks
// per node are tasks, on the node of index node, as local task local.
func srunVars(job, step, tasks string, node, local, procid int) map[string]string {
	return with(sbatchVars, "SLURM_JOB_ID", job, "SLURM_JOBID", job, "SLURM_STEP_ID", step, "SLURM_STEPID", step,
		"SLURM_STEP_TASKS_PER_NODE", tasks, "SLURM_TASKS_PER_NODE", tasks, "SLURM_NODEID", strconv.Itoa(node),
		"SLURM_LOCALID", strconv.Itoa(local), "SLURM_PROCID", strconv.Itoa(procid))
}

// TestReadEnvTwoNodes fakes each launcher's environment on every rank of a
// job that spans two nodes (3 ranks on the first, 2 on the second): each
// rank gets its node-local rank and size, and the ranks of a node share an
// arena that is not the other node's.
func TestReadEnvTwoNodes(t *testing.T) {
	perNode := []int{3, 2}
	type launcher struct {
		name, source string
		env          func(node, local, global int) fakeEnv
		names        []string // the arena of each node
	}
	for _, l := range []launcher{
		{"shmrun", "shmcoll", func(node, local, _ int) fakeEnv {
			return fakeEnv{vars: map[string]string{EnvRank: strconv.Itoa(local), EnvSize: strconv.Itoa(perNode[node]),
				EnvArena: fmt.Sprintf("shmrun-node%d", node)}}
		}, []string{"shmrun-node0", "shmrun-node1"}},
		{"openmpi4", "openmpi", func(node, local, global int) fakeEnv {
			return fakeEnv{vars: with(sbatchVars, "OMPI_COMM_WORLD_LOCAL_RANK", strconv.Itoa(local),
				"OMPI_COMM_WORLD_LOCAL_SIZE", strconv.Itoa(perNode[node]), "OMPI_COMM_WORLD_RANK", strconv.Itoa(global),
				"OMPI_COMM_WORLD_SIZE", "5", "OMPI_MCA_ess_base_jobid", "1901854721", "PMIX_NAMESPACE", "1901854721",
				"PMIX_RANK", strconv.Itoa(global), "PMIX_HOSTNAME", fmt.Sprintf("n%d", node+1))}
		}, []string{"ompi-n1-1901854721", "ompi-n2-1901854721"}},
		{"openmpi5", "openmpi", func(node, local, global int) fakeEnv {
			return fakeEnv{vars: map[string]string{"OMPI_COMM_WORLD_LOCAL_RANK": strconv.Itoa(local),
				"OMPI_COMM_WORLD_LOCAL_SIZE": strconv.Itoa(perNode[node]), "OMPI_COMM_WORLD_RANK": strconv.Itoa(global),
				"PMIX_NAMESPACE": "prterun-n1-4711@1", "PMIX_RANK": strconv.Itoa(global),
				"PMIX_HOSTNAME": fmt.Sprintf("n%d.cluster", node+1)}}
		}, []string{"ompi-n1_cluster-prterun-n1-4711_1", "ompi-n2_cluster-prterun-n1-4711_1"}},
		{"hydra", "mpich", func(node, local, global int) fakeEnv {
			return fakeEnv{vars: with(sbatchVars, "MPI_LOCALRANKID", strconv.Itoa(local), "MPI_LOCALNRANKS", strconv.Itoa(perNode[node]),
				"PMI_RANK", strconv.Itoa(global), "PMI_SIZE", "5", "PMI_FD", strconv.Itoa(6+local),
				"MPIR_CVAR_CH3_INTERFACE_HOSTNAME", fmt.Sprintf("n%d", node+1)), proxy: 100 + node}
		}, []string{"mpich-n1-100-4242", "mpich-n2-101-4242"}},
		{"srun", "slurm", func(node, local, global int) fakeEnv {
			return fakeEnv{vars: srunVars("7001", "3", "3,2", node, local, global)}
		}, []string{"slurm-7001-3-0", "slurm-7001-3-1"}},
		{"srun --mpi=pmi2", "slurm", func(node, local, global int) fakeEnv {
			return fakeEnv{vars: with(srunVars("7001", "0", "3,2", node, local, global), "PMI_RANK", strconv.Itoa(global),
				"PMI_SIZE", "5", "PMI_JOBID", "7001.0", "PMIX_RANK", strconv.Itoa(global))}
		}, []string{"slurm-7001-0-0", "slurm-7001-0-1"}},
		{"mpirun in an srun step", "openmpi", func(node, local, global int) fakeEnv {
			// Open MPI's daemons on the other nodes run as a step of one
			// task per node; the ranks they start inherit its variables.
			return fakeEnv{vars: with(srunVars("7001", "1", "1(x2)", node, 0, node), "OMPI_COMM_WORLD_LOCAL_RANK", strconv.Itoa(local),
				"OMPI_COMM_WORLD_LOCAL_SIZE", strconv.Itoa(perNode[node]), "OMPI_COMM_WORLD_RANK", strconv.Itoa(global),
				"OMPI_MCA_ess_base_jobid", "99", "PMIX_HOSTNAME", fmt.Sprintf("n%d", node+1))}
		}, []string{"ompi-n1-99", "ompi-n2-99"}},
	} {
		t.Run(l.name, func(t *testing.T) {
			global := 0
			for node, n := range perNode {
				for local := range n {
					j, err := l.env(node, local, global).read()
					global++
					want := EnvJoin{Rank: local, Size: n, Name: l.names[node], FD: -1, Source: l.source}
					if err != nil || j != want {
						t.Errorf("node %d rank %d: %+v, %v; want %+v", node, local, j, err, want)
					}
					if err := ValidName(j.Name); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
}

// TestReadEnvSlurmTasksPerNode: the node-local size comes from the step's
// tasks per node at the node's index, in Slurm's compressed form.
func TestReadEnvSlurmTasksPerNode(t *testing.T) {
	for _, tc := range []struct {
		tasks string
		node  int
		size  int
	}{
		{"2(x3),1", 0, 2}, {"2(x3),1", 2, 2}, {"2(x3),1", 3, 1}, {"1,4(x2)", 2, 4}, {"16", 0, 16},
	} {
		j, err := fakeEnv{vars: srunVars("12", "0", tc.tasks, tc.node, 0, 0)}.read()
		want := EnvJoin{Size: tc.size, Name: fmt.Sprintf("slurm-12-0-%d", tc.node), FD: -1, Source: "slurm"}
		if err != nil || j != want {
			t.Errorf("%s node %d: %+v, %v; want %+v", tc.tasks, tc.node, j, err, want)
		}
	}
	for _, tc := range []struct {
		tasks string
		node  int
		want  string
	}{
		{"2(x3),1", 4, "only 4 nodes"}, {"2(x3", 0, `malformed item "2(x3"`}, {"", 0, "SLURM_STEP_TASKS_PER_NODE"},
		{"0", 0, `malformed item "0"`}, {"2(x0)", 0, `malformed item "2(x0)"`}, {"a,2", 1, `malformed item "a"`},
		{"2(y3)", 0, "malformed"}, {"2,", 0, "malformed"}, {"1(x16777216),1(x9223372036854775807)", 0, "malformed"},
	} {
		_, err := fakeEnv{vars: srunVars("12", "0", tc.tasks, tc.node, 0, 0)}.read()
		if !errors.Is(err, ErrNoEnv) || errors.Is(err, ErrNoLauncher) || !strings.Contains(err.Error(), tc.want) ||
			!strings.Contains(err.Error(), "SLURM_STEP_TASKS_PER_NODE") {
			t.Errorf("%q node %d: %v; want an error naming SLURM_STEP_TASKS_PER_NODE and %q", tc.tasks, tc.node, err, tc.want)
		}
	}
}

// TestReadEnvNoLauncher: no launcher variable, a batch script, an salloc
// shell or Slurm's special steps: no launcher, so JoinEnv runs a world of
// one; a task of a batch script is not a step of the allocation's tasks.
func TestReadEnvNoLauncher(t *testing.T) {
	for name, vars := range map[string]map[string]string{
		"nothing":          nil,
		"sbatch":           sbatchVars,
		"salloc":           {"SLURM_JOB_ID": "5", "SLURM_TASKS_PER_NODE": "4", "SLURM_NTASKS": "4"},
		"batch step id":    with(sbatchVars, "SLURM_STEP_ID", "4294967291", "SLURM_STEP_TASKS_PER_NODE", "1"),
		"interactive step": with(sbatchVars, "SLURM_STEP_ID", "4294967290", "SLURM_STEPID", "4294967290", "SLURM_STEP_TASKS_PER_NODE", "1"),
		"empty shmrun":     {EnvRank: "", EnvSize: "", EnvArena: ""},
		"srun --pty bash":  with(srunVars("5", "0", "1", 0, 0, 0), "SLURM_PTY_PORT", "40123"),
	} {
		if j, err := (fakeEnv{vars: vars}).read(); !errors.Is(err, ErrNoLauncher) || !errors.Is(err, ErrNoEnv) {
			t.Errorf("%s: %+v, %v; want an error wrapping ErrNoLauncher", name, j, err)
		}
	}
}

// TestReadEnvPrecedence: shmrun's variables over Open MPI's over MPICH's
// over Slurm's.
func TestReadEnvPrecedence(t *testing.T) {
	shmrun := map[string]string{EnvRank: "1", EnvSize: "2", EnvArena: "fd:3"}
	ompi := map[string]string{"OMPI_COMM_WORLD_LOCAL_RANK": "2", "OMPI_COMM_WORLD_LOCAL_SIZE": "4", "OMPI_MCA_ess_base_jobid": "8"}
	hydra := map[string]string{"MPI_LOCALRANKID": "3", "MPI_LOCALNRANKS": "5"}
	slurm := srunVars("9", "0", "6", 0, 4, 4)
	all := func(ms ...map[string]string) map[string]string {
		out := map[string]string{}
		for _, m := range ms {
			maps.Copy(out, m)
		}
		return out
	}
	for _, tc := range []struct {
		vars   map[string]string
		source string
		rank   int
	}{
		{all(slurm, hydra, ompi, shmrun), "shmcoll", 1},
		{all(slurm, hydra, ompi), "openmpi", 2},
		{all(slurm, hydra), "mpich", 3},
		{slurm, "slurm", 4},
		{with(slurm, "SLURM_PTY_PORT", "40123"), "slurm", 4}, // srun --pty with several tasks
	} {
		j, err := fakeEnv{vars: tc.vars, proxy: 1}.read()
		if err != nil || j.Source != tc.source || j.Rank != tc.rank {
			t.Errorf("%v: %+v, %v; want %s rank %d", tc.vars, j, err, tc.source, tc.rank)
		}
	}
}

// TestReadEnvIncomplete: launcher variables that are incomplete, malformed
// or of a launcher ReadEnv does not read fail with an error naming them,
// never as a world of one.
func TestReadEnvIncomplete(t *testing.T) {
	step := srunVars("9", "2", "3", 0, 1, 1)
	for _, tc := range []struct {
		vars map[string]string
		want []string
		is   error
	}{
		{map[string]string{EnvRank: "1"}, []string{`SHMCOLL_SIZE=""`}, ErrNoEnv},
		{map[string]string{EnvRank: "1", EnvSize: "2"}, []string{`""`, "want 1..64 bytes"}, ErrBadName},
		{map[string]string{EnvArena: "x", EnvSize: "2"}, []string{`SHMCOLL_RANK=""`}, ErrNoEnv},
		{map[string]string{EnvRank: "one", EnvSize: "2", EnvArena: "x"}, []string{`SHMCOLL_RANK="one"`}, ErrNoEnv},
		{map[string]string{EnvRank: "2", EnvSize: "2", EnvArena: "x"}, []string{"rank 2 of 2"}, ErrBadSize},
		{map[string]string{"OMPI_COMM_WORLD_LOCAL_RANK": "0"}, []string{"OMPI_COMM_WORLD_LOCAL_SIZE"}, ErrNoEnv},
		{map[string]string{"OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"},
			[]string{"OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"}, ErrNoEnv},
		{map[string]string{"OMPI_COMM_WORLD_LOCAL_RANK": "-1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "PMIX_NAMESPACE": "x"},
			[]string{"rank -1 of 2 from the openmpi environment"}, ErrBadSize},
		{map[string]string{"MPI_LOCALRANKID": "0"}, []string{"MPI_LOCALNRANKS"}, ErrNoEnv},
		{map[string]string{"MPI_LOCALNRANKS": "2", "PMI_RANK": "1"}, []string{`MPI_LOCALNRANKS="2"`, `PMI_RANK="1"`}, ErrNoEnv},
		{map[string]string{"PMI_RANK": "1", "PMI_SIZE": "4"}, []string{`PMI_RANK="1"`}, ErrNoEnv},
		{with(sbatchVars, "PMIX_RANK", "3"), []string{`PMIX_RANK="3"`}, ErrNoEnv},
		{map[string]string{"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4"}, []string{`OMPI_COMM_WORLD_RANK="3"`}, ErrNoEnv},
		{map[string]string{"MV2_COMM_WORLD_RANK": "1"}, []string{"MV2_COMM_WORLD_RANK"}, ErrNoEnv},
		{map[string]string{"PALS_RANKID": "1"}, []string{"PALS_RANKID"}, ErrNoEnv},
		{map[string]string{"ALPS_APP_PE": "1"}, []string{"ALPS_APP_PE"}, ErrNoEnv},
		{map[string]string{"FLUX_TASK_RANK": "1"}, []string{"FLUX_TASK_RANK"}, ErrNoEnv},
		{map[string]string{"JSM_NAMESPACE_RANK": "1"}, []string{"JSM_NAMESPACE_RANK"}, ErrNoEnv},
		{with(step, "SLURM_STEP_TASKS_PER_NODE", ""), []string{"Slurm step 2 without SLURM_STEP_TASKS_PER_NODE"}, ErrNoEnv},
		{with(step, "SLURM_LOCALID", "", "SLURM_NODEID", ""), []string{"SLURM_LOCALID, SLURM_NODEID"}, ErrNoEnv},
		{with(step, "SLURM_JOB_ID", "", "SLURM_JOBID", ""), []string{"SLURM_JOB_ID"}, ErrNoEnv},
		{with(step, "SLURM_STEP_ID", "x"), []string{`SLURM_STEP_ID="x"`}, ErrNoEnv},
		{with(step, "SLURM_STEP_ID", "", "SLURM_STEPID", "-1"), []string{`SLURM_STEPID="-1"`}, ErrNoEnv},
		{with(step, "SLURM_NODEID", "n1"), []string{`SLURM_NODEID="n1"`}, ErrNoEnv},
		{with(step, "SLURM_NODEID", "-1"), []string{`SLURM_NODEID="-1"`}, ErrNoEnv},
		{with(step, "SLURM_LOCALID", "3"), []string{"rank 3 of 3"}, ErrBadSize},
		{with(step, "PMI_RANK", "0"), []string{`PMI_RANK="0"`, "another launcher"}, ErrNoEnv},
		{with(step, "MV2_COMM_WORLD_RANK", "5"), []string{`MV2_COMM_WORLD_RANK="5"`}, ErrNoEnv},
	} {
		j, err := fakeEnv{vars: tc.vars}.read()
		ok := errors.Is(err, tc.is) && !errors.Is(err, ErrNoLauncher)
		for _, w := range tc.want {
			ok = ok && strings.Contains(err.Error(), w)
		}
		if !ok {
			t.Errorf("%v: %+v, %v; want an error wrapping %v naming %q", tc.vars, j, err, tc.is, tc.want)
		}
	}
	// Slurm's MPI plugins set PMI_RANK and PMIX_RANK to the task's rank.
	if j, err := (fakeEnv{vars: with(step, "PMI_RANK", "1", "PMIX_RANK", "1")}).read(); err != nil || j.Rank != 1 || j.Size != 3 {
		t.Errorf("srun --mpi: %+v, %v", j, err)
	}
}

// TestArenaName: names of any length are valid, stay apart and are the
// same for the same parts.
func TestArenaName(t *testing.T) {
	long := strings.Repeat("prterun-verylonghostname.example.org-", 3)
	a, b := arenaName("ompi", "node.example.org", long+"1"), arenaName("ompi", "node.example.org", long+"2")
	if a == b || a != arenaName("ompi", "node.example.org", long+"1") || !strings.HasPrefix(a, "ompi-") {
		t.Errorf("long names %q, %q", a, b)
	}
	for _, n := range []string{a, b, arenaName("x", "a/b", "", "c d"), arenaName("slurm", "1", "2", "3")} {
		if err := ValidName(n); err != nil {
			t.Error(err)
		}
	}
	if n := arenaName("x", "a/b", "", "c d"); n != "x-a_b-c_d" {
		t.Errorf("got %q", n)
	}
	if arenaName("m", "a-b", "c") == arenaName("m", "a", "b-c") && len(arenaName("m", "a-b", "c")) > maxName {
		t.Error("hash ignores part boundaries")
	}
}

// TestJoinEnvSingleton: without a launcher JoinEnv returns the only rank of
// a world of one, unless a launcher is required.
func TestJoinEnvSingleton(t *testing.T) {
	clearLauncherEnv(t)
	e, err := JoinEnv(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if e.Rank() != 0 || e.Size() != 1 {
		t.Errorf("rank %d of %d", e.Rank(), e.Size())
	}
	// A rank of one waits for nobody.
	e.Post(0, 1)
	if err := e.Wait(context.Background(), 0, 0, 1); err != nil {
		t.Error(err)
	}
	if err := e.Close(); err != nil {
		t.Error(err)
	}
	if _, err := JoinEnv(context.Background(), Options{RequireLauncher: true}); !errors.Is(err, ErrNoLauncher) {
		t.Errorf("RequireLauncher: %v", err)
	}
	t.Setenv(EnvRequireLauncher, "1")
	if _, err := JoinEnv(context.Background(), Options{}); !errors.Is(err, ErrNoLauncher) {
		t.Errorf("%s=1: %v", EnvRequireLauncher, err)
	}
	t.Setenv(EnvRequireLauncher, "0")
	if e, err := JoinEnv(context.Background(), Options{}); err != nil || e.Size() != 1 {
		t.Errorf("%s=0: %v", EnvRequireLauncher, err)
	} else {
		e.Close()
	}
	t.Setenv(EnvRequireLauncher, "maybe")
	if _, err := JoinEnv(context.Background(), Options{}); !errors.Is(err, ErrNoEnv) || !strings.Contains(err.Error(), EnvRequireLauncher) {
		t.Errorf("%s=maybe: %v", EnvRequireLauncher, err)
	}
	// Launcher variables that do not say how to join are an error, not a
	// world of one.
	t.Setenv(EnvRequireLauncher, "")
	t.Setenv("PMI_RANK", "1")
	if _, err := JoinEnv(context.Background(), Options{}); !errors.Is(err, ErrNoEnv) || errors.Is(err, ErrNoLauncher) {
		t.Errorf("PMI_RANK: %v", err)
	}
}

// FuzzTasksOnNode: any per-node list and index either fail or give a count
// of at least one task at a node index of at least 0.
func FuzzTasksOnNode(f *testing.F) {
	for _, s := range []string{"2(x3),1", "1", "4(x2)", "2(x3", "", "0", "1(x16777216),1", "3,2(x2),7(x1)"} {
		f.Add(s, 2)
	}
	f.Fuzz(func(t *testing.T, spec string, node int) {
		n, err := tasksOnNode(spec, node)
		if err == nil && n < 1 {
			t.Fatalf("%q node %d: %d tasks", spec, node, n)
		}
		if err == nil && node < 0 {
			t.Fatalf("%q node %d: accepted a negative index", spec, node)
		}
	})
}
