package tests

// The misuse table: every wrong way to call shmcoll that we could think of,
// each with the exact error it gets (errors.Is a sentinel, and a message
// substring) and proof that nothing was corrupted: the misused
// communicator stays aborted (later calls return ErrAborted), the inputs
// were not written, a communicator made before the misuse still computes
// exact results, a foreign file under an arena's name is left as it was, a
// valid job with the same parameters works afterwards, and nothing is left
// in /dev/shm.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shmcoll/shmcoll/collectives"
	"github.com/shmcoll/shmcoll/launch"
	"github.com/shmcoll/shmcoll/shm"
	"github.com/shmcoll/shmcoll/simd"
	"github.com/shmcoll/shmcoll/tests/internal/callmix"
)

var bg = context.Background()

// misuseP is the number of in-process ranks of the collective cases.
const misuseP = 4

// rankInput is rank r's send buffer in the collective cases.
func rankInput(r, n int) []int32 {
	v := make([]int32, n)
	for i := range v {
		v[i] = int32(r*1000 + i)
	}
	return v
}

// checkHealthy runs an exact reduce-scatter on comms (one per rank) and fails t
// if any rank errs or computes a wrong result.
func checkHealthy(t *testing.T, what string, comms []*collectives.Comm, call int) {
	t.Helper()
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for i, c := range comms {
		wg.Go(func() {
			s := callmix.Spec{Call: call, Coll: collectives.CollReduceScatterBlock, Type: "int64", Op: "sum", N: 1000}
			errs[i] = callmix.Run(bg, c, s)
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Errorf("%s: rank %d: a healthy communicator failed: %v", what, r, err)
		}
	}
}

// collMisuse runs f on misuseP in-process ranks and checks that every rank
// fails with an error wrapping want and ErrAborted whose text holds msg, that
// later calls fail with ErrAborted, that the inputs are unchanged, and that
// a communicator Dup'ed before the misuse still works.
func collMisuse(t *testing.T, opts []collectives.Options, want error, msg string, f func(c *collectives.Comm, in []int32) error) {
	t.Helper()
	p := misuseP
	comms := make([]*collectives.Comm, p)
	if opts == nil {
		cs, err := collectives.NewLocal(p, collectives.Options{SlotBytes: 16 << 10})
		if err != nil {
			t.Fatal(err)
		}
		comms = cs
	} else {
		// Per-rank options: a named arena joined by goroutines.
		name := shm.NewName()
		var wg sync.WaitGroup
		errs := make([]error, p)
		for r := range p {
			wg.Go(func() { comms[r], errs[r] = collectives.Join(bg, name, r, p, opts[r]) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
	}
	dups := make([]*collectives.Comm, p)
	errs := make([]error, p)
	later := make([]error, p)
	ins := make([][]int32, p)
	var wg sync.WaitGroup
	for r, c := range comms {
		ins[r] = rankInput(r, 64)
		wg.Go(func() {
			var err error
			if dups[r], err = c.Dup(bg); err != nil {
				errs[r] = fmt.Errorf("dup: %w", err)
				return
			}
			errs[r] = f(c, ins[r])
			later[r] = collectives.Barrier(bg, c)
			if errs[r] == nil {
				// A rank that returned early from a rooted call gets the
				// error at its next call.
				errs[r] = later[r]
			}
		})
	}
	wg.Wait()
	defer func() {
		for r := range p {
			comms[r].Close()
			if dups[r] != nil {
				dups[r].Close()
			}
		}
	}()
	for r, err := range errs {
		switch {
		case err == nil:
			t.Errorf("rank %d: no error, want %v", r, want)
		case !errors.Is(err, want) || !errors.Is(err, collectives.ErrAborted) || !strings.Contains(err.Error(), msg):
			t.Errorf("rank %d: %v\nwant an error wrapping %v and ErrAborted that says %q", r, err, want, msg)
		}
		if !errors.Is(later[r], collectives.ErrAborted) {
			t.Errorf("rank %d: a later call returned %v, want ErrAborted", r, later[r])
		}
		if !slices32Equal(ins[r], rankInput(r, 64)) {
			t.Errorf("rank %d: the input buffer was written", r)
		}
	}
	if dups[0] != nil {
		checkHealthy(t, "a communicator made before the misuse", dups, 1)
	}
}

func slices32Equal(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// affineOp is associative and not commutative.
var affineOp = collectives.NewOp("affine", func(dst, src []simd.Int64Int64) {
	for i := range dst {
		d, s := dst[i], src[i]
		dst[i] = simd.Int64Int64{Value: d.Value * s.Value, Index: d.Value*s.Index + d.Index}
	}
}, false)

func TestMisuseCollectives(t *testing.T) {
	pin := func(r int, coll collectives.Collective, a collectives.Algorithm) collectives.Options {
		return collectives.Options{SlotBytes: 16 << 10, Algorithms: map[collectives.Collective]collectives.Algorithm{coll: a}}
	}
	odd := func(c *collectives.Comm) bool { return c.Rank() == 2 }
	cases := []struct {
		name string
		opts func(r int) collectives.Options
		want error
		msg  string
		f    func(c *collectives.Comm, in []int32) error
	}{
		{"counts differ", nil, collectives.ErrMismatch, "count 63", func(c *collectives.Comm, in []int32) error {
			n := 64
			if odd(c) {
				n = 63
			}
			return collectives.Allreduce(bg, c, in[:n], make([]int32, n), collectives.Sum)
		}},
		{"types differ", nil, collectives.ErrMismatch, "passed float32", func(c *collectives.Comm, in []int32) error {
			if odd(c) {
				return collectives.Allreduce(bg, c, make([]float32, 64), make([]float32, 64), collectives.Sum)
			}
			return collectives.Allreduce(bg, c, in, make([]int32, 64), collectives.Sum)
		}},
		{"operators differ", nil, collectives.ErrMismatch, "passed different operators", func(c *collectives.Comm, in []int32) error {
			op := collectives.Sum
			if odd(c) {
				op = collectives.Max
			}
			return collectives.Allreduce(bg, c, in, make([]int32, 64), op)
		}},
		{"user operators of different names", nil, collectives.ErrMismatch, "passed different operators", func(c *collectives.Comm, in []int32) error {
			name := "plus"
			if odd(c) {
				name = "plus2"
			}
			op := collectives.NewOp(name, func(d, s []int32) {
				for i := range d {
					d[i] += s[i]
				}
			}, true)
			return collectives.Allreduce(bg, c, in, make([]int32, 64), op)
		}},
		{"roots differ", nil, collectives.ErrMismatch, "root", func(c *collectives.Comm, in []int32) error {
			root := 0
			if odd(c) {
				root = 1
			}
			return collectives.Bcast(bg, c, make([]int32, 64), root)
		}},
		{"collectives differ", nil, collectives.ErrMismatch, "rank 2 called bcast", func(c *collectives.Comm, in []int32) error {
			if odd(c) {
				return collectives.Bcast(bg, c, make([]int32, 64), 0)
			}
			return collectives.Allreduce(bg, c, in, make([]int32, 64), collectives.Sum)
		}},
		{"algorithms differ", func(r int) collectives.Options {
			if r == 2 {
				return pin(r, collectives.CollAllreduce, collectives.Flat)
			}
			return pin(r, collectives.CollAllreduce, collectives.Circulant)
		}, collectives.ErrMismatch, "algorithm", func(c *collectives.Comm, in []int32) error {
			return collectives.Allreduce(bg, c, in, make([]int32, 64), collectives.Sum)
		}},
		{"count vectors differ", nil, collectives.ErrMismatch, "different count vectors", func(c *collectives.Comm, in []int32) error {
			counts := []int{4, 4, 4, 4}
			if odd(c) {
				counts = []int{3, 5, 4, 4}
			}
			return collectives.ReduceScatter(bg, c, in[:16], make([]int32, counts[c.Rank()]), counts, collectives.Sum)
		}},
		{"numbers of calls differ", nil, collectives.ErrMismatch, "called barrier", func(c *collectives.Comm, in []int32) error {
			if odd(c) {
				if err := collectives.Barrier(bg, c); err != nil {
					return err
				}
			}
			return collectives.Allreduce(bg, c, in, make([]int32, 64), collectives.Sum)
		}},
		{"nil receive buffer", nil, collectives.ErrInvalidArgument, "len(send) = 64, len(recv) = 0", func(c *collectives.Comm, in []int32) error {
			var recv []int32
			if !odd(c) {
				recv = make([]int32, 64)
			}
			return collectives.Allreduce(bg, c, in, recv, collectives.Sum)
		}},
		{"short send buffer", nil, collectives.ErrInvalidArgument, "len(send) = 63, want 4 ranks × len(recv) 16", func(c *collectives.Comm, in []int32) error {
			send := in
			if odd(c) {
				send = in[:63]
			}
			return collectives.ReduceScatterBlock(bg, c, send, make([]int32, 16), collectives.Sum)
		}},
		{"overlapping buffers", nil, collectives.ErrInvalidArgument, "overlap", func(c *collectives.Comm, in []int32) error {
			buf := make([]int32, 65)
			copy(buf, in)
			if odd(c) {
				return collectives.Allreduce(bg, c, buf[:64], buf[1:], collectives.Sum)
			}
			return collectives.Allreduce(bg, c, in, make([]int32, 64), collectives.Sum)
		}},
		{"receive not a multiple of p", nil, collectives.ErrInvalidArgument, "len(recv) = 63 is not a multiple of 4 ranks", func(c *collectives.Comm, in []int32) error {
			n := 64
			if odd(c) {
				n = 63
			}
			return collectives.Allgather(bg, c, in[:16], make([]int32, n))
		}},
		{"root out of range", nil, collectives.ErrInvalidArgument, "root 4 out of range [0, 4)", func(c *collectives.Comm, in []int32) error {
			root := 0
			if odd(c) {
				root = 4
			}
			return collectives.Bcast(bg, c, make([]int32, 8), root)
		}},
		{"negative root", nil, collectives.ErrInvalidArgument, "root -1 out of range", func(c *collectives.Comm, in []int32) error {
			root := 0
			if odd(c) {
				root = -1
			}
			return collectives.Reduce(bg, c, in, make([]int32, 64), collectives.Sum, root)
		}},
		{"nil send off the root", nil, collectives.ErrInvalidArgument, "send is nil on a rank other than the root", func(c *collectives.Comm, in []int32) error {
			send := in
			if odd(c) {
				send = nil
			}
			return collectives.Reduce(bg, c, send, make([]int32, 64), collectives.Sum, 0)
		}},
		{"negative count", nil, collectives.ErrInvalidArgument, "counts[1] = -1", func(c *collectives.Comm, in []int32) error {
			counts := []int{1, 1, 1, 1}
			if odd(c) {
				counts = []int{1, -1, 2, 2}
			}
			return collectives.ReduceScatter(bg, c, in[:4], make([]int32, counts[c.Rank()]), counts, collectives.Sum)
		}},
		{"zero operator", nil, collectives.ErrInvalidArgument, "zero Op", func(c *collectives.Comm, in []int32) error {
			op := collectives.Sum
			if odd(c) {
				op = collectives.Op{}
			}
			return collectives.Allreduce(bg, c, in, make([]int32, 64), op)
		}},
		{"operator for another type", nil, collectives.ErrInvalidArgument, `operator "usum" is for int64, not int32`, func(c *collectives.Comm, in []int32) error {
			op := collectives.Sum
			if odd(c) {
				op = callmix.UserSum
			}
			return collectives.Allreduce(bg, c, in, make([]int32, 64), op)
		}},
		{"bitwise operator on floats", nil, collectives.ErrInvalidArgument, "band", func(c *collectives.Comm, in []int32) error {
			return collectives.Allreduce(bg, c, make([]float64, 8), make([]float64, 8), collectives.Band)
		}},
		{"algorithm that does not implement the collective", func(r int) collectives.Options {
			return pin(r, collectives.CollScan, collectives.Circulant)
		}, collectives.ErrInvalidArgument, "does not implement scan", func(c *collectives.Comm, in []int32) error {
			return collectives.Scan(bg, c, in, make([]int32, 64), collectives.Sum)
		}},
		{"non-commutative operator on a reordering algorithm", func(r int) collectives.Options {
			return pin(r, collectives.CollAllreduce, collectives.Circulant)
		}, collectives.ErrNotCommutative, "circulant for allreduce", func(c *collectives.Comm, in []int32) error {
			v := make([]simd.Int64Int64, 8)
			for i := range v {
				v[i] = simd.Int64Int64{Value: 1, Index: int64(i)}
			}
			return collectives.Allreduce(bg, c, v, make([]simd.Int64Int64, 8), affineOp)
		}},
		{"alltoallv counts that do not pair", nil, collectives.ErrMismatch, "", func(c *collectives.Comm, in []int32) error {
			sc := []int{1, 1, 1, 1}
			rc := []int{1, 1, 1, 1}
			if odd(c) {
				rc[1] = 2
			}
			return collectives.Alltoallv(bg, c, in[:4], sc, nil, make([]int32, 5), rc, nil)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var opts []collectives.Options
			if tc.opts != nil {
				for r := range misuseP {
					opts = append(opts, tc.opts(r))
				}
			}
			collMisuse(t, opts, tc.want, tc.msg, tc.f)
		})
	}
}

// TestMisuseClosedAndAborted: calls on a closed communicator return
// ErrClosed, on an aborted one ErrAborted naming the cause; Close is
// idempotent.
func TestMisuseClosedAndAborted(t *testing.T) {
	cs, err := collectives.NewLocal(2, collectives.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cs[0].Close()
	if err := cs[0].Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	err = collectives.Allreduce(bg, cs[0], []int32{1}, make([]int32, 1), collectives.Sum)
	if !errors.Is(err, collectives.ErrClosed) || !strings.Contains(err.Error(), "communicator closed") {
		t.Errorf("call on a closed communicator: %v, want ErrClosed", err)
	}
	// Rank 1's peer left: its call fails instead of waiting.
	err = collectives.Barrier(bg, cs[1])
	if !errors.Is(err, collectives.ErrPeerDead) || !strings.Contains(err.Error(), "rank 0 left the arena") {
		t.Errorf("call with a closed peer: %v, want ErrPeerDead naming rank 0", err)
	}
	cs[1].Close()

	cs, err = collectives.NewLocal(3, collectives.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cs[1].Abort(errors.New("operator error 42"))
	for r, c := range cs {
		err := collectives.Allreduce(bg, c, []int32{1}, make([]int32, 1), collectives.Sum)
		if !errors.Is(err, collectives.ErrAborted) || !strings.Contains(err.Error(), "aborted by rank 1: operator error 42") {
			t.Errorf("rank %d: call on an aborted communicator: %v", r, err)
		}
		c.Close()
	}
}

// joinErr joins rank of size on name with a short join timeout.
func joinErr(name string, rank, size int, opt collectives.Options) error {
	if opt.Timeout == 0 {
		opt.Timeout = 200 * time.Millisecond
	}
	c, err := collectives.Join(bg, name, rank, size, opt)
	if err == nil {
		c.Close()
	}
	return err
}

func TestMisuseSizesAndNames(t *testing.T) {
	long := strings.Repeat("a", 65)
	cases := []struct {
		name string
		err  func() error
		want error
		msg  string
	}{
		{"p = 0 in process", func() error { _, err := collectives.NewLocal(0, collectives.Options{}); return err }, shm.ErrBadSize, "0 ranks (want 1..4096)"},
		{"p < 0 in process", func() error { _, err := collectives.NewLocal(-3, collectives.Options{}); return err }, shm.ErrBadSize, "-3 ranks"},
		{"p = 0 named", func() error { return joinErr(shm.NewName(), 0, 0, collectives.Options{}) }, shm.ErrBadSize, "rank 0 of 0"},
		{"p too large", func() error { return joinErr(shm.NewName(), 0, 5000, collectives.Options{}) }, shm.ErrBadSize, "5000 ranks"},
		{"rank = p", func() error { return joinErr(shm.NewName(), 4, 4, collectives.Options{}) }, shm.ErrBadSize, "rank 4 of 4"},
		{"rank < 0", func() error { return joinErr(shm.NewName(), -1, 4, collectives.Options{}) }, shm.ErrBadSize, "rank -1 of 4"},
		{"p = 0 launched", func() error { _, err := launch.Start(bg, launch.Config{NP: 0, Prog: "true"}); return err }, launch.ErrBadConfig, "0 ranks"},
		{"name with /", func() error { return joinErr("a/b", 0, 2, collectives.Options{}) }, shm.ErrBadName, `"a/b"`},
		{"name ..", func() error { return joinErr("..", 0, 2, collectives.Options{}) }, shm.ErrBadName, `".."`},
		{"name ../../etc/passwd", func() error { return joinErr("../../etc/passwd", 1, 2, collectives.Options{}) }, shm.ErrBadName, "is not a letter"},
		{"name too long", func() error { return joinErr(long, 0, 2, collectives.Options{}) }, shm.ErrBadName, "want 1..64 bytes"},
		{"empty name", func() error { return joinErr("", 0, 2, collectives.Options{}) }, shm.ErrBadName, "want 1..64 bytes"},
		{"another uid's name", func() error { return joinErr("shmcoll.12345.abc", 0, 2, collectives.Options{}) }, shm.ErrBadName, "not of uid"},
		{"slot too large", func() error { return joinErr(shm.NewName(), 0, 2, collectives.Options{SlotBytes: 1 << 40}) }, shm.ErrBadSize, "slot of 1099511627776 bytes"},
		{"/dev/shm too small", func() error {
			return joinErr(shm.NewName(), 0, 2, collectives.Options{SlotBytes: 1 << 36})
		}, shm.ErrNoSpace, "the arena needs"},
		{"bad skips", func() error {
			_, err := collectives.NewLocal(4, collectives.Options{Skips: func(p int) []int { return []int{3, 2} }})
			return err
		}, collectives.ErrInvalidArgument, "skip"},
	}
	before := shmSnapshot()
	for _, tc := range cases {
		err := tc.err()
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v\nwant an error wrapping %v that says %q", tc.name, err, tc.want, tc.msg)
		}
	}
	for p := range shmSnapshot() {
		if !before[p] && segmentCreator(p) == os.Getpid() {
			t.Errorf("%s left behind", p)
			os.Remove(p)
		}
	}
	// Nothing broke: a valid arena works.
	cs, err := collectives.NewLocal(3, collectives.Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkHealthy(t, "after the bad sizes and names", cs, 3)
	for _, c := range cs {
		c.Close()
	}
}

func TestMisuseEnvironment(t *testing.T) {
	cases := []struct {
		rank, size, arena string
		want              error
		msg               string
	}{
		{"x", "2", shm.NewName(), shm.ErrNoEnv, `SHMCOLL_RANK="x" is not a number`},
		{"0", "", shm.NewName(), shm.ErrNoEnv, `SHMCOLL_SIZE="" is not a number`},
		{"2", "2", shm.NewName(), shm.ErrBadSize, "rank 2 of 2 from the shmcoll environment"},
		{"0", "0", shm.NewName(), shm.ErrBadSize, "rank 0 of 0"},
		{"-1", "2", shm.NewName(), shm.ErrBadSize, "rank -1 of 2"},
		{"0", "2", "fd:-1", shm.ErrNoEnv, "bad file descriptor"},
		{"0", "2", "fd:x", shm.ErrNoEnv, "bad file descriptor"},
		{"0", "2", "../x", shm.ErrBadName, `"../x"`},
		{"0", "2", "", shm.ErrBadName, "want 1..64 bytes"},
	}
	for _, tc := range cases {
		t.Setenv(shm.EnvRank, tc.rank)
		t.Setenv(shm.EnvSize, tc.size)
		t.Setenv(shm.EnvArena, tc.arena)
		_, err := collectives.JoinEnv(bg, collectives.Options{Timeout: 100 * time.Millisecond})
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("rank %q size %q arena %q: %v\nwant an error wrapping %v that says %q", tc.rank, tc.size, tc.arena, err, tc.want, tc.msg)
		}
	}
	t.Setenv(shm.EnvRank, "0")
	t.Setenv(shm.EnvSize, "1")
	t.Setenv(shm.EnvArena, shm.NewName())
	t.Setenv("SHMCOLL_ALGO_ALLREDUCE", "fastest")
	_, err := collectives.JoinEnv(bg, collectives.Options{})
	if !errors.Is(err, collectives.ErrInvalidArgument) || !strings.Contains(err.Error(), `SHMCOLL_ALGO_ALLREDUCE`) || !strings.Contains(err.Error(), `"fastest"`) {
		t.Errorf("SHMCOLL_ALGO_ALLREDUCE=fastest: %v", err)
	}
	if left := shmSnapshot(); len(left) > 0 {
		for p := range left {
			if segmentCreator(p) == os.Getpid() {
				t.Errorf("%s left behind", p)
				os.Remove(p)
			}
		}
	}
}

// resum rewrites the header checksum (shm/doc.go: FNV-1a of bytes 8..96 at 96).
func resum(h []byte) {
	f := fnv.New64a()
	f.Write(h[8:96]) // the checksum at 96 covers [8, 96)
	binary.NativeEndian.PutUint64(h[96:], f.Sum64())
}

// realSegment returns the bytes of a segment made by shm.Join (rank 0 of
// 2, captured before rank 1 joins) and the pid of its creator (this
// process, so that it is not judged stale).
func realSegment(t *testing.T, slot int) []byte {
	t.Helper()
	name := shm.NewName()
	path, _ := shm.SegmentPath(name)
	var wg sync.WaitGroup
	var c0, c1 *collectives.Comm
	var err0 error
	wg.Go(func() { c0, err0 = collectives.Join(bg, name, 0, 2, collectives.Options{SlotBytes: slot}) })
	var data []byte
	for {
		b, err := os.ReadFile(path)
		if err == nil && len(b) >= 4096 && binary.NativeEndian.Uint64(b) != 0 {
			data = b
			break
		}
		time.Sleep(time.Millisecond)
	}
	c1, err := collectives.Join(bg, name, 1, 2, collectives.Options{SlotBytes: slot})
	wg.Wait()
	if err != nil || err0 != nil {
		t.Fatal(err, err0)
	}
	c0.Close()
	c1.Close()
	// Only the header and control blocks matter; the slots are zeros.
	return data
}

func TestMisuseSegments(t *testing.T) {
	const slot = 4096
	ok := realSegment(t, slot)
	mod := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(ok)) }
	cases := []struct {
		name string
		data []byte
		mode os.FileMode
		rank int
		want error
		msg  string
	}{
		{"foreign file (joiner)", []byte(strings.Repeat("not an arena ", 1000)), 0o600, 1, shm.ErrBadHeader, "not a shmcoll arena"},
		{"foreign file (creator)", []byte(strings.Repeat("not an arena ", 1000)), 0o600, 0, shm.ErrExists, "another job uses the name"},
		{"corrupted header", mod(func(b []byte) []byte { b[40] ^= 0x10; return b }), 0o600, 1, shm.ErrBadHeader, "checksum mismatch"},
		{"truncated header", ok[:4000], 0o600, 1, shm.ErrJoinTimeout, "segment"},
		{"truncated arena", ok[:len(ok)-4096], 0o600, 1, shm.ErrBadHeader, "truncated"},
		{"version mismatch", mod(func(b []byte) []byte { binary.NativeEndian.PutUint32(b[8:], 99); resum(b); return b }), 0o600, 1, shm.ErrBadHeader, "format version 99, this library reads"},
		{"slot size mismatch", realSegment(t, 2*slot), 0o600, 1, shm.ErrBadHeader, "slots are 8192 bytes, caller expects 4096"},
		{"rank count mismatch", mod(func(b []byte) []byte { binary.NativeEndian.PutUint32(b[16:], 3); resum(b); return b }), 0o600, 1, shm.ErrBadHeader, ""},
		{"readable by others", ok, 0o644, 1, shm.ErrBadHeader, "gives others access"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := shm.NewName()
			path, _ := shm.SegmentPath(name)
			if err := os.WriteFile(path, tc.data, tc.mode); err != nil {
				t.Fatal(err)
			}
			os.Chmod(path, tc.mode)
			defer os.Remove(path)
			// shm.Join: collectives.Options has no join timeout (20s).
			ep, err := shm.Join(bg, name, tc.rank, 2, shm.Options{SlotBytes: slot, JoinTimeout: 300 * time.Millisecond})
			if err == nil {
				ep.Close()
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("%v\nwant an error wrapping %v that says %q", err, tc.want, tc.msg)
			}
			// The file under the name is as it was.
			got, rerr := os.ReadFile(path)
			if rerr != nil || !bytes.Equal(got, tc.data) {
				t.Errorf("the file under the arena's name was changed or removed (%v)", rerr)
			}
		})
	}
}

// TestMisuseJoinAfterRendezvous: a rank that joins an arena after all its
// ranks joined finds no segment (it was unlinked) and times out; the
// running communicator is not disturbed.
func TestMisuseJoinAfterRendezvous(t *testing.T) {
	name := shm.NewName()
	comms := make([]*collectives.Comm, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Go(func() {
			var err error
			if comms[r], err = collectives.Join(bg, name, r, 2, collectives.Options{SlotBytes: 8192}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	// shm.Join: collectives.Options has no join timeout (20s).
	ep, err := shm.Join(bg, name, 1, 2, shm.Options{SlotBytes: 8192, JoinTimeout: 300 * time.Millisecond})
	if err == nil {
		ep.Close()
	}
	if !errors.Is(err, shm.ErrJoinTimeout) || !strings.Contains(err.Error(), "segment does not exist") {
		t.Errorf("late joiner: %v, want ErrJoinTimeout: segment does not exist", err)
	}
	checkHealthy(t, "the running communicator", comms, 4)
	for _, c := range comms {
		c.Close()
	}
}

// TestMisuseRankClaimedTwice: two processes claim rank 1 of one named
// arena; one of them fails, the arena's other ranks work. The one that
// fails gets ErrRankTaken if it comes while the segment is still named, and
// ErrJoinTimeout (segment does not exist, as in TestMisuseJoinAfterRendezvous)
// if all three ranks had joined and unlinked it before it came, and waits
// out its join timeout (20 s): a process that starts late, as under the race
// detector, arrives after the other three.
func TestMisuseRankClaimedTwice(t *testing.T) {
	rank := tool(t, "tests/internal/faultrank")
	before := shmSnapshot()
	name := shm.NewName()
	var wg sync.WaitGroup
	outs := make([]bytes.Buffer, 4)
	cmds := make([]*exec.Cmd, 4)
	for i, r := range []int{0, 1, 1, 2} {
		cmd := exec.Command(rank, "-mode", "stream", "-calls", "20", "-seed", "7", "-maxn", "1000", "-randompins=false")
		cmd.Env = append(os.Environ(), shm.EnvRank+"="+strconv.Itoa(r), shm.EnvSize+"=3", shm.EnvArena+"="+name, "SHMCOLL_TIMEOUT=1s")
		cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
		cmds[i] = cmd
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { cmd.Wait() })
	}
	wg.Wait()
	taken, done := 0, 0
	pids := map[int]bool{}
	for i := range cmds {
		pids[cmds[i].Process.Pid] = true
		out := outs[i].String()
		switch {
		case strings.Contains(out, "JOINFAIL") && (strings.Contains(out, "rank already joined: rank 1") ||
			strings.Contains(out, "join timed out: segment does not exist")):
			taken++
		case strings.HasPrefix(out, "READY") && strings.Contains(out, "\nDONE calls=20"):
			done++
		default:
			t.Errorf("process %d: %s", i, out)
		}
	}
	if taken != 1 || done != 3 {
		t.Errorf("%d processes refused, %d completed; want 1 and 3", taken, done)
	}
	noLeak(t, before, pids, filepath.Base(mustPath(t, name)))
}

func mustPath(t *testing.T, name string) string {
	p, err := shm.SegmentPath(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestMisuseCommandFlags: bad flags to every command get exit status 2, a
// message naming the flag and the usage, and start nothing.
func TestMisuseCommandFlags(t *testing.T) {
	shmrun := tool(t, "cmd/shmrun")
	rank := tool(t, "tests/internal/faultrank")
	type cmdCase struct {
		args []string
		code int
		msg  string
	}
	check := func(bin string, cases []cmdCase) {
		for _, tc := range cases {
			cmd := exec.Command(bin, tc.args...)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			cmd.Run()
			if code := cmd.ProcessState.ExitCode(); code != tc.code || !strings.Contains(out.String(), tc.msg) {
				t.Errorf("%s %q: exit %d, output %q; want exit %d and %q", filepath.Base(bin), tc.args, code, out.String(), tc.code, tc.msg)
			}
			if strings.Contains(out.String(), "READY") {
				t.Errorf("%s %q started ranks", filepath.Base(bin), tc.args)
			}
		}
	}
	check(shmrun, []cmdCase{
		{[]string{"-np", "0", rank}, 2, "-np 0: need 1 to 4096 ranks"},
		{[]string{"-np", "-1", rank}, 2, "-np -1"},
		{[]string{"-np", "4097", rank}, 2, "-np 4097"},
		{[]string{"-np", "2"}, 2, "missing program to run"},
		{[]string{"-np", "2", "-bind", "everywhere", rank}, 2, `-bind "everywhere"`},
		{[]string{"-np", "2", "-arena", "../x", rank}, 2, `-arena "../x"`},
		{[]string{"-np", "2", "-slot", "-4K", rank}, 2, `-slot "-4K"`},
		{[]string{"-np", "2", "-timeout", "soon", rank}, 2, `invalid value "soon"`},
		{[]string{"-np", "2", "-nosuchflag", rank}, 2, "flag provided but not defined"},
		{[]string{"-np", "2", "/nonexistent/prog"}, 127, "/nonexistent/prog"},
	})
	if testing.Short() {
		return
	}
	bench := tool(t, "cmd/shmbench")
	check(bench, []cmdCase{
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"run", "-np", "0"}, 2, "-np 0: need 1 to 4096 ranks"},
		{[]string{"run", "-coll", "allsum"}, 2, "allsum"},
		{[]string{"run", "-algo", "fastest"}, 2, `unknown algorithm "fastest"`},
		{[]string{"run", "-dtype", "int128"}, 2, "-dtype"},
		{[]string{"run", "-op", "avg"}, 2, "-op"},
		{[]string{"run", "-sizes", "1K:8"}, 2, "-sizes"},
		{[]string{"run", "-format", "xml"}, 2, `-format "xml"`},
		{[]string{"run", "-iters", "-1"}, 2, "-iters -1"},
		{[]string{"run", "-timeout", "0s"}, 2, "-timeout 0s"},
		{[]string{"run", "extra"}, 2, "unexpected arguments"},
		{[]string{"run", "-dtype", "float64", "-op", "band"}, 2, "band"},
		{[]string{"topo", "-nosuch"}, 2, "flag provided but not defined: -nosuch"},
		{[]string{"topo", "-cpus", "x"}, 2, `cpu list "x"`},
		{[]string{"compare", "-nosuch"}, 2, "flag provided but not defined: -nosuch"},
		{[]string{"compare", "-np", "0"}, 2, "-np 0"},
		{[]string{"schedule", "-p", "0"}, 2, "-p must be given"},
		{[]string{"schedule", "-p", "4", "-rank", "9"}, 2, "-rank 9 out of range [0, 4)"},
		{[]string{"schedule", "-p", "4", "-skips", "zigzag"}, 2, `"zigzag"`},
	})
}

// TestMisuseSlotTooSmall: 130 ranks with one-page slots cannot run a
// reduce-scatter of complex128 blocks: a slot half holds 128 elements, less
// than a piece of each block. Every rank gets the same error, none hangs.
func TestMisuseSlotTooSmall(t *testing.T) {
	const p = 130
	cs, err := collectives.NewLocal(p, collectives.Options{SlotBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	errs := make([]error, p)
	var wg sync.WaitGroup
	for r, c := range cs {
		wg.Go(func() {
			errs[r] = collectives.ReduceScatterBlock(bg, c, make([]complex128, 2*p), make([]complex128, 2), collectives.Sum)
			if later := collectives.Barrier(bg, c); !errors.Is(later, collectives.ErrAborted) {
				errs[r] = fmt.Errorf("later call: %v", later)
			}
		})
	}
	wg.Wait()
	for r, err := range errs {
		if !errors.Is(err, collectives.ErrInvalidArgument) || !errors.Is(err, collectives.ErrAborted) ||
			!strings.Contains(err.Error(), "cannot hold a piece of each of 130 blocks") {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	for _, c := range cs {
		c.Close()
	}
}

// TestMisuseSmallDevShm runs shmrun in a private mount namespace whose
// /dev/shm is a 1 MiB tmpfs (as in a container with a small /dev/shm). A
// named arena of two 1 MiB slots cannot be created: rank 0 fails with
// ErrNoSpace at join (never SIGBUS later) and shmrun exits non-zero. The
// default memfd arena does not live in /dev/shm, so the same job works.
// Nothing is left in the small /dev/shm either way.
func TestMisuseSmallDevShm(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root for a mount namespace")
	}
	if err := exec.Command("unshare", "--mount", "true").Run(); err != nil {
		t.Skipf("no mount namespace: %v", err)
	}
	shmrun, rank := tool(t, "cmd/shmrun"), tool(t, "tests/internal/faultrank")
	run := func(arena string) (string, int) {
		script := `mount -t tmpfs -o size=1m tmpfs /dev/shm || exit 99
"$@"; rc=$?
for f in /dev/shm/*; do [ -e "$f" ] && echo "LEFT $f"; done
exit $rc`
		cmd := exec.Command("unshare", "--mount", "sh", "-c", script, "sh",
			shmrun, "-np", "2", "-arena", arena, "-slot", "1M", "-bind", "none",
			rank, "-mode", "stream", "-calls", "30", "-seed", "3", "-maxn", "20000", "-slot", "1048576", "-randompins=false")
		out, _ := cmd.CombinedOutput()
		return string(out), cmd.ProcessState.ExitCode()
	}
	out, code := run("named")
	if code == 0 || code == 99 || !strings.Contains(out, "JOINFAIL") || !strings.Contains(out, "not enough shared memory") ||
		!strings.Contains(out, "the arena needs") {
		t.Errorf("named arena in a 1 MiB /dev/shm: exit %d, want non-zero and ErrNoSpace:\n%s", code, out)
	}
	if strings.Contains(out, "LEFT") || strings.Contains(out, "SIGBUS") {
		t.Errorf("named arena in a 1 MiB /dev/shm:\n%s", out)
	}
	out, code = run("memfd")
	if code != 0 || strings.Count(out, "DONE calls=30") != 2 || strings.Contains(out, "LEFT") {
		t.Errorf("memfd arena with a 1 MiB /dev/shm: exit %d, want 0 and both ranks done:\n%s", code, out)
	}
}
