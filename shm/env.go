package shm

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"strings"
)

// Environment variables read by JoinEnv.
const (
	EnvRank  = "SHMCOLL_RANK"
	EnvSize  = "SHMCOLL_SIZE"
	EnvArena = "SHMCOLL_ARENA"
	// EnvRequireLauncher, set to 1 (or true), makes JoinEnv fail where no
	// launcher variable is set instead of joining a world of one rank, as
	// Options.RequireLauncher does.
	EnvRequireLauncher = "SHMCOLL_REQUIRE_LAUNCHER"
)

// EnvJoin is how JoinEnv would join, as read from the environment.
type EnvJoin struct {
	Rank, Size int    // the node-local rank and number of ranks
	Name       string // arena name for Join, or ""
	FD         int    // inherited arena file descriptor for JoinFile, or -1
	Source     string // "shmcoll" (shmrun), "openmpi", "mpich" or "slurm"
}

// ReadEnv reads how to join from the environment of the launcher that
// started the process. It tries, in this order:
//
//   - shmrun's SHMCOLL_RANK, SHMCOLL_SIZE and SHMCOLL_ARENA (a name, or fd:N
//     for an inherited memfd);
//   - Open MPI's mpirun (4 and 5): OMPI_COMM_WORLD_LOCAL_RANK and
//     OMPI_COMM_WORLD_LOCAL_SIZE, the arena named after the job
//     (OMPI_MCA_ess_base_jobid, or PMIX_NAMESPACE) and the node
//     (PMIX_HOSTNAME);
//   - MPICH's Hydra (mpiexec, mpirun): MPI_LOCALRANKID and MPI_LOCALNRANKS,
//     the arena named after the node's Hydra proxy, the process at the other
//     end of the rank's PMI_FD (or else the parent), since Hydra puts no job
//     id in the environment;
//   - a Slurm job step (srun): SLURM_LOCALID, and the number of tasks on
//     this node from SLURM_STEP_TASKS_PER_NODE (such as "2(x3),1") at
//     SLURM_NODEID, the arena named after SLURM_JOB_ID, SLURM_STEP_ID and
//     SLURM_NODEID.
//
// The MPI launchers come before Slurm because the ranks of an mpirun inside
// a Slurm allocation inherit the allocation's SLURM_* variables. A batch
// script (sbatch) or an salloc shell is no job step: it has no
// SLURM_STEP_ID, or one of Slurm's special step ids; nor is the shell of
// srun --pty (SLURM_PTY_PORT set, one task on the node).
//
// With none of these, ReadEnv returns an error wrapping [ErrNoLauncher]
// when no launcher variable is set at all (JoinEnv then joins a world of
// one), and otherwise an error wrapping [ErrNoEnv] that names the variables
// that are set: those of a launcher above, incomplete or malformed, or the
// rank variables of a launcher ReadEnv does not read (PMI_RANK, PMIX_RANK,
// OMPI_COMM_WORLD_RANK, MV2_COMM_WORLD_RANK, PALS_RANKID, ALPS_APP_PE,
// FLUX_TASK_RANK, JSM_NAMESPACE_RANK). Such a process is one of several
// ranks that cannot tell their arena, and must not run alone.
func ReadEnv() (EnvJoin, error) {
	return processEnv.read()
}

// environ is what ReadEnv reads: the environment, and for Hydra the process
// serving the rank's PMI connection. Tests fake both.
type environ struct {
	get func(key string) string
	// hydraProxy returns the pid and start time of the Hydra proxy of the
	// rank whose PMI_FD is pmiFD.
	hydraProxy func(pmiFD string) (pid int, start uint64)
}

var processEnv = environ{get: os.Getenv, hydraProxy: hydraProxy}

// hydraProxy returns the process at the other end of the PMI socket pmiFD,
// which Hydra's proxy created, or else the parent: a rank started through a
// wrapper script still finds its proxy.
func hydraProxy(pmiFD string) (int, uint64) {
	pid := 0
	if fd, err := strconv.Atoi(pmiFD); err == nil && fd >= 0 {
		pid = socketPeer(fd)
	}
	if pid <= 0 {
		pid = os.Getppid()
	}
	return pid, procStartOf(pid)
}

