package probe_test

import (
	"fmt"

	"github.com/shmcoll/shmcoll/internal/probe"
)

// Record where the hypervisor has put CPUs 0 and 1 before a benchmark block.
func ExamplePlacement() {
	r, err := probe.Placement(0) // about 50 ms
	if err != nil {
		fmt.Println("no placement probe:", err)
		return
	}
	fmt.Printf("one-way handoff %.0f ns (least disturbed trial %.0f ns)\n", r.OneWayNS, r.MinNS)
}
