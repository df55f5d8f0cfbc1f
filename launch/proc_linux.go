package launch

import (
	"os/exec"
	"runtime"
	"syscall"

	"github.com/shmcoll/shmcoll/numa"
	"golang.org/x/sys/unix"
)

const canBind = true

// sysProcAttr puts each rank in its own process group (so that a terminal's
// SIGINT reaches it once, forwarded, and so that killing the group kills
// what the rank started) and kills it when the launcher dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// killGroup sends sig to the process group of cmd's process.
func killGroup(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = unix.Kill(-cmd.Process.Pid, sig)
}

// startBound starts cmd with its CPU affinity set to cpus (nil: unchanged).
//
// The affinity is inherited, not set afterwards: a locked thread takes the
// rank's mask, forks the rank, and takes its own mask back. So every thread
// of the rank is bound from its first instruction, and a Go rank computes
// GOMAXPROCS from it. The thread stays alive afterwards (Pdeathsig fires when
// the forking thread exits, so it must).
func startBound(cmd *exec.Cmd, cpus []int) error {
	if cpus == nil {
		return cmd.Start()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		saved, err := numa.Affinity(0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		if err := numa.SetAffinity(0, cpus); err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		err = cmd.Start()
		if rerr := numa.SetAffinity(0, saved); rerr == nil {
			runtime.UnlockOSThread()
		} else if err == nil {
			// The thread keeps the rank's mask: it stays locked and exits with
			// this goroutine, which would fire the rank's Pdeathsig; report it.
			err = rerr
		}
		errc <- err
	}()
	return <-errc
}
