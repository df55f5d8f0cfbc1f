// Package launch starts the ranks of a shmcoll job: N local processes of one
// program, with the environment that lets them join one arena.
//
// Each rank gets SHMCOLL_RANK, SHMCOLL_SIZE and SHMCOLL_ARENA (and
// SHMCOLL_CPU when it is bound); a program joins with one call (shm.JoinEnv,
// or collectives.JoinEnv above it).
//
// The arena. By default ([ArenaMemfd]) the launcher creates it in a memfd
// (shm.CreateFD) that every rank inherits as descriptor 3,
// SHMCOLL_ARENA=fd:3: nothing ever appears in /dev/shm, and a small /dev/shm
// (64 MiB in a default container) does not limit it. With [ArenaNamed]
// SHMCOLL_ARENA is a fresh name shmcoll.<uid>.<nonce>: rank 0 creates the
// segment, the others join it, the last to join unlinks it, and the launcher
// removes whatever a job that died before all joined left behind.
//
// The ranks' output is prefixed line by line with "[rank] "; lines of
// different ranks never interleave. As soon as one rank fails (non-zero
// status or death by a signal) the others get SIGTERM and, after a grace
// period, SIGKILL; [Job.Wait] names the first rank that failed. Each rank is
// its own process group, killed with it, and on Linux dies with the
// launcher (PR_SET_PDEATHSIG).
//
// Binding. With [BindAuto], [BindCore] or [BindSocket] each rank is bound
// from birth: the launcher forks it from a thread that carries the rank's
// CPU mask, so every thread of the rank inherits the mask and a Go rank
// sizes GOMAXPROCS to it. BindAuto gives each rank its own set of whole
// cores when there are at least as many cores as ranks (GOMAXPROCS: the
// CPUs of the set), and one CPU otherwise (GOMAXPROCS 1); BindCore always
// one CPU.
// CPUs come from a numa plan ([numa.Compact] or [numa.Spread]) on
// numa.Default() or Config.Topology; on a fake topology (SHMCOLL_TOPOLOGY)
// fake CPUs map onto the host's modulo its CPU count. The rank need not pin
// itself; SHMCOLL_CPU tells it which planned CPU it got.
//
// cmd/shmrun is the command-line front end; shmbench uses this package too.
package launch
