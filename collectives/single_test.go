package collectives

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/shmcoll/shmcoll/shm"
	"github.com/shmcoll/shmcoll/simd"
)

// singleVal is element i of rank r's block for rank j: distinct for every
// (r, j, i) within a type's range, so that a block in the wrong place or
// a shifted copy shows.
func singleVal[T simd.Element](r, j, i int) T { return val[T]((r*131 + j*17 + i) % 97) }

// singleCalls makes every collective Single serves on c with blocks of n
// elements (irregular ones around n), checks every result exactly, and
// returns an error naming the first difference. want names the algorithm
// every call must have taken (Auto: not checked).
func singleCalls[T simd.Element](c *Comm, n int, want Algorithm) error {
	p, r := c.Size(), c.Rank()
	// Irregular counts: n±k, one rank with none when p > 2.
	counts := make([]int, p)
	displs := make([]int, p)
	total := 0
	for j := range p {
		counts[j] = n + j%3 - 1
		if p > 2 && j == 1 {
			counts[j] = 0
		}
		displs[j] = total + j // gaps between the blocks
		total += counts[j] + j
	}
	// vblock is element i of an allgatherv's or gatherv's result: rank j's
	// block for rank 1 at displs[j], zero in the gaps.
	vblock := func(i int) T {
		for j := range p {
			if i >= displs[j] && i < displs[j]+counts[j] {
				return singleVal[T](j, 1, i-displs[j])
			}
		}
		var z T
		return z
	}
	esz := simd.TypeOf[T]().Size()
	alg := func(what string) error {
		vector := strings.HasPrefix(what, "gatherv") || strings.HasPrefix(what, "scatterv")
		if vector && sum(counts)*esz < singleMin(collGatherv, c.Oversubscribed(), c.Placement()) {
			return nil // no pins for gatherv and scatterv
		}
		if want != Auto && c.LastAlgorithm() != want {
			return fmt.Errorf("%s took %v, want %v", what, c.LastAlgorithm(), want)
		}
		return nil
	}
	check := func(what string, got []T, want func(i int) T) error {
		for i := range got {
			if w := want(i); got[i] != w {
				return fmt.Errorf("rank %d: %s: element %d = %v, want %v", r, what, i, got[i], w)
			}
		}
		return alg(what)
	}

	// Allgather, out of place and in place.
	send := make([]T, n)
	for i := range send {
		send[i] = singleVal[T](r, 0, i)
	}
	recv := make([]T, p*n)
	for _, inPlace := range []bool{false, true} {
		clear(recv)
		s := send
		if inPlace {
			copy(recv[r*n:], send)
			s = nil
		}
		if err := Allgather(bg, c, s, recv); err != nil {
			return err
		}
		if err := check(fmt.Sprintf("allgather in place=%v", inPlace), recv, func(i int) T { return singleVal[T](i/n, 0, i%n) }); err != nil {
			return err
		}
	}
	// Allgatherv with gaps.
	vrecv := make([]T, total)
	vsend := make([]T, counts[r])
	for i := range vsend {
		vsend[i] = singleVal[T](r, 1, i)
	}
	for _, inPlace := range []bool{false, true} {
		clear(vrecv)
		s := vsend
		if inPlace {
			copy(vrecv[displs[r]:], vsend)
			s = nil
		}
		if err := Allgatherv(bg, c, s, vrecv, counts, displs); err != nil {
			return err
		}
		if err := check(fmt.Sprintf("allgatherv in place=%v", inPlace), vrecv, vblock); err != nil {
			return err
		}
	}
	// Bcast from two roots.
	for _, root := range []int{0, p - 1} {
		buf := make([]T, n)
		if r == root {
			for i := range buf {
				buf[i] = singleVal[T](root, 2, i)
			}
		}
		if err := Bcast(bg, c, buf, root); err != nil {
			return err
		}
		if err := check(fmt.Sprintf("bcast root %d", root), buf, func(i int) T { return singleVal[T](root, 2, i) }); err != nil {
			return err
		}
	}
	// Alltoall: block j of rank r's send is (r, j).
	asend := make([]T, p*n)
	for i := range asend {
		asend[i] = singleVal[T](r, i/n, i%n)
	}
	arecv := make([]T, p*n)
	if err := Alltoall(bg, c, asend, arecv); err != nil {
		return err
	}
	if err := check("alltoall", arecv, func(i int) T { return singleVal[T](i/n, r, i%n) }); err != nil {
		return err
	}
	// Alltoallv: rank r sends counts[(r+j)%p] elements to rank j.
	sc, sd, rc, rd := make([]int, p), make([]int, p), make([]int, p), make([]int, p)
	so, ro := 0, 0
	for j := range p {
		sc[j], rc[j] = counts[(r+j)%p], counts[(j+r)%p]
		sd[j], rd[j] = so, ro+1
		so += sc[j]
		ro += rc[j] + 1
	}
	vs := make([]T, so)
	for j := range p {
		for i := range sc[j] {
			vs[sd[j]+i] = singleVal[T](r, j, i)
		}
	}
	vr := make([]T, ro)
	if err := Alltoallv(bg, c, vs, sc, sd, vr, rc, rd); err != nil {
		return err
	}
	if err := check("alltoallv", vr, func(i int) T {
		for j := range p {
			if i >= rd[j] && i < rd[j]+rc[j] {
				return singleVal[T](j, r, i-rd[j])
			}
		}
		var z T
		return z
	}); err != nil {
		return err
	}
	// Gather and scatter at two roots, the root in place the second time.
	for k, root := range []int{0, p - 1} {
		all := make([]T, p*n)
		s := send
		if k == 1 && r == root {
			copy(all[r*n:], send)
			s = nil
		}
		if err := Gather(bg, c, s, all, root); err != nil {
			return err
		}
		if r == root {
			if err := check(fmt.Sprintf("gather root %d", root), all, func(i int) T { return singleVal[T](i/n, 0, i%n) }); err != nil {
				return err
			}
		}
		out := make([]T, n)
		for i := range all {
			all[i] = singleVal[T](root, 3+i/n, i%n)
		}
		o := out
		if k == 1 && r == root {
			o = nil
		}
		if err := Scatter(bg, c, all, o, root); err != nil {
			return err
		}
		if o != nil {
			if err := check(fmt.Sprintf("scatter root %d", root), out, func(i int) T { return singleVal[T](root, 3+r, i) }); err != nil {
				return err
			}
		}
	}
	// Gatherv and scatterv with gaps at the root.
	for _, root := range []int{0, p - 1} {
		all := make([]T, total)
		if err := Gatherv(bg, c, vsend, all, counts, displs, root); err != nil {
			return err
		}
		if r == root {
			if err := check(fmt.Sprintf("gatherv root %d", root), all, vblock); err != nil {
				return err
			}
		}
		out := make([]T, counts[r])
		if err := Scatterv(bg, c, all, out, counts, displs, root); err != nil {
			return err
		}
		if err := check(fmt.Sprintf("scatterv root %d", root), out, func(i int) T { return singleVal[T](r, 1, i) }); err != nil {
			return err
		}
	}
	return nil
}

