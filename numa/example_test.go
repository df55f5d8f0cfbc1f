package numa_test

import (
	"fmt"

	"github.com/shmcoll/shmcoll/numa"
)

func ExampleParseFake() {
	top, err := numa.ParseFake("2x4x2")
	if err != nil {
		panic(err)
	}
	fmt.Println(top.Packages, "packages,", top.Cores, "cores,", len(top.CPUs), "CPUs")
	fmt.Println("siblings of core 0:", top.CPUs[0].ID, top.CPUs[8].ID)
	fmt.Println("node of CPU 12:", top.NodeOfCPU(12))
	// Output:
	// 2 packages, 8 cores, 16 CPUs
	// siblings of core 0: 0 8
	// node of CPU 12: 1
}

func ExampleTopology_Plan() {
	top, _ := numa.ParseFake("2x4")
	compact, _ := top.Plan(4, numa.Compact)
	spread, _ := top.Plan(4, numa.Spread)
	fmt.Println(compact, spread)
	// Output: [0 1 2 3] [0 4 1 5]
}

func ExamplePinThread() {
	top, err := numa.Default()
	if err != nil {
		panic(err)
	}
	plan, _ := top.Plan(4, numa.Compact)
	rank := 1
	if err := numa.PinThread(plan[rank]); err != nil {
		fmt.Println("not pinned:", err)
		return
	}
	defer numa.UnpinThread() // also unlocks the goroutine from its thread
	// ... this rank's work runs on CPU plan[rank] ...
}

func ExampleBindMemory() {
	// slot is page-aligned mapped memory, e.g. one rank's slot of an arena.
	var slot []byte
	if err := numa.BindMemory(slot, 0); err != nil {
		fmt.Println(err)
	}
}
