package collectives_test

import (
	"context"
	"fmt"

	"github.com/shmcoll/shmcoll/collectives"
)

// A selection table that sends allreduce on two ranks to ring below 1 MiB
// and leaves larger sizes to the default heuristic. shmbench tune writes
// such tables; SHMCOLL_TUNE_FILE or Options.Table puts one in use.
func ExampleParseTable() {
	tab, err := collectives.ParseTable("example.txt", []byte(`
# collective  p  cpus  from  to   algorithm  ordered
allreduce     2  fit   0     1M   ring       flat     # ordered: for non-commutative operators
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	err = collectives.Run(2, collectives.Options{Table: tab}, func(c *collectives.Comm) error {
		x := []float64{1, 2, 3}
		if err := collectives.Allreduce(context.Background(), c, x, x, collectives.Sum); err != nil {
			return err
		}
		if c.Rank() == 0 {
			fmt.Println(x, c.LastAlgorithm())
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output: [2 4 6] ring
}
