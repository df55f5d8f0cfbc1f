package shm

import "golang.org/x/sys/unix"

// socketPeer returns the pid of the process at the other end of the Unix
// socket fd (for a socket pair, the process that created it), or 0.
func socketPeer(fd int) int {
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return 0
	}
	return int(cred.Pid)
}
