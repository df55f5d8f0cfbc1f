package shm

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Environment variables read by JoinEnv.
const (
	EnvRank  = "SHMCOLL_RANK"
	EnvSize  = "SHMCOLL_SIZE"
	EnvArena = "SHMCOLL_ARENA"
)

// EnvJoin is how JoinEnv would join, as read from the environment.
type EnvJoin struct {
	Rank, Size int
	Name       string // arena name for Join, or ""
	FD         int    // inherited arena file descriptor for JoinFile, or -1
	Source     string // "shmcoll", "openmpi" or "mpich"
}

// ReadEnv reads the join parameters from the environment: SHMCOLL_RANK,
// SHMCOLL_SIZE and SHMCOLL_ARENA (a name, or fd:N) as shmrun sets them;
// otherwise, under mpirun, the node-local rank and size of Open MPI
// (OMPI_COMM_WORLD_LOCAL_RANK/SIZE, arena named after
// OMPI_MCA_ess_base_jobid or PMIX_NAMESPACE) or of MPICH's hydra
// (MPI_LOCALRANKID/MPI_LOCALNRANKS or PMI_RANK/PMI_SIZE, arena named after
// the parent hydra proxy, which hydra does not otherwise identify).
func ReadEnv() (EnvJoin, error) {
	getenv := os.Getenv
	j := EnvJoin{FD: -1}
	num := func(k string) (int, error) {
		v, err := strconv.Atoi(getenv(k))
		if err != nil {
			return 0, fmt.Errorf("%w: %s=%q is not a number", ErrNoEnv, k, getenv(k))
		}
		return v, nil
	}
	var err error
	switch {
	case getenv(EnvRank) != "" || getenv(EnvArena) != "":
		j.Source = "shmcoll"
		if j.Rank, err = num(EnvRank); err != nil {
			return j, err
		}
		if j.Size, err = num(EnvSize); err != nil {
			return j, err
		}
		a := getenv(EnvArena)
		if fd, ok := strings.CutPrefix(a, "fd:"); ok {
			if j.FD, err = strconv.Atoi(fd); err != nil || j.FD < 0 {
				return j, fmt.Errorf("%w: %s=%q: bad file descriptor", ErrNoEnv, EnvArena, a)
			}
		} else if err := ValidName(a); err != nil {
			return j, fmt.Errorf("%s: %w", EnvArena, err)
		} else {
			j.Name = a
		}
	case getenv("OMPI_COMM_WORLD_LOCAL_RANK") != "":
		j.Source = "openmpi"
		if j.Rank, err = num("OMPI_COMM_WORLD_LOCAL_RANK"); err != nil {
			return j, err
		}
		if j.Size, err = num("OMPI_COMM_WORLD_LOCAL_SIZE"); err != nil {
			return j, err
		}
		id := getenv("OMPI_MCA_ess_base_jobid")
		if id == "" {
			id = getenv("PMIX_NAMESPACE")
		}
		if id == "" {
			return j, fmt.Errorf("%w: Open MPI without OMPI_MCA_ess_base_jobid or PMIX_NAMESPACE", ErrNoEnv)
		}
		j.Name = "ompi-" + sanitize(id)
	case getenv("PMI_RANK") != "" || getenv("MPI_LOCALRANKID") != "":
		j.Source = "mpich"
		rk, sz := "MPI_LOCALRANKID", "MPI_LOCALNRANKS"
		if getenv(rk) == "" {
			rk, sz = "PMI_RANK", "PMI_SIZE"
		}
		if j.Rank, err = num(rk); err != nil {
			return j, err
		}
		if j.Size, err = num(sz); err != nil {
			return j, err
		}
		// All local ranks of a hydra job are children of one proxy.
		ppid := os.Getppid()
		j.Name = fmt.Sprintf("mpich-%d-%d", ppid, procStartOf(ppid))
	default:
		return j, fmt.Errorf("%w: set %s, %s and %s (shmrun does), or run under mpirun", ErrNoEnv, EnvRank, EnvSize, EnvArena)
	}
	if j.Size < 1 || j.Rank < 0 || j.Rank >= j.Size {
		return j, fmt.Errorf("%w: rank %d of %d from the %s environment", ErrBadSize, j.Rank, j.Size, j.Source)
	}
	return j, nil
}

// sanitize maps s to a valid name part: other bytes become '_', and long
// ids keep their tail.
func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) > 48 {
		b = b[len(b)-48:]
	}
	return string(b)
}

// JoinEnv joins the arena the environment describes (see [ReadEnv]): by
// name with [Join], or from an inherited memfd with [JoinFile], which it
// then closes.
func JoinEnv(ctx context.Context, opt Options) (*Endpoint, error) {
	j, err := ReadEnv()
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