// foreignVars are the rank variables of launchers that ReadEnv does not
// read, or that say nothing about the node: set without a launcher ReadEnv
// reads, they mean that the process is one of several ranks.
var foreignVars = []string{
	"OMPI_COMM_WORLD_RANK", // Open MPI without the local rank
	"MPI_LOCALNRANKS",      // Hydra without the local rank
	"PMI_RANK",             // PMI-1 and PMI-2 launchers (Hydra, gforker, Slurm's mpi/pmi2, Flux, Cray)
	"PMIX_RANK",            // PMIx launchers (prterun, Slurm's mpi/pmix)
	"MV2_COMM_WORLD_RANK",  // MVAPICH's mpirun_rsh
	"PALS_RANKID",          // Cray PALS
	"ALPS_APP_PE",          // Cray ALPS
	"FLUX_TASK_RANK",       // Flux
	"JSM_NAMESPACE_RANK",   // IBM jsrun
}

// read implements ReadEnv.
func (env environ) read() (EnvJoin, error) {
	var j EnvJoin
	var err error
	switch {
	case env.get(EnvRank) != "" || env.get(EnvSize) != "" || env.get(EnvArena) != "":
		j, err = env.shmrun()
	case env.get("OMPI_COMM_WORLD_LOCAL_RANK") != "":
		j, err = env.openMPI()
	case env.get("MPI_LOCALRANKID") != "":
		j, err = env.hydra()
	default:
		var step bool
		if j, step, err = env.slurm(); err == nil && !step {
			if set := env.setVars(foreignVars...); len(set) > 0 {
				return j, fmt.Errorf("%w: %s set, but not the variables of a launcher shmcoll reads (shmrun, Open MPI's or MPICH's mpirun, Slurm's srun): %s",
					ErrNoEnv, plural(len(set), "launcher variable"), strings.Join(set, " "))
			}
			return j, fmt.Errorf("%w: set %s, %s and %s (shmrun does), or run under mpirun or srun", ErrNoLauncher, EnvRank, EnvSize, EnvArena)
		}
	}
	if err != nil {
		return j, err
	}
	if j.Size < 1 || j.Rank < 0 || j.Rank >= j.Size {
		return j, fmt.Errorf("%w: rank %d of %d from the %s environment", ErrBadSize, j.Rank, j.Size, j.Source)
	}
	return j, nil
}

// setVars returns "KEY=value" for each of keys that is set.
func (env environ) setVars(keys ...string) []string {
	var set []string
	for _, k := range keys {
		if v := env.get(k); v != "" {
			set = append(set, k+"="+strconv.Quote(v))
		}
	}
	return set
}

func plural(n int, what string) string {
	if n == 1 {
		return what
	}
	return what + "s"
}

// need returns the values of keys, or an error naming the launcher and the
// keys that are not set.
func (env environ) need(launcher string, keys ...string) ([]string, error) {
	vals := make([]string, len(keys))
	var missing []string
	for i, k := range keys {
		if vals[i] = env.get(k); vals[i] == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %s without %s", ErrNoEnv, launcher, strings.Join(missing, ", "))
	}
	return vals, nil
}

// num parses the value v of key as an int.
func num(key, v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%w: %s=%q is not a number", ErrNoEnv, key, v)
	}
	return n, nil
}

// rankSize parses a rank and a size.
func rankSize(rankKey, rank, sizeKey, size string) (int, int, error) {
	r, err := num(rankKey, rank)
	if err != nil {
		return 0, 0, err
	}
	s, err := num(sizeKey, size)
	return r, s, err
}

func (env environ) shmrun() (EnvJoin, error) {
	j := EnvJoin{FD: -1, Source: "shmcoll"}
	var err error
	if j.Rank, j.Size, err = rankSize(EnvRank, env.get(EnvRank), EnvSize, env.get(EnvSize)); err != nil {
		return j, err
	}
	a := env.get(EnvArena)
	if fd, ok := strings.CutPrefix(a, "fd:"); ok {
		if j.FD, err = strconv.Atoi(fd); err != nil || j.FD < 0 {
			return j, fmt.Errorf("%w: %s=%q: bad file descriptor", ErrNoEnv, EnvArena, a)
		}
	} else if err := ValidName(a); err != nil {
		return j, fmt.Errorf("%s: %w", EnvArena, err)
	} else {
		j.Name = a
	}
	return j, nil
}

