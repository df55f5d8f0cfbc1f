package launch

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"testing"

	"github.com/shmcoll/shmcoll/launch/launchtest"
)

// BenchmarkJob measures the time to start and wait for a whole job: np
// copies of /bin/true, of a Go program that exits at once, and of a Go
// program that joins its arena (memfd or named) and exchanges one round of
// posts.
func BenchmarkJob(b *testing.B) {
	truePath, err := exec.LookPath("true")
	if err != nil {
		b.Skip("no true")
	}
	for _, np := range []int{1, 4, 8} {
		for _, tc := range []struct {
			name string
			cfg  Config
		}{
			{"prog=true", Config{Prog: truePath}},
			{"prog=go", Config{Prog: os.Args[0], Args: []string{"exit:0"}}},
			{"prog=go-join/arena=memfd", Config{Prog: os.Args[0], Args: []string{"join"}}},
			{"prog=go-join/arena=named", Config{Prog: os.Args[0], Args: []string{"join"}, ArenaKind: ArenaNamed}},
		} {
			b.Run(fmt.Sprintf("%s/np=%d", tc.name, np), func(b *testing.B) {
				cfg := tc.cfg
				cfg.NP = np
				cfg.Env = []string{launchtest.Env + "=1"}
				cfg.Stdout, cfg.Stderr = io.Discard, io.Discard
				b.ReportAllocs()
				for b.Loop() {
					j, err := Start(context.Background(), cfg)
					if err != nil {
						b.Fatal(err)
					}
					if err := j.Wait(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