// singleSizes are the block sizes (elements of 4 bytes) of the tests: odd
// ones, below and around singleMin (pinned) and above it (auto).
func singleSizes() []int { return []int{1, 37, 1001, 64<<10 + 3, 300 << 10} }

// singleOptions pins Single for every collective it serves, with slots
// small enough that the flat algorithms cut these sizes into segments.
func singleOptions(pin bool, off bool) Options {
	o := Options{SlotBytes: 64 << 10, NoCrossMemory: off}
	if pin {
		o.Algorithms = map[Collective]Algorithm{}
		for coll := range numColls {
			if algorithms[coll][Single] != nil {
				o.Algorithms[coll] = Single
			}
		}
	}
	return o
}

// TestSingleInProcess: goroutine ranks read each other's buffers; the
// results are exact, pinned and auto, and the same with cross-memory
// attach off (where no call takes Single).
func TestSingleInProcess(t *testing.T) {
	for _, p := range []int{2, 3, 4} {
		for _, n := range singleSizes() {
			if raceEnabled && n > 100000 {
				continue
			}
			t.Run(fmt.Sprintf("p=%d/n=%d", p, n), func(t *testing.T) {
				if err := Run(p, singleOptions(true, false), func(c *Comm) error { return singleCalls[int32](c, n, Single) }); err != nil {
					t.Fatal(err)
				}
				if err := Run(p, singleOptions(false, false), func(c *Comm) error { return singleCalls[uint8](c, 4*n+1, Auto) }); err != nil {
					t.Fatal(err)
				}
				if err := Run(p, singleOptions(false, true), func(c *Comm) error {
					if c.CrossMemory() == nil {
						return errors.New("cross-memory attach is on with NoCrossMemory")
					}
					return singleCalls[int32](c, n, Auto)
				}); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestSinglePinNeedsCrossMemory: a pin to Single without cross-memory
// attach is an error naming the problem on every rank.
func TestSinglePinNeedsCrossMemory(t *testing.T) {
	o := singleOptions(true, true)
	err := Run(2, o, func(c *Comm) error {
		err := Allgather(bg, c, make([]int32, 10), make([]int32, 20))
		if !errors.Is(err, ErrInvalidArgument) {
			return fmt.Errorf("allgather pinned to single without cross-memory attach: %v, want ErrInvalidArgument", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSingleSelection: auto takes Single from singleMin up where
// cross-memory attach is on and the buffers are private, and never
// otherwise.
func TestSingleSelection(t *testing.T) {
	for _, coll := range []Collective{CollAllgather, CollAllgatherv, CollBcast, CollAlltoall, CollAlltoallv, CollGather, CollScatter, CollAllreduce, CollReduce, CollReduceScatterBlock, CollReduceScatter} {
		m := singleMin(coll, false, PlacementUnknown)
		if m <= 0 { // never unpinned: the reductions
			for _, n := range []int{16 << 10, 1 << 20, 16 << 20, 64 << 20} {
				if a, why, err := Select(Call{Coll: coll, Bytes: n, P: 2, CrossMemory: true}, Options{}); err != nil || a == Single {
					t.Errorf("%v of %d bytes: %v (%s), %v; want no single unpinned", coll, n, a, why, err)
				}
			}
			continue
		}
		if coll == CollAlltoallv { // its senders choose (TestAlltoallvChoice)
			continue
		}
		for _, tc := range []struct {
			call Call
			want bool
		}{
			{Call{Coll: coll, Bytes: m, P: 2, CrossMemory: true}, true},
			{Call{Coll: coll, Bytes: 16 << 20, P: 2, CrossMemory: true}, 16<<20 < singleMax(coll, false)},
			{Call{Coll: coll, Bytes: 64 << 20, P: 2, CrossMemory: true}, 64<<20 < singleMax(coll, false)},
			{Call{Coll: coll, Bytes: singleMax(coll, false) - 1, P: 2, CrossMemory: true}, true},
			{Call{Coll: coll, Bytes: m - 1, P: 2, CrossMemory: true}, false},
			{Call{Coll: coll, Bytes: 64 << 20, P: 2}, false},
			{Call{Coll: coll, Bytes: 64 << 20, P: 2, CrossMemory: true, Arena: true}, false},
		} {
			a, why, err := Select(tc.call, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if (a == Single) != tc.want {
				t.Errorf("%+v: %v (%s), want single %v", tc.call, a, why, tc.want)
			}
		}
	}
}

// TestSingleProcesses runs singleCalls among real processes, pinned at
// every size and auto above singleMin, with cross-memory attach on and
// off (SHMCOLL_CMA=off on one rank turns it off for all).
func TestSingleProcesses(t *testing.T) {
	if os.Getenv(shm.EnvArena) != "" {
		t.Skip("in a child")
	}
	for _, p := range []int{2, 3, 4} {
		for _, mode := range []string{"pin", "auto", "off"} {
			t.Run(fmt.Sprintf("p=%d/%s", p, mode), func(t *testing.T) {
				runRanks(t, "TestSingleChild", p, func(r int) []string {
					env := []string{"SHMCOLL_TEST_SINGLE=" + mode}
					if mode == "off" && r == p-1 {
						env = append(env, shm.EnvCMA+"=off")
					}
					return env
				})
			})
		}
	}
}

// TestSingleChild is one rank of TestSingleProcesses and
// TestSinglePeerDeath.
func TestSingleChild(t *testing.T) {
	mode := os.Getenv("SHMCOLL_TEST_SINGLE")
	if os.Getenv(shm.EnvArena) == "" || mode == "" {
		t.Skip("run by TestSingleProcesses")
	}
	c, err := JoinEnv(bg, singleOptions(mode == "pin" || mode == "die" || mode == "huge", false))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if (c.CrossMemory() == nil) != (mode != "off") {
		t.Fatalf("mode %s: CrossMemory() = %v", mode, c.CrossMemory())
	}
	if mode == "die" {
		singleDie(t, c)
		return
	}
	if mode == "huge" {
		singleHuge(t, c)
		return
	}
	want := map[string]Algorithm{"pin": Single, "auto": Auto, "off": Auto}[mode]
	for _, n := range singleSizes() {
		if err := singleCalls[int32](c, n, want); err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if mode == "off" && c.LastAlgorithm() == Single {
			t.Fatalf("n=%d: single with cross-memory attach off", n)
		}
		// A scatterv of 2.4 MB: Single where the pair is far apart or
		// not probed, the slots where it shares a cache.
		if mode == "auto" && n == 300<<10 && c.LastAlgorithm() != Single && 8*n >= singleMin(collScatterv, c.Oversubscribed(), c.Placement()) {
			t.Fatalf("n=%d: scatterv took %v, want single", n, c.LastAlgorithm())
		}
	}
}

// TestSingleHugeRecv: allgather and allgatherv of private buffers large
// enough that every rank asks for huge pages behind its recv (from the
// second call with it: singleHugeMin), an alltoall whose ranks ask for
// them behind their send, bcast, gather and scatter, whose ranks ask for
// them behind the buffers they offer, and an allgather whose own copies
// store non-temporally (singleNTMin), between processes, the same buffers
// in every call with new values, every result exact on every rank.
func TestSingleHugeRecv(t *testing.T) {
	if os.Getenv(shm.EnvArena) != "" {
		t.Skip("in a child")
	}
	runRanks(t, "TestSingleChild", 2, func(int) []string { return []string{"SHMCOLL_TEST_SINGLE=huge"} })
}

// singleHuge is one rank of TestSingleHugeRecv.
func singleHuge(t *testing.T, c *Comm) {
	p, r := c.Size(), c.Rank()
	for _, size := range []int{singleHugeMin, singleNTMin} {
		n := size/4/p + 3<<10 + 5 // int32s per block: recv above size
		send, recv, a2a := make([]int32, n), make([]int32, p*n), make([]int32, p*n)
		counts, displs := make([]int, p), make([]int, p)
		for j := range p {
			counts[j], displs[j] = n-j*1000, j*n
		}
		for k := range 4 {
			for i := range send {
				send[i] = singleVal[int32](r, k, i)
			}
			clear(recv)
			v := k%2 == 1 && size < singleAlltoallMax
			var err error
			if v {
				err = Allgatherv(bg, c, send[:counts[r]], recv, counts, displs)
			} else {
				err = Allgather(bg, c, send, recv)
			}
			if err != nil {
				t.Fatalf("call %d: %v", k, err)
			}
			if c.LastAlgorithm() != Single {
				t.Fatalf("call %d took %v, want single", k, c.LastAlgorithm())
			}
			for j := range p {
				for i := range n {
					want := singleVal[int32](j, k, i)
					if v && i >= counts[j] {
						want = 0
					}
					if got := recv[j*n+i]; got != want {
						t.Fatalf("rank %d, recv of %d bytes, call %d (allgatherv %v): element %d of block %d is %d, want %d", r, len(recv)*4, k, v, i, j, got, want)
					}
				}
			}
			// Alltoall (below singleAlltoallMax, where it takes Single),
			// whose ranks ask for huge pages behind their send: block j of
			// rank q's send is singleVal(q, 10k+j, i).
			for j := range p {
				for i := range n {
					recv[j*n+i] = singleVal[int32](r, 10*k+j, i)
				}
			}
			if size < singleAlltoallMax {
				if err := Alltoall(bg, c, recv, a2a); err != nil {
					t.Fatalf("alltoall %d: %v", k, err)
				}
				if c.LastAlgorithm() != Single {
					t.Fatalf("alltoall %d took %v, want single", k, c.LastAlgorithm())
				}
			} else {
				for q := range p {
					for i := range n {
						a2a[q*n+i] = singleVal[int32](q, 10*k+r, i) // what the alltoall gives
					}
				}
			}
			for q := range p {
				for i := range n {
					if got, want := a2a[q*n+i], singleVal[int32](q, 10*k+r, i); got != want {
						t.Fatalf("rank %d, alltoall %d: element %d of block %d is %d, want %d", r, k, i, q, got, want)
					}
				}
			}
			// The rooted calls, whose root and other ranks ask for huge
			// pages behind the buffers they offer: bcast of recv from
			// root k%p (the root's recv holds the allgather's result),
			// gather of the alltoall's result into recv at root 0, then
			// scatter of it back into a2a from root 0.
			if err := Bcast(bg, c, recv, k%p); err != nil {
				t.Fatalf("bcast %d: %v", k, err)
			}
			for j := range p {
				for i := range n {
					if got, want := recv[j*n+i], singleVal[int32](k%p, 10*k+j, i); got != want {
						t.Fatalf("rank %d, bcast %d: element %d is %d, want %d", r, k, j*n+i, got, want)
					}
				}
			}
			if err := Gather(bg, c, a2a[:n], recv, 0); err != nil {
				t.Fatalf("gather %d: %v", k, err)
			}
			clear(a2a)
			if err := Scatter(bg, c, recv, a2a[:n], 0); err != nil {
				t.Fatalf("scatter %d: %v", k, err)
			}
			if c.LastAlgorithm() != Single {
				t.Fatalf("scatter %d took %v, want single", k, c.LastAlgorithm())
			}
			for i := range n {
				if got, want := a2a[i], singleVal[int32](0, 10*k+r, i); got != want {
					t.Fatalf("rank %d, gather and scatter %d: element %d is %d, want %d", r, k, i, got, want)
				}
			}
		}
	}
}

// singleDie: the last rank kills itself (SHMCOLL_TEST_SINGLE_FAULT=kill)
// while the root of a bcast waits for it to read the root's buffer, or
// offers an address it does not map (=fault) in an allgather; every
// rank's call fails (with ErrPeerDead, or the failed read's error), and
// nobody hangs.
func singleDie(t *testing.T, c *Comm) {
	n := 1 << 20
	buf := make([]int32, n)
	if err := Barrier(bg, c); err != nil {
		t.Fatal(err)
	}
	last := c.Rank() == c.Size()-1
	kill := os.Getenv("SHMCOLL_TEST_SINGLE_FAULT") == "kill"
	if last {
		if kill {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		singleBadAddr = true
	}
	var err error
	if kill {
		err = Bcast(bg, c, buf, 0)
	} else {
		err = Allgather(bg, c, make([]int32, n/c.Size()), buf[:n/c.Size()*c.Size()])
		if !last && !strings.Contains(err.Error(), "bad address") {
			t.Errorf("rank %d: %v, want the failed read's error", c.Rank(), err)
		}
	}
	if err == nil || kill && !errors.Is(err, ErrPeerDead) {
		t.Errorf("rank %d: a call with a dead or faulty peer: %v", c.Rank(), err)
	}
	if !errors.Is(err, ErrAborted) && !errors.Is(err, ErrPeerDead) {
		t.Errorf("rank %d: %v, want the communicator aborted", c.Rank(), err)
	}
	t.Logf("rank %d: %v", c.Rank(), err)
}

// TestSinglePeerDeath: a rank killed while a root waits for it to read
// the root's buffer, or a rank whose buffer the others cannot read, fails
// the others' calls on every rank, without a hang.
func TestSinglePeerDeath(t *testing.T) {
	if os.Getenv(shm.EnvArena) != "" {
		t.Skip("in a child")
	}
	for _, fault := range []string{"kill", "fault"} {
		t.Run(fault, func(t *testing.T) {
			killed := -1 // the fault case: every rank fails its calls and passes
			if fault == "kill" {
				killed = 2
			}
			runRanksKilled(t, "TestSingleChild", 3, killed, func(int) []string {
				return []string{"SHMCOLL_TEST_SINGLE=die", "SHMCOLL_TEST_SINGLE_FAULT=" + fault}
			})
		})
	}
}

func sum(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}

// TestSingleDoesNotAllocate: the Single calls allocate nothing per call.
func TestSingleDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	const p, n = 2, 1 << 19       // gatherv and scatterv, never pinned, take Single from singleMin
	t.Setenv(PlacementEnv, "far") // where singleMin is below their 8 MiB
	cs := localComms(t, p, singleOptions(true, false))
	counts := []int{n, n - 3}
	type bufs struct{ in, out, all, all2 []int64 }
	b := make([]bufs, p)
	for r := range b {
		b[r] = bufs{make([]int64, n), make([]int64, n), make([]int64, p*n), make([]int64, p*n)}
		for i := range b[r].in {
			b[r].in[i] = int64(10*r + i)
		}
	}
	calls := func(c *Comm) error {
		r := c.Rank()
		x := b[r]
		if err := Allgather(bg, c, x.in, x.all); err != nil {
			return err
		}
		if err := Allgatherv(bg, c, x.in[:counts[r]], x.all, counts, nil); err != nil {
			return err
		}
		if err := Bcast(bg, c, x.all, 1); err != nil {
			return err
		}
		if err := Alltoall(bg, c, x.all, x.all2); err != nil {
			return err
		}
		if err := Gather(bg, c, x.in, x.all, 0); err != nil {
			return err
		}
		if err := Scatter(bg, c, x.all, x.out, 0); err != nil {
			return err
		}
		if err := Gatherv(bg, c, x.in[:counts[r]], x.all, counts, nil, 1); err != nil {
			return err
		}
		return Scatterv(bg, c, x.all, x.out[:counts[r]], counts, nil, 1)
	}
	allocs := allocsTwoRanks(t, cs, calls, func() {
		if c := cs[0]; c.LastAlgorithm() != Single {
			t.Fatalf("scatterv took %v", c.LastAlgorithm())
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per round of the Single calls", allocs)
	}
	// The last Scatterv gave each rank its block of the last Gatherv.
	for r := range p {
		for i := range counts[r] {
			if got, want := b[r].out[i], int64(10*r+i); got != want {
				t.Errorf("rank %d: out[%d] = %d, want %d", r, i, got, want)
			}
		}
	}
}

// TestSingleBuffersOnHeap: Single publishes the addresses of the caller's
// buffers, which must not move while peers copy, so they must not be on a
// goroutine stack. The collectives keep their buffers in the Comm, which
// makes every buffer passed to them escape: an array declared in the
// caller moves to the heap (an allocation per call) instead of the stack.
func TestSingleBuffersOnHeap(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	c := localComms(t, 1, Options{})[0]
	calls := map[string]struct {
		f    func()
		bufs float64
	}{
		"allgather": {func() { var s, r [16]int32; _ = Allgather(bg, c, s[:], r[:]) }, 2},
		"allgatherv": {func() {
			var s, r [16]int32
			_ = Allgatherv(bg, c, s[:], r[:], []int{16}, nil)
		}, 2},
		"bcast":    {func() { var b [16]int32; _ = Bcast(bg, c, b[:], 0) }, 1},
		"alltoall": {func() { var s, r [16]int32; _ = Alltoall(bg, c, s[:], r[:]) }, 2},
		"alltoallv": {func() {
			var s, r [16]int32
			_ = Alltoallv(bg, c, s[:], []int{16}, nil, r[:], []int{16}, nil)
		}, 2},
		"gather":   {func() { var s, r [16]int32; _ = Gather(bg, c, s[:], r[:], 0) }, 2},
		"scatter":  {func() { var s, r [16]int32; _ = Scatter(bg, c, s[:], r[:], 0) }, 2},
		"gatherv":  {func() { var s, r [16]int32; _ = Gatherv(bg, c, s[:], r[:], []int{16}, nil, 0) }, 2},
		"scatterv": {func() { var s, r [16]int32; _ = Scatterv(bg, c, s[:], r[:], []int{16}, nil, 0) }, 2},
	}
	for name, call := range calls {
		if a := testing.AllocsPerRun(10, call.f); a < call.bufs {
			t.Errorf("%s: %v allocations per call, want at least %v: the buffers stay on the stack, where Single must not publish them", name, a, call.bufs)
		}
	}
}

// TestSingleAlltoallvCountsDisagree: an alltoallv whose receive count on
// one rank differs from its peer's send count fails with ErrMismatch on
// every rank, naming the ranks.
func TestSingleAlltoallvCountsDisagree(t *testing.T) {
	const n = 1000
	errs := make([]error, 2)
	_ = Run(2, singleOptions(true, false), func(c *Comm) error {
		r := c.Rank()
		rc := []int{n, n}
		if r == 1 {
			rc[0] = n - 1 // rank 0 sends n
		}
		errs[r] = Alltoallv(bg, c, make([]int32, 2*n), []int{n, n}, nil, make([]int32, 2*n), rc, nil)
		return nil
	})
	for r, err := range errs {
		if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "rank 1 expects 999 elements from rank 0, which sends 1000") {
			t.Errorf("rank %d: %v, want ErrMismatch naming the counts", r, err)
		}
	}
}

// TestSingleNonblocking: the nonblocking forms run Single on the progress
// goroutine, the caller's buffers copied once while it does other work.
func TestSingleNonblocking(t *testing.T) {
	const n = 50000
	err := Run(3, singleOptions(true, false), func(c *Comm) error {
		p, r := c.Size(), c.Rank()
		send := make([]int32, n)
		for i := range send {
			send[i] = singleVal[int32](r, 0, i)
		}
		recv := make([]int32, p*n)
		buf := make([]int32, n)
		if r == 1 {
			copy(buf, send)
		}
		reqs := []*Request{IAllgather(bg, c, send, recv), IBcast(bg, c, buf, 1)}
		for _, req := range reqs {
			if err := req.Wait(); err != nil {
				return err
			}
		}
		if c.LastAlgorithm() != Single {
			return fmt.Errorf("bcast took %v", c.LastAlgorithm())
		}
		for i, v := range recv {
			if w := singleVal[int32](i/n, 0, i%n); v != w {
				return fmt.Errorf("rank %d: allgather element %d = %d, want %d", r, i, v, w)
			}
		}
		for i, v := range buf {
			if w := singleVal[int32](1, 0, i); v != w {
				return fmt.Errorf("rank %d: bcast element %d = %d, want %d", r, i, v, w)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSingleSelectionSameOnEveryRank: an alltoallv whose ranks receive
// sizes on both sides of singleMin agrees on its algorithm (the ranks'
// bytes do not decide it) and delivers every block; an alltoall in place
// on one rank only fails with ErrMismatch on every rank, naming in place,
// at a size Single serves and at one it does not.
func TestSingleSelectionSameOnEveryRank(t *testing.T) {
	if a, _, err := Select(Call{Coll: CollAlltoallv, Bytes: 64 << 20, P: 2, CrossMemory: true}, Options{}); err != nil || a == Single {
		t.Errorf("alltoallv of 64 MiB: %v, %v; want an algorithm other than single unpinned", a, err)
	}
	m := singleMin(CollAlltoall, false, PlacementUnknown)
	// Rank r sends cnt[j] int32 to rank j: rank 0 receives m/2 bytes,
	// rank 1 m.
	cnt := []int{m / 16, m / 8}
	err := Run(2, singleOptions(false, false), func(c *Comm) error {
		r := c.Rank()
		send := make([]int32, cnt[0]+cnt[1])
		for i := range send {
			send[i] = int32(r<<24 | i)
		}
		recv := make([]int32, 2*cnt[r])
		if err := Alltoallv(bg, c, send, cnt, nil, recv, []int{cnt[r], cnt[r]}, nil); err != nil {
			return err
		}
		off := []int{0, cnt[0]}[r] // where rank r's block starts in each sender's send
		for i, v := range recv {
			q, j := i/cnt[r], i%cnt[r]
			if w := int32(q<<24 | (off + j)); v != w {
				return fmt.Errorf("rank %d: alltoallv element %d = %#x, want %#x", r, i, v, w)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{m / 4, 64} { // int32 per block: Single's size and below
		errs := make([]error, 2)
		_ = Run(2, singleOptions(false, false), func(c *Comm) error {
			recv := make([]int32, 2*n)
			var send []int32
			if c.Rank() == 1 {
				send = make([]int32, 2*n)
			}
			errs[c.Rank()] = Alltoall(bg, c, send, recv)
			return nil
		})
		for r, err := range errs {
			if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "rank 0 called alltoall in place and rank 1 did not") {
				t.Errorf("%d bytes per block, rank %d: %v, want ErrMismatch naming in place", 4*n, r, err)
			}
		}
	}
}

// TestSingleFailedCallReleasesBuffers: in a Single gather and allgather
// that do not match on every rank (the last rank passes one element
// more), every rank fails with ErrMismatch and no peer writes into a
// rank's buffers after its call returned: each rank checks its recv at
// once, and the race detector (go test -race) reports a peer's late
// write. Every block holds the sentinel or its sender's data.
func TestSingleFailedCallReleasesBuffers(t *testing.T) {
	iters := 200
	if testing.Short() {
		iters = 40
	}
	n := singleMin(CollAllgather, false, PlacementUnknown) / 8 // int64 per block: Single's size
	for it := range iters {
		p := 3 + it%2
		gather := it%4 < 2
		root := it % p
		what := fmt.Sprintf("iteration %d: p=%d gather=%v root=%d", it, p, gather, root)
		checks := make([]error, p)
		errs := runAll(t, p, singleOptions(true, false), func(c *Comm) error {
			r := c.Rank()
			m := n
			if r == p-1 {
				m = n + 1
			}
			send := vecOf(r, it, m)
			recv := filled(p*m, sentinel)
			var err error
			if gather {
				if r != root {
					recv = nil
				}
				err = Gather(bg, c, send, recv, root)
			} else {
				err = Allgather(bg, c, send, recv)
			}
			for i, x := range recv {
				// Block q: the sentinel, or rank q's data if its count
				// is this rank's.
				q, j := i/m, i%m
				if x != sentinel && ((q == p-1) != (r == p-1) || x != int64(q*1_000_003+it*7919+j)) {
					checks[r] = fmt.Errorf("rank %d: recv[%d] = %d, want the sentinel or rank %d's element %d", r, i, x, q, j)
					break
				}
			}
			return err
		})
		sameAbort(t, what, errs, ErrMismatch)
		for _, err := range checks {
			if err != nil {
				t.Errorf("%s: %v", what, err)
			}
		}
		if t.Failed() {
			return
		}
	}
}

// TestSinglePush: each rank of an allgather writes its block into the
// peers' recvs whole where the blocks are about the same size or from
// singlePullMax; other blocks below singleSplitMin not at all (the peers
// read them), else up to halfway between the smallest and the mean
// block, in whole lines, a block up to 1/8 above that whole (the tests
// above run the reads too: p = 2 near blocks, p > 2 one empty block).
func TestSinglePush(t *testing.T) {
	for _, tc := range []struct {
		counts          []int
		esz, recv, want int
	}{
		{[]int{4, 4}, 8, 64, math.MaxInt},
		{[]int{1000, 1001}, 4, 8004, math.MaxInt},
		{[]int{1 << 20, 1 << 20}, 4, 8 << 20, math.MaxInt},
		{[]int{0, 0}, 4, 0, math.MaxInt},
		{[]int{8, 10}, 8, 1 << 20, math.MaxInt},
		{[]int{1 << 19, 3 << 19}, 8, 16 << 20, 6 << 20},
		{[]int{1 << 19, 3 << 19}, 8, singlePullMax, math.MaxInt},
		{[]int{1 << 13, 3 << 13}, 8, singleSplitMin - 1, 0},
		{[]int{1 << 13, 3 << 13}, 8, singleSplitMin, 96 << 10},
		{[]int{10, 0, 11}, 1, 1 << 20, 64},
	} {
		if got := singlePush(tc.counts, tc.esz, tc.recv); got != tc.want {
			t.Errorf("singlePush(%v, %d, %d) = %d, want %d", tc.counts, tc.esz, tc.recv, got, tc.want)
		}
	}
	for _, tc := range [][3]int{{4004, 4032, 4004}, {100, 96, 100}, {108, 96, 108}, {109, 96, 96}, {200, 96, 96}, {0, 0, 0}} {
		if got := pushLen(tc[0], tc[1]); got != tc[2] {
			t.Errorf("pushLen(%d, %d) = %d, want %d", tc[0], tc[1], got, tc[2])
		}
	}
}

// TestSingleWarm: between processes, Single takes an unpinned call whose
// buffers it would ask huge pages for only from the shm.HugeAfter-th such
// call of the collective on the communicator (singleCold); the calls
// before go through the slots, the same on both ranks, every result
// exact; the call that first takes Single finds its buffers collapsed
// where the kernel collapses (the slot calls offered them). An allgather
// from singleColdMax takes Single at once, and so do goroutine ranks,
// whose copies pin nothing.
func TestSingleWarm(t *testing.T) {
	if os.Getenv(shm.EnvArena) != "" {
		t.Skip("in a child")
	}
	for _, mode := range []string{"all", "reduce"} {
		runRanks(t, "TestSingleWarmChild", 2, func(int) []string {
			return []string{PlacementEnv + "=far", "SHMCOLL_TEST_WARM=" + mode}
		})
	}
	err := Run(2, singleOptions(false, false), func(c *Comm) error {
		b := newWarmBuf(2, 16<<20) // Single at any placement
		for k := range 2 {
			algs, err := warmCalls(c, b, k)
			if err != nil {
				return err
			}
			if algs["allgather"] != Single || algs["bcast"] != Single {
				return fmt.Errorf("goroutine ranks, call %d: %v, want single at once", k, algs)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSingleWarmChild is one rank of TestSingleWarm.
func TestSingleWarmChild(t *testing.T) {
	if os.Getenv(shm.EnvArena) == "" || os.Getenv("SHMCOLL_TEST_WARM") == "" {
		t.Skip("run by TestSingleWarm")
	}
	c, err := JoinEnv(bg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Oversubscribed() || c.CrossMemory() != nil {
		t.Skip("the ranks share CPUs or have no cross-memory attach")
	}
	if os.Getenv("SHMCOLL_TEST_WARM") == "reduce" {
		warmReduce(t, c)
		return
	}
	b := newWarmBuf(c.Size(), 8<<20)
	heapHuge := anonHugeAt(b.recv) != 0 // the system backs the heap by huge pages itself
	for k := range shm.HugeAfter + 1 {
		algs, err := warmCalls(c, b, k)
		if err != nil {
			t.Fatal(err)
		}
		for coll, a := range algs {
			if (a == Single) != (k >= shm.HugeAfter-1) {
				t.Fatalf("rank %d, call %d: %s took %v", c.Rank(), k+1, coll, a)
			}
		}
		checkWarmPages(t, c.Rank(), k, heapHuge, anonHugeAt(b.recv))
	}
	// Another size counts apart: its first call is cold.
	other := make([]int32, 10<<20/8)
	if err := Allgather(bg, c, other, make([]int32, 2*len(other))); err != nil {
		t.Fatal(err)
	}
	if c.LastAlgorithm() != Flat {
		t.Fatalf("allgather of another size took %v, want flat", c.LastAlgorithm())
	}
	// The largest allgathers take Single cold.
	big := make([]int32, singleColdMax(CollAllgather)/8)
	recv := make([]int32, 2*len(big))
	if err := Allgather(bg, c, big, recv); err != nil {
		t.Fatal(err)
	}
	if c.LastAlgorithm() != Single {
		t.Fatalf("allgather of %d bytes took %v cold", 4*len(recv), c.LastAlgorithm())
	}
}

// warmReduce is TestSingleWarmChild for an allreduce alone: its first
// call probes the placement, the cold calls take the slots and leave the
// buffers in 4 KiB pages, the 32nd takes Single and collapses both (each
// in a mapping of its own, so that each one's pages show).
func warmReduce(t *testing.T, c *Comm) {
	p, r := c.Size(), c.Rank()
	send, recv := apartMappings(t, singleReduceFarMin/8)
	heapHuge := anonHugeAt(send) != 0 || anonHugeAt(recv) != 0
	for k := range shm.HugeAfter + 1 {
		for i := range send {
			send[i] = singleVal[int64](r, k, i)
		}
		if err := Allreduce(bg, c, send, recv, Sum); err != nil {
			t.Fatal(err)
		}
		for i, v := range recv {
			var w int64
			for j := range p {
				w += singleVal[int64](j, k, i)
			}
			if v != w {
				t.Fatalf("rank %d, allreduce %d: element %d is %d, want %d", r, k+1, i, v, w)
			}
		}
		if k == 0 && c.Placement() != PlacementFar {
			t.Fatalf("rank %d: placement %v after the first allreduce of %d bytes, want far (probed)", r, c.Placement(), 8*len(send))
		}
		if a := c.LastAlgorithm(); (a == Single) != (k >= shm.HugeAfter-1) {
			t.Fatalf("rank %d, allreduce %d took %v", r, k+1, a)
		}
		checkWarmPages(t, r, k, heapHuge, anonHugeAt(send))
		checkWarmPages(t, r, k, heapHuge, anonHugeAt(recv))
	}
}

// checkWarmPages checks the mapping that holds a rank's buffers
// after call k+1 (huge: its KiB of huge pages, as smaps counts): in 4 KiB
// pages through the cold calls, collapsed by the first that takes Single;
// not checked where the system backs it by huge pages itself
// (heapHuge).
func checkWarmPages(t *testing.T, r, k int, heapHuge bool, huge int) {
	t.Helper()
	switch {
	case heapHuge:
	case k < shm.HugeAfter-1 && huge > 0:
		t.Fatalf("rank %d, call %d (cold): the mapping that holds its buffers has %d KiB of huge pages", r, k+1, huge)
	case k >= shm.HugeAfter-1 && huge == 0 && kernelCollapses():
		t.Fatalf("rank %d, call %d: the mapping that holds its buffers has no huge pages", r, k+1)
	}
}

// warmCalls makes call k of an allgather, a bcast, a gather and an
// alltoall in b's buffers (the same in every call), checks every element,
// and returns the algorithm each took.
func warmCalls(c *Comm, b *warmBuf, k int) (map[string]Algorithm, error) {
	p, r := c.Size(), c.Rank()
	n := len(b.recv) / p // int32s per block of the allgather and the alltoall
	algs := map[string]Algorithm{}
	for i := range n {
		b.send[i] = singleVal[int32](r, k, i)
	}
	if err := Allgather(bg, c, b.send[:n], b.recv); err != nil {
		return nil, err
	}
	algs["allgather"] = c.LastAlgorithm()
	for i, v := range b.recv {
		if w := singleVal[int32](i/n, k, i%n); v != w {
			return nil, fmt.Errorf("allgather %d: element %d is %d, want %d", k, i, v, w)
		}
	}
	for i := range b.bcast {
		b.bcast[i] = 0
		if r == 0 {
			b.bcast[i] = singleVal[int32](7, k, i)
		}
	}
	if err := Bcast(bg, c, b.bcast, 0); err != nil {
		return nil, err
	}
	algs["bcast"] = c.LastAlgorithm()
	for i, v := range b.bcast {
		if w := singleVal[int32](7, k, i); v != w {
			return nil, fmt.Errorf("bcast %d: element %d is %d, want %d", k, i, v, w)
		}
	}
	m := len(b.gsend) // int32s per gathered block
	for i := range m {
		b.gsend[i] = singleVal[int32](r, k+1, i)
	}
	if err := Gather(bg, c, b.gsend, b.gather, 0); err != nil {
		return nil, err
	}
	algs["gather"] = c.LastAlgorithm()
	if r == 0 {
		for i, v := range b.gather {
			if w := singleVal[int32](i/m, k+1, i%m); v != w {
				return nil, fmt.Errorf("gather %d: element %d is %d, want %d", k, i, v, w)
			}
		}
	}
	for i := range b.asend {
		b.asend[i] = singleVal[int32](r, k+i/n+2, i%n) // block j for rank j
	}
	if err := Alltoall(bg, c, b.asend, b.a2a); err != nil {
		return nil, err
	}
	algs["alltoall"] = c.LastAlgorithm()
	for i, v := range b.a2a {
		if w := singleVal[int32](i/n, k+r+2, i%n); v != w {
			return nil, fmt.Errorf("alltoall %d: element %d is %d, want %d", k, i, v, w)
		}
	}
	return algs, nil
}

// warmBuf are one rank's buffers of warmCalls: an allgather's and an
// alltoall's of bytes, a bcast of bytes, a gather of blocks of bytes;
// each offered once per call where Single offers it (offerHuge).
type warmBuf struct{ send, recv, bcast, gsend, gather, asend, a2a []int32 }

func newWarmBuf(p, bytes int) *warmBuf {
	n := bytes / 4
	return &warmBuf{make([]int32, n/p), make([]int32, n), make([]int32, n), make([]int32, n), make([]int32, p*n), make([]int32, n), make([]int32, n)}
}
