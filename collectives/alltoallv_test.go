package collectives

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/shmcoll/shmcoll/shm"
	"github.com/shmcoll/shmcoll/simd"
)

// a2avKinds is the number of alltoallv cases a2avMatrix makes.
const a2avKinds = 7

// a2avMatrix returns alltoallv case kind for p ranks around th elements,
// the smallest send total (own block included) that a sender offers by
// cross-memory attach: m[q][t] elements go from rank q to rank t. The
// row totals of the kinds: 0, odd ranks th and even ones th-1 (the ranks'
// choices differ); 1, every rank th-1; 2, every rank th; 3, rank 0 3th,
// the last rank nothing, the others th-1, and nobody sends to rank 1; 4,
// rank q q elements; 5, random from th/2 to 3th/2; 6, random from th-2 to
// th+1. Blocks of weight 0 (about a quarter) are empty.
func a2avMatrix(kind, p, th int, rng *rand.Rand) [][]int {
	m := make([][]int, p)
	for q := range p {
		var row int
		switch kind {
		case 0:
			row = th - 1 + q%2
		case 1:
			row = th - 1
		case 2:
			row = th
		case 3:
			row = th - 1
			if q == 0 {
				row = 3 * th
			} else if q == p-1 {
				row = 0
			}
		case 4:
			row = q
		case 5:
			row = th/2 + rng.IntN(th)
		default:
			row = th - 2 + rng.IntN(4)
		}
		w, sum := make([]int, p), 0
		for t := range p {
			w[t] = (q*5 + t*3 + kind) % 4
			if kind == 3 && t == 1 && p > 2 {
				w[t] = 0
			}
			sum += w[t]
		}
		if sum == 0 {
			w[q], sum = 1, 1
		}
		m[q] = make([]int, p)
		left, last := row, 0
		for t := range p {
			m[q][t] = row * w[t] / sum
			left -= m[q][t]
			if w[t] > 0 {
				last = t
			}
		}
		m[q][last] += left
	}
	return m
}

// a2avVal is element k of the block rank q sends rank t in call i: below
// mod, distinct for near (q, t, k, i); a2avMod(T) is the sentinel.
func a2avVal[T simd.Element](q, t, k, i int) T {
	return val[T]((q*1_000_003 + t*7919 + k*31 + i*17) % a2avMod[T]())
}

func a2avMod[T simd.Element]() int {
	if simd.TypeOf[T]().Size() == 1 {
		return 255
	}
	return 1 << 30
}

// a2avRun makes call i, the alltoallv of m, on c with gaps between the
// blocks of send and recv, and checks recv exactly: every block the
// sender's values, every gap the sentinel untouched. It reports whether
// this rank offered its blocks by cross-memory attach.
func a2avRun[T simd.Element](c *Comm, m [][]int, i int) (bool, error) {
	return a2avRunNB[T](c, m, i, false)
}

// a2avRunNB is a2avRun, by IAlltoallv if nb.
func a2avRunNB[T simd.Element](c *Comm, m [][]int, i int, nb bool) (bool, error) {
	p, r := c.Size(), c.Rank()
	sc, sd, rc, rd := make([]int, p), make([]int, p), make([]int, p), make([]int, p)
	so, ro := 0, 0
	for t := range p {
		sc[t], sd[t] = m[r][t], so+t%2
		so = sd[t] + sc[t]
		rc[t], rd[t] = m[t][r], ro+1
		ro = rd[t] + rc[t]
	}
	sentinel := val[T](a2avMod[T]())
	send := make([]T, so+1)
	for t := range p {
		for k := range sc[t] {
			send[sd[t]+k] = a2avVal[T](r, t, k, i)
		}
	}
	recv := make([]T, ro+1)
	for k := range recv {
		recv[k] = sentinel
	}
	var err error
	if nb {
		err = IAlltoallv(bg, c, send, sc, sd, recv, rc, rd).Wait()
	} else {
		err = Alltoallv(bg, c, send, sc, sd, recv, rc, rd)
	}
	if err != nil {
		return false, err
	}
	want := func(x int) T {
		for q := range p {
			if x >= rd[q] && x < rd[q]+rc[q] {
				return a2avVal[T](q, r, x-rd[q], i)
			}
		}
		return sentinel
	}
	for x, v := range recv {
		if w := want(x); v != w {
			return false, fmt.Errorf("rank %d: call %d: recv[%d] = %v, want %v (counts %v)", r, i, x, v, w, m)
		}
	}
	return c.a2avOffers(&call{alg: c.LastAlgorithm(), esz: simd.TypeOf[T]().Size(), counts: sc}), nil
}