func (env environ) openMPI() (EnvJoin, error) {
	j := EnvJoin{FD: -1, Source: "openmpi"}
	v, err := env.need("Open MPI", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE")
	if err != nil {
		return j, err
	}
	if j.Rank, j.Size, err = rankSize("OMPI_COMM_WORLD_LOCAL_RANK", v[0], "OMPI_COMM_WORLD_LOCAL_SIZE", v[1]); err != nil {
		return j, err
	}
	id := env.get("OMPI_MCA_ess_base_jobid") // Open MPI 4
	if id == "" {
		id = env.get("PMIX_NAMESPACE") // Open MPI 5
	}
	if id == "" {
		return j, fmt.Errorf("%w: Open MPI without OMPI_MCA_ess_base_jobid or PMIX_NAMESPACE", ErrNoEnv)
	}
	j.Name = arenaName("ompi", env.get("PMIX_HOSTNAME"), id)
	return j, nil
}

func (env environ) hydra() (EnvJoin, error) {
	j := EnvJoin{FD: -1, Source: "mpich"}
	v, err := env.need("MPICH's Hydra", "MPI_LOCALRANKID", "MPI_LOCALNRANKS")
	if err != nil {
		return j, err
	}
	if j.Rank, j.Size, err = rankSize("MPI_LOCALRANKID", v[0], "MPI_LOCALNRANKS", v[1]); err != nil {
		return j, err
	}
	// All ranks of a Hydra job on one node are served by one proxy.
	pid, start := env.hydraProxy(env.get("PMI_FD"))
	j.Name = arenaName("mpich", env.get("MPIR_CVAR_CH3_INTERFACE_HOSTNAME"), strconv.Itoa(pid), strconv.FormatUint(start, 10))
	return j, nil
}

// Slurm's step ids from this one up are special: the batch script, the
// extern step, the interactive step (salloc), a pending step. None is a
// step of tasks started by srun.
const slurmSpecialStep = 0xfffffff0

// slurm reads the environment of a task of a Slurm job step, started by
// srun; step reports whether there is one.
func (env environ) slurm() (j EnvJoin, step bool, err error) {
	j = EnvJoin{FD: -1, Source: "slurm"}
	stepKey := "SLURM_STEP_ID"
	stepID := env.get(stepKey)
	if stepID == "" {
		stepKey = "SLURM_STEPID"
		stepID = env.get(stepKey)
	}
	if stepID == "" {
		return j, false, nil
	}
	if id, err := strconv.ParseUint(stepID, 10, 32); err != nil {
		return j, true, fmt.Errorf("%w: %s=%q is not a Slurm step id", ErrNoEnv, stepKey, stepID)
	} else if id >= slurmSpecialStep {
		return j, false, nil
	}
	jobKey := "SLURM_JOB_ID"
	if env.get(jobKey) == "" && env.get("SLURM_JOBID") != "" {
		jobKey = "SLURM_JOBID"
	}
	v, err := env.need("Slurm step "+stepID, jobKey, "SLURM_LOCALID", "SLURM_NODEID", "SLURM_STEP_TASKS_PER_NODE")
	if err != nil {
		return j, true, err
	}
	if j.Rank, err = num("SLURM_LOCALID", v[1]); err != nil {
		return j, true, err
	}
	node, err := num("SLURM_NODEID", v[2])
	if err != nil || node < 0 {
		return j, true, fmt.Errorf("%w: SLURM_NODEID=%q is not a node index", ErrNoEnv, v[2])
	}
	if j.Size, err = tasksOnNode(v[3], node); err != nil {
		return j, true, fmt.Errorf("%w: SLURM_STEP_TASKS_PER_NODE=%q at SLURM_NODEID=%d: %v", ErrNoEnv, v[3], node, err)
	}
	if j.Size == 1 && env.get("SLURM_PTY_PORT") != "" {
		// srun --pty bash: a shell, whose programs are not the step's tasks.
		return j, false, nil
	}
	// Another launcher inside the step: its ranks are not the step's tasks.
	// Slurm's own MPI plugins set PMI_RANK and PMIX_RANK to the task's
	// SLURM_PROCID.
	var other []string
	for _, kv := range env.setVars(foreignVars...) {
		k, val, _ := strings.Cut(kv, "=")
		if (k == "PMI_RANK" || k == "PMIX_RANK") && val == strconv.Quote(env.get("SLURM_PROCID")) {
			continue
		}
		other = append(other, kv)
	}
	if len(other) > 0 {
		return j, true, fmt.Errorf("%w: Slurm step %s with the variables of another launcher: %s", ErrNoEnv, stepID, strings.Join(other, " "))
	}
	j.Name = arenaName("slurm", v[0], stepID, strconv.Itoa(node))
	return j, true, nil
}

// tasksOnNode returns the count at index node of a Slurm per-node list such
// as "2(x3),1" (2, 2, 2, 1): comma-separated counts, each optionally
// repeated with "(xN)". The whole list must be well-formed.
func tasksOnNode(spec string, node int) (int, error) {
	at, tasks := 0, 0
	for _, item := range strings.Split(spec, ",") {
		count, reps := item, "1"
		if c, r, ok := strings.Cut(item, "(x"); ok {
			var closed bool
			count, closed = c, strings.HasSuffix(r, ")")
			if reps = strings.TrimSuffix(r, ")"); !closed {
				return 0, fmt.Errorf("malformed item %q", item)
			}
		}
		n, err1 := strconv.Atoi(count)
		k, err2 := strconv.Atoi(reps)
		if err1 != nil || err2 != nil || n < 1 || k < 1 || n > maxListed || k > maxListed-at {
			return 0, fmt.Errorf("malformed item %q", item)
		}
		if at <= node && node < at+k {
			tasks = n
		}
		at += k
	}
	if tasks == 0 {
		return 0, fmt.Errorf("only %d nodes", at)
	}
	return tasks, nil
}

// maxListed bounds the counts and the length of a per-node list, far
// above any machine's, so that the sums cannot overflow.
const maxListed = 1 << 24

// maxName is the longest nonce an arena name may have (see ValidName).
const maxName = 64

// arenaName joins the launcher's name and the parts that identify the job
// on this node into an arena name: bytes a name may not hold become '_',
// empty parts are left out, and a name that would be too long becomes the
// launcher's name and a hash of the parts.
func arenaName(launcher string, parts ...string) string {
	b := []byte(launcher)
	for _, p := range parts {
		if p == "" {
			continue
		}
		b = append(b, '-')
		for i := 0; i < len(p); i++ {
			c := p[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
				c = '_'
			}
			b = append(b, c)
		}
	}
	if len(b) <= maxName {
		return string(b)
	}
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return fmt.Sprintf("%s-%016x", launcher, h.Sum64())
}

// JoinEnv joins the arena the environment describes (see [ReadEnv]): by
// name with [Join], or from an inherited memfd with [JoinFile], which it
// then closes.
//
// Where no launcher variable is set at all, JoinEnv returns the only rank
// of an in-process arena of one rank, as an MPI program started without
// mpirun runs as a world of one; unless opt.RequireLauncher is set, or
// SHMCOLL_REQUIRE_LAUNCHER is 1, which make it return ReadEnv's error
// (wrapping [ErrNoLauncher]) instead.
func JoinEnv(ctx context.Context, opt Options) (*Endpoint, error) {
	j, err := ReadEnv()
	if errors.Is(err, ErrNoLauncher) {
		required, perr := launcherRequired(opt)
		if perr != nil {
			return nil, perr
		}
		if !required {
			eps, err := NewLocal(1, opt)
			if err != nil {
				return nil, err
			}
			return eps[0], nil
		}
	}
	if err != nil {
		return nil, err
	}
	if j.FD >= 0 {
		f := os.NewFile(uintptr(j.FD), "shmcoll-arena")
		if f == nil {
			return nil, fmt.Errorf("%w: %s=fd:%d is not open", ErrNoEnv, EnvArena, j.FD)
		}
		defer f.Close()
		return JoinFile(ctx, f, j.Rank, j.Size, opt)
	}
	return Join(ctx, j.Name, j.Rank, j.Size, opt)
}

// launcherRequired reports whether opt or SHMCOLL_REQUIRE_LAUNCHER asks
// JoinEnv for a launcher.
func launcherRequired(opt Options) (bool, error) {
	if opt.RequireLauncher {
		return true, nil
	}
	v := os.Getenv(EnvRequireLauncher)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%w: %s=%q: want 1 or 0", ErrNoEnv, EnvRequireLauncher, v)
	}
	return b, nil
}
