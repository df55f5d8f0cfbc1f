//go:build !(amd64 || arm64) || purego || noasm

package shm

// pause is the portable spin-wait hint: nothing; the caller's next load is
// the delay.
func pause() {}