// a2avThreshold is th of a2avMatrix for elements of esz bytes on c.
func a2avThreshold(c *Comm, esz int) int {
	return (singleMin(CollAlltoallv, c.Oversubscribed(), PlacementUnknown) + esz - 1) / esz
}

// a2avCalls makes calls alltoallvs of every kind in turn on c (matrices
// from seed, the same on every rank), and records in offered[i][rank]
// whether the rank offered its blocks in call i (offered nil: not
// recorded).
func a2avCalls[T simd.Element](c *Comm, seed uint64, calls int, offered [][]bool) error {
	rng := rand.New(rand.NewPCG(seed, 7))
	th := a2avThreshold(c, simd.TypeOf[T]().Size())
	for i := range calls {
		m := a2avMatrix(i%a2avKinds, c.Size(), th, rng)
		o, err := a2avRun[T](c, m, i)
		if err != nil {
			return err
		}
		if offered != nil {
			offered[i][c.Rank()] = o
		}
	}
	return nil
}

// a2avOptions are the test's communicators: small slots (several slot
// steps next to one cross-memory copy) or the default; pin (Auto: none)
// for alltoallv; cross-memory attach off.
func a2avOptions(small bool, pin Algorithm, off bool) Options {
	o := Options{NoCrossMemory: off}
	if small {
		o.SlotBytes = 4096
	}
	if pin != Auto {
		o.Algorithms = map[Collective]Algorithm{CollAlltoallv: pin}
	}
	return o
}

// TestAlltoallvChoice: goroutine ranks, p = 2 to 5, every kind of
// a2avMatrix, int32 and uint8, pinned to Flat or Single, auto, and with
// cross-memory attach off: the results are exact, every rank reports the
// same algorithm (auto: Flat), and where auto offers, ranks whose totals
// straddle the threshold choose differently in one call (kind 0) and the
// call still delivers every block.
func TestAlltoallvChoice(t *testing.T) {
	for p := 2; p <= 5; p++ {
		for _, mode := range []string{"auto", "auto-small", "flat", "single", "off"} {
			t.Run(fmt.Sprintf("p=%d/%s", p, mode), func(t *testing.T) {
				pin := map[string]Algorithm{"flat": Flat, "single": Single}[mode]
				opt := a2avOptions(mode == "auto-small" || mode == "flat", pin, mode == "off")
				calls := 2 * a2avKinds
				offered := make([][]bool, calls)
				for i := range offered {
					offered[i] = make([]bool, p)
				}
				algs := make([]Algorithm, p)
				err := Run(p, opt, func(c *Comm) error {
					if err := a2avCalls[int32](c, uint64(p), calls, offered); err != nil {
						return err
					}
					algs[c.Rank()] = c.LastAlgorithm()
					return a2avCalls[uint8](c, uint64(p)+1, a2avKinds, nil)
				})
				if err != nil {
					t.Fatal(err)
				}
				want := map[string]Algorithm{"single": Single}[mode]
				if want == Auto {
					want = Flat
				}
				for r, a := range algs {
					if a != want {
						t.Errorf("rank %d took %v, want %v", r, a, want)
					}
				}
				for i, o := range offered {
					n := 0
					for _, x := range o {
						if x {
							n++
						}
					}
					kind := i % a2avKinds
					switch {
					case mode == "flat" || mode == "off":
						if n > 0 {
							t.Errorf("call %d: %d ranks offered with %s", i, n, mode)
						}
					case mode == "single":
						if n != p {
							t.Errorf("call %d: %d ranks of %d offered pinned to single", i, n, p)
						}
					case kind == 0 && n != p/2, kind == 1 && n != 0, kind == 2 && n != p:
						t.Errorf("call %d (kind %d): %d ranks offered (%v)", i, kind, n, o)
					}
				}
			})
		}
	}
}

