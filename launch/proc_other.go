//go:build !linux

package launch

import (
	"fmt"
	"os/exec"
	"syscall"
)

const canBind = false

func sysProcAttr() *syscall.SysProcAttr { return nil }

func killGroup(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
}

func startBound(cmd *exec.Cmd, cpus []int) error {
	if cpus == nil {
		return cmd.Start()
	}
	return fmt.Errorf("%w: binding ranks to CPUs needs Linux", ErrNotSupported)
}
