package launch_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/shmcoll/shmcoll/launch"
)

func ExampleStart() {
	job, err := launch.Start(context.Background(), launch.Config{
		NP:   3,
		Prog: "sh",
		Args: []string{"-c", `echo "rank $SHMCOLL_RANK of $SHMCOLL_SIZE, arena $SHMCOLL_ARENA"`},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := job.Wait(); err != nil {
		fmt.Println(err)
	}
	// Unordered output:
	// [0] rank 0 of 3, arena fd:3
	// [1] rank 1 of 3, arena fd:3
	// [2] rank 2 of 3, arena fd:3
}

func ExampleJob_Wait() {
	job, err := launch.Start(context.Background(), launch.Config{
		NP:   4,
		Prog: "sh",
		// Rank 2 fails at once; the others would sleep, but are killed.
		Args:   []string{"-c", `[ "$SHMCOLL_RANK" = 2 ] && exit 7; sleep 60`},
		Stderr: os.Stdout,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	var re *launch.RankError
	if err := job.Wait(); errors.As(err, &re) {
		fmt.Println("rank", re.Rank, "failed; exit code", re.ExitCode())
	}
	// Output: rank 2 failed; exit code 7
}
