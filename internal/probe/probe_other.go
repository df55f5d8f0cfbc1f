//go:build !linux

package probe

import (
	"errors"
	"fmt"
	"time"
)

// Handoff needs thread affinity, which this system does not offer here.
func Handoff(cpuA, cpuB int, d time.Duration) (Result, error) {
	return Result{}, fmt.Errorf("probe: pinning threads: %w", errors.ErrUnsupported)
}

// Placement needs thread affinity, which this system does not offer here.
func Placement(d time.Duration) (Result, error) {
	return Result{}, fmt.Errorf("probe: pinning threads: %w", errors.ErrUnsupported)
}
