package collectives

import (
	"errors"
	"fmt"
	"testing"
)

// TestAlltoallvBand: with a band that keeps calls in which no rank sends
// more than limit bytes, goroutine ranks (p = 2 to 4; auto, small slots,
// pinned to Flat and to Single, so that blocks travel through slots, in
// segments and by offers) run calls alternately inside and outside the
// band. Only rank p-1 sends more than limit in the calls outside, and
// only to one peer, so no other rank knows it from its own counts: every
// rank must return ErrDeclined, with its receive buffer as it was, and
// the communicator must serve the next call with exact results.
func TestAlltoallvBand(t *testing.T) {
	const limit = 4000
	for p := 2; p <= 4; p++ {
		for _, mode := range []string{"auto", "auto-small", "flat", "single"} {
			t.Run(fmt.Sprintf("p=%d/%s", p, mode), func(t *testing.T) {
				pin := map[string]Algorithm{"flat": Flat, "single": Single}[mode]
				opt := a2avOptions(mode == "auto-small", pin, false)
				err := Run(p, opt, func(c *Comm) error {
					c.SetAlltoallvBand(func(b int) bool { return b <= limit })
					r := c.Rank()
					for call := range 6 {
						out := call%2 == 1
						sc, rc := make([]int, p), make([]int, p)
						for q := range p {
							sc[q], rc[q] = q+r+1, q+r+1 // int32s: far below limit in total
						}
						big := 20000 + call // more than limit bytes on its own
						if out && r == p-1 {
							sc[0] = big
						}
						if out && r == 0 {
							rc[p-1] = big
						}
						send, recv := a2avFill(r, call, sc), make([]int32, sum(rc))
						for i := range recv {
							recv[i] = -7
						}
						err := Alltoallv(bg, c, send, sc, nil, recv, rc, nil)
						if out {
							if !errors.Is(err, ErrDeclined) {
								return fmt.Errorf("rank %d call %d: %v, want ErrDeclined", r, call, err)
							}
							for i, v := range recv {
								if v != -7 {
									return fmt.Errorf("rank %d call %d: declined call wrote recv[%d] = %d", r, call, i, v)
								}
							}
							continue
						}
						if err != nil {
							return fmt.Errorf("rank %d call %d: %w", r, call, err)
						}
						off := 0
						for q := range p {
							for i := range rc[q] {
								if want := a2avValue(q, call, r, i); recv[off+i] != want {
									return fmt.Errorf("rank %d call %d: element %d from rank %d is %d, want %d", r, call, i, q, recv[off+i], want)
								}
							}
							off += rc[q]
						}
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// a2avValue is element i of what rank q sends rank t in call k.
func a2avValue(q, k, t, i int) int32 { return int32(q*1000000 + k*10000 + t*1000 + i%1000) }

// a2avFill is rank r's send buffer of call k: its blocks packed in rank
// order, counts sc.
func a2avFill(r, k int, sc []int) []int32 {
	s := make([]int32, 0, sum(sc))
	for t, n := range sc {
		for i := range n {
			s = append(s, a2avValue(r, k, t, i))
		}
	}
	return s
}