// TestAlltoallvNonblocking: IAlltoallv runs the same alltoallv on the
// progress goroutine, the senders' choices differing in one call.
func TestAlltoallvNonblocking(t *testing.T) {
	err := Run(3, Options{}, func(c *Comm) error {
		th := a2avThreshold(c, 4)
		for i := range a2avKinds {
			if _, err := a2avRunNB[int32](c, a2avMatrix(i, 3, th, rand.New(rand.NewPCG(1, 2))), i, true); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAlltoallvSoak: a long run of alltoallvs whose totals alternate
// around the threshold (every kind of a2avMatrix in turn) among goroutine
// ranks, small and default slots: every result exact, no hang. Run it
// under -race.
func TestAlltoallvSoak(t *testing.T) {
	calls := 40 * a2avKinds
	if testing.Short() {
		calls = 6 * a2avKinds
	}
	for _, p := range []int{2, 3} {
		for _, small := range []bool{false, true} {
			if err := Run(p, a2avOptions(small, Auto, false), func(c *Comm) error {
				return a2avCalls[int32](c, 99, calls, nil)
			}); err != nil {
				t.Fatalf("p=%d small=%v: %v", p, small, err)
			}
		}
	}
}

// TestAlltoallvCountsDisagree: a rank whose receive count differs from
// its peer's send count fails every rank with ErrMismatch naming them,
// whichever way either sends; no peer reads a rank's send after its call
// returned (each rank overwrites its send at once: the race detector
// reports a late read).
func TestAlltoallvCountsDisagree(t *testing.T) {
	for _, n := range []int{10, 20000} {
		errs := runAll(t, 3, Options{}, func(c *Comm) error {
			r := c.Rank()
			sc, rc := []int{n, n, n}, []int{n, n, n}
			if r == 2 {
				rc[0] = n - 1 // rank 0 sends n
			}
			send := make([]int32, 3*n)
			err := Alltoallv(bg, c, send, sc, nil, make([]int32, 3*n), rc, nil)
			for i := range send {
				send[i] = 1
			}
			return err
		})
		text := sameAbort(t, fmt.Sprintf("n=%d", n), errs, ErrMismatch)
		if want := fmt.Sprintf("rank 2 expects %d elements from rank 0, which sends %d", n-1, n); !strings.Contains(text, want) {
			t.Errorf("n=%d: %q, want it to name %q", n, text, want)
		}
	}
}

// TestAlltoallvProcesses runs a2avCalls among processes, p = 2 to 5:
// auto, with rank 0 alone pinned to Flat (its blocks go through the slot,
// the others' by cross-memory attach when large), and with cross-memory
// attach off on one rank (off for all). Ranks that outnumber the CPUs
// offer from a larger total.
func TestAlltoallvProcesses(t *testing.T) {
	if raceEnabled {
		t.Skip("processes: the race detector sees only goroutine ranks, and slows the children down")
	}
	if os.Getenv(shm.EnvArena) != "" {
		t.Skip("in a child")
	}
	for p := 2; p <= 5; p++ {
		for _, mode := range []string{"auto", "mixed", "off"} {
			t.Run(fmt.Sprintf("p=%d/%s", p, mode), func(t *testing.T) {
				runRanks(t, "TestAlltoallvChild", p, func(r int) []string {
					env := []string{"SHMCOLL_TEST_A2AV=" + mode}
					switch {
					case mode == "mixed" && r == 0:
						env = append(env, "SHMCOLL_ALGO_ALLTOALLV=flat")
					case mode == "off" && r == p-1:
						env = append(env, shm.EnvCMA+"=off")
					}
					return env
				})
			})
		}
	}
}

// TestAlltoallvSoakProcesses: a2avCalls' alternation of totals around
// the threshold, longer, among processes that fit the CPUs (p = 2) and
// that outnumber them (p = 4 here), with small slots.
func TestAlltoallvSoakProcesses(t *testing.T) {
	if raceEnabled {
		t.Skip("processes: the race detector sees only goroutine ranks, and slows the children down")
	}
	if os.Getenv(shm.EnvArena) != "" {
		t.Skip("in a child")
	}
	for _, p := range []int{2, 4} {
		t.Run("p="+strconv.Itoa(p), func(t *testing.T) {
			runRanks(t, "TestAlltoallvChild", p, func(int) []string { return []string{"SHMCOLL_TEST_A2AV=soak"} })
		})
	}
}

// TestAlltoallvChild is one rank of TestAlltoallvProcesses and
// TestAlltoallvPeerDeath.
func TestAlltoallvChild(t *testing.T) {
	mode := os.Getenv("SHMCOLL_TEST_A2AV")
	if os.Getenv(shm.EnvArena) == "" || mode == "" {
		t.Skip("run by TestAlltoallvProcesses")
	}
	c, err := JoinEnv(bg, a2avOptions(mode != "die", Auto, false))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if (c.CrossMemory() == nil) != (mode != "off") {
		t.Fatalf("mode %s: CrossMemory() = %v", mode, c.CrossMemory())
	}
	if mode == "die" {
		a2avDie(t, c)
		return
	}
	calls := 3 * a2avKinds
	if mode == "soak" {
		calls = 20 * a2avKinds
	}
	offered := make([][]bool, calls)
	for i := range offered {
		offered[i] = make([]bool, c.Size())
	}
	if err := a2avCalls[int32](c, 5, calls, offered); err != nil {
		t.Fatal(err)
	}
	if c.LastAlgorithm() != Flat {
		t.Errorf("alltoallv took %v, want flat", c.LastAlgorithm())
	}
	n := 0
	for i := range offered {
		if offered[i][c.Rank()] {
			n++
		}
	}
	if want := mode != "off" && (mode != "mixed" || c.Rank() != 0); (n > 0) != want {
		t.Errorf("rank %d offered its blocks in %d calls of %d", c.Rank(), n, calls)
	}
	t.Logf("rank %d of %d: offered in %d calls of %d (oversubscribed %v)", c.Rank(), c.Size(), n, calls, c.Oversubscribed())
}

// a2avDie: the last rank kills itself during a stream of alltoallvs whose
// rows take cross-memory attach; every other rank's call fails with
// ErrPeerDead, nobody hangs.
func a2avDie(t *testing.T, c *Comm) {
	p, r := c.Size(), c.Rank()
	th := a2avThreshold(c, 4)
	m := a2avMatrix(2, p, 2*th, nil) // rows between singleMin and singleMax: every rank offers
	var once sync.Once
	for i := 0; ; i++ {
		if r == p-1 && i == 3 {
			once.Do(func() { go syscall.Kill(os.Getpid(), syscall.SIGKILL) })
		}
		o, err := a2avRun[int32](c, m, i)
		if err != nil {
			if !errors.Is(err, ErrPeerDead) {
				t.Errorf("rank %d: %v, want ErrPeerDead", r, err)
			}
			t.Logf("rank %d: call %d: %v", r, i, err)
			return
		}
		if !o {
			t.Fatalf("rank %d: call %d did not offer its blocks", r, i)
		}
	}
}

// TestAlltoallvPeerDeath: a rank killed (SIGKILL) in a stream of
// alltoallvs that copy by cross-memory attach fails the others' calls
// with ErrPeerDead, without a hang or a segment left in /dev/shm.
func TestAlltoallvPeerDeath(t *testing.T) {
	if raceEnabled {
		t.Skip("processes: the race detector sees only goroutine ranks, and slows the children down")
	}
	if os.Getenv(shm.EnvArena) != "" {
		t.Skip("in a child")
	}
	for _, p := range []int{2, 3} {
		t.Run("p="+strconv.Itoa(p), func(t *testing.T) {
			runRanksKilled(t, "TestAlltoallvChild", p, p-1, func(int) []string {
				return []string{"SHMCOLL_TEST_A2AV=die"}
			})
		})
	}
}

// TestAlltoallvDoesNotAllocate: alltoallvs through the slots, by
// cross-memory attach, and both in one call allocate nothing per call.
func TestAlltoallvDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	cs := localComms(t, 2, a2avOptions(true, Auto, false))
	th := a2avThreshold(cs[0], 8)
	rows := [][][]int{a2avMatrix(1, 2, th, nil), a2avMatrix(2, 2, th, nil), a2avMatrix(0, 2, th, nil)}
	type bufs struct{ send, recv []int64 }
	b := make([]bufs, 2)
	for r := range b {
		b[r] = bufs{make([]int64, 2*th), make([]int64, 2*th)}
	}
	calls := func(c *Comm) error {
		r := c.Rank()
		for _, m := range rows {
			rc := []int{m[0][r], m[1][r]}
			if err := Alltoallv(bg, c, b[r].send, m[r], nil, b[r].recv, rc, nil); err != nil {
				return err
			}
		}
		return nil
	}
	if allocs := allocsTwoRanks(t, cs, calls, nil); allocs != 0 {
		t.Errorf("%v allocations per round of alltoallvs", allocs)
	}
}
