//go:build mpi

// Command hiercoll is the hierarchical side of `shmbench compare`: it times
// [hier]'s collectives (shared memory inside emulated nodes, MPI between
// them) with exactly the method, flags, values, checks and JSON lines of
// internal/mpibench's mpicoll.c, so that its results sit beside the MPI
// library's own collectives. It is built on demand with -tags mpi (Open MPI)
// or -tags mpi,mpich by [mpibench.BuildHier] and launched with that MPI's
// mpirun; SHMCOLL_NODE_SIZE groups the ranks into emulated nodes.
//
// Usage: hiercoll [-c coll,...|all] [-s bytes,...] [-n iters] [-t seconds]
//
//	[-w warmup_seconds] [-x maxiters] [-d float64|float32|int32|int64]
//	[-j iteration] [-a auto|leader|multilane]
//
// The barrier (hier has none) is not measured: -c barrier is skipped.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	_ "unsafe" // for go:linkname

	"github.com/shmcoll/shmcoll/collectives"
	"github.com/shmcoll/shmcoll/collectives/hier"
	"github.com/shmcoll/shmcoll/mpi"
)

const (
	allreduce = iota
	rsb
	allgather
	bcast
	reduce
	barrier
	ncoll
)

var names = [ncoll]string{"allreduce", "reduce_scatter_block", "allgather", "bcast", "reduce", "barrier"}

// flags are mpicoll.c's, plus -a.
type flags struct {
	want     [ncoll]bool
	sizes    []int64
	fixed    int
	maxiters int
	inject   int
	target   float64
	warm     float64
	dtype    string
	alg      hier.Algorithm
}

func main() {
	if err := mpi.Init(mpi.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, "hiercoll: mpi.Init:", err)
		os.Exit(1)
	}
	w := mpi.World()
	f, err := parse(os.Args[1:])
	if err != nil {
		die(w, err)
	}
	c, err := hier.New(context.Background(), w, hier.Options{Algorithm: f.alg})
	if err != nil {
		die(w, err)
	}
	failed := false
	switch f.dtype {
	case "float64":
		failed = run[float64](w, c, f, mpi.Float64)
	case "float32":
		failed = run[float32](w, c, f, mpi.Float32)
	case "int32":
		failed = run[int32](w, c, f, mpi.Int32)
	case "int64":
		failed = run[int64](w, c, f, mpi.Int64)
	}
	if err := c.Close(); err != nil {
		die(w, err)
	}
	if err := mpi.Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, "hiercoll: mpi.Finalize:", err)
		os.Exit(1)
	}
	if failed {
		os.Exit(2)
	}
}

func die(w mpi.Comm, err error) {
	fmt.Fprintf(os.Stderr, "hiercoll: rank %d: %v\n", w.Rank(), err)
	w.Abort(1)
	os.Exit(1)
}

func parse(args []string) (*flags, error) {
	f := &flags{maxiters: 200000, inject: -1, target: 0.3, warm: 0.02, dtype: "float64"}
	picked := false
	if len(args)%2 != 0 {
		return nil, fmt.Errorf("flags come in pairs: %q", args)
	}
	for i := 0; i < len(args); i += 2 {
		v := args[i+1]
		var err error
		switch args[i] {
		case "-c":
			for _, tok := range strings.Split(v, ",") {
				k := slices.Index(names[:], tok)
				switch {
				case tok == "all":
					for c := range f.want {
						f.want[c] = true
					}
				case k < 0:
					return nil, fmt.Errorf("unknown collective %q in -c", tok)
				default:
					f.want[k] = true
				}
			}
			picked = true
		case "-s":
			for _, tok := range strings.Split(v, ",") {
				b, err := strconv.ParseInt(tok, 10, 64)
				if err != nil || b < 0 {
					return nil, fmt.Errorf("bad -s %q (byte counts)", v)
				}
				f.sizes = append(f.sizes, b)
			}
		case "-n":
			f.fixed, err = strconv.Atoi(v)
		case "-t":
			f.target, err = strconv.ParseFloat(v, 64)
		case "-w":
			f.warm, err = strconv.ParseFloat(v, 64)
		case "-j":
			f.inject, err = strconv.Atoi(v)
		case "-x":
			f.maxiters, err = strconv.Atoi(v)
		case "-d":
			if !slices.Contains([]string{"float64", "float32", "int32", "int64"}, v) {
				return nil, fmt.Errorf("bad -d %q (float64, float32, int32, int64)", v)
			}
			f.dtype = v
		case "-a":
			switch v {
			case "auto":
				f.alg = hier.Auto
			case "leader":
				f.alg = hier.Leader
			case "multilane":
				f.alg = hier.MultiLane
			default:
				return nil, fmt.Errorf("bad -a %q (auto, leader, multilane)", v)
			}
		default:
			return nil, fmt.Errorf("unknown flag %q", args[i])
		}
		if err != nil {
			return nil, fmt.Errorf("bad %s %q: %v", args[i], v, err)
		}
	}
	if !picked {
		for c := range f.want {
			f.want[c] = true
		}
	}
	if len(f.sizes) == 0 {
		for b := int64(8); b <= 64<<20; b *= 8 {
			f.sizes = append(f.sizes, b)
		}
	}
	if f.fixed > 0 {
		f.maxiters = f.fixed
	}
	f.maxiters = max(f.maxiters, 1)
	return f, nil
}

// now is CLOCK_MONOTONIC in seconds: node-wide, as the span needs. It is
// read through the vDSO, as mpicoll.c's clock_gettime is (unix.ClockGettime
// is a system call, whose cost would be added to every timed call).
func now() float64 { return float64(nanotime()) * 1e-9 }

// nanotime is the runtime's CLOCK_MONOTONIC in nanoseconds (see
// cmd/shmbench/clock.go).
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// kase is one collective at one size, with mpicoll.c's values.
type kase[T int32 | int64 | float32 | float64] struct {
	coll       int
	count      int // elements of the call (per block for rsb and allgather)
	bytes      int64
	rank, np   int
	send, recv []T
}

const poison = -7

func redIn(r, j int) float64 { return float64((r + 1) * (j%61 + 1)) }
func gatIn(r, j int) float64 { return float64((r*131 + j%8191) % 8191) }
func bcIn(j int) float64     { return float64(j%8191 + 1) }
func bump(k int) float64     { return float64(k%5 + 1) }

func (c *kase[T]) inputLen() int {
	if c.coll == rsb {
		return c.count * c.np
	}
	return c.count
}

// input is rank r's element j in iteration k (k < 0: untouched).
func (c *kase[T]) input(r, j, k int) float64 {
	n := c.inputLen()
	touched := k >= 0 && n > 0 && j == k%n
	t := 0.0
	switch c.coll {
	case allgather:
		if touched {
			t = bump(k)
		}
		return gatIn(r, j) + t
	case bcast:
		if touched {
			t = 7 * bump(k)
		}
		return bcIn(j) + t
	}
	if touched {
		t = float64(r+1) * bump(k)
	}
	return redIn(r, j) + t
}

func (c *kase[T]) expected(i, k int) float64 {
	s := 0.0
	switch c.coll {
	case allreduce, reduce:
		for r := range c.np {
			s += c.input(r, i, k)
		}
	case rsb:
		for r := range c.np {
			s += c.input(r, c.rank*c.count+i, k)
		}
	case allgather:
		s = c.input(i/c.count, i%c.count, k)
	case bcast:
		s = c.input(0, i, k)
	}
	return s
}

func (c *kase[T]) resultLen() int {
	switch c.coll {
	case allreduce, bcast, rsb:
		return c.count
	case reduce:
		if c.rank == 0 {
			return c.count
		}
		return 0
	case allgather:
		return c.count * c.np
	}
	return 0
}

func (c *kase[T]) setInput(j, k int) {
	if c.coll == bcast {
		if c.rank == 0 {
			c.recv[j] = T(c.input(0, j, k))
		}
		return
	}
	c.send[j] = T(c.input(c.rank, j, k))
}

func (c *kase[T]) prepare() {
	for j := range c.inputLen() {
		c.setInput(j, -1)
	}
	if c.coll == bcast && c.rank == 0 {
		return
	}
	for j := range c.resultLen() {
		c.recv[j] = poison
	}
}

func (c *kase[T]) touch(k int) {
	n := c.inputLen()
	if n == 0 {
		return
	}
	if k > 0 {
		c.setInput((k-1)%n, -1)
	}
	c.setInput(k%n, k)
}

func (c *kase[T]) call(h *hier.Comm) error {
	ctx := context.Background()
	n := c.count
	switch c.coll {
	case allreduce:
		return hier.Allreduce(ctx, h, c.send[:n], c.recv[:n], collectives.Sum)
	case rsb:
		return hier.ReduceScatterBlock(ctx, h, c.send[:n*c.np], c.recv[:n], collectives.Sum)
	case allgather:
		return hier.Allgather(ctx, h, c.send[:n], c.recv[:n*c.np])
	case bcast:
		return hier.Bcast(ctx, h, c.recv[:n], 0)
	case reduce:
		var recv []T
		if c.rank == 0 {
			recv = c.recv[:n]
		}
		return hier.Reduce(ctx, h, c.send[:n], recv, collectives.Sum, 0)
	}
	return nil
}

func (c *kase[T]) checkTouched(k int, badAt *int) int {
	if c.resultLen() == 0 {
		return 0
	}
	bad := 0
	if c.coll == allgather {
		for r := range c.np {
			i := r*c.count + k%c.count
			if float64(c.recv[i]) != c.expected(i, k) {
				*badAt = i
				bad++
			}
		}
		return bad
	}
	i := k % c.count
	if c.coll == rsb {
		t := k % (c.count * c.np)
		if t/c.count != c.rank {
			return 0
		}
		i = t % c.count
	}
	if float64(c.recv[i]) != c.expected(i, k) {
		*badAt = i
		bad++
	}
	return bad
}

func (c *kase[T]) checkAll(k int, badAt *int) int {
	bad := 0
	for i := range c.resultLen() {
		if float64(c.recv[i]) != c.expected(i, k) {
			if bad == 0 {
				*badAt = i
			}
			bad++
		}
	}
	return bad
}

// result is mpicoll.c's result line.
type result struct {
	Type     string  `json:"type"`
	Coll     string  `json:"coll"`
	Algo     string  `json:"algo"`
	Impl     string  `json:"impl"`
	NP       int     `json:"np"`
	Dtype    string  `json:"dtype"`
	Op       string  `json:"op"`
	Bytes    int64   `json:"bytes"`
	Count    int64   `json:"count"`
	Iters    int     `json:"iters"`
	MinUS    float64 `json:"min_us"`
	MedianUS float64 `json:"median_us"`
	MeanUS   float64 `json:"mean_us"`
	MaxUS    float64 `json:"max_us"`
	P99US    float64 `json:"p99_us"`
	SpanUS   float64 `json:"span_us"`
	AlgBW    float64 `json:"algbw_GBps"`
	BusBW    float64 `json:"busbw_GBps"`
	Check    string  `json:"check"`
}

// run measures every wanted collective and size; rank 0 prints the lines.
// It reports whether a check failed.
func run[T int32 | int64 | float32 | float64](w mpi.Comm, h *hier.Comm, f *flags, dt mpi.Datatype) bool {
	rank, np := w.Rank(), w.Size()
	impl := "hier-" + string(mpi.Linked())
	esz := int64(dt.Size())
	if rank == 0 {
		lib := fmt.Sprintf("shmcoll hier over %s, SHMCOLL_NODE_SIZE=%q", mpi.Linked(), os.Getenv("SHMCOLL_NODE_SIZE"))
		b, _ := json.Marshal(map[string]any{"type": "run", "impl": impl, "library": lib,
			"np": np, "dtype": f.dtype, "op": "sum", "clock": "CLOCK_MONOTONIC"})
		fmt.Printf("%s\n", b)
	}
	maxBytes := slices.Max(f.sizes)
	bufLen := int(maxBytes/esz) + np
	send, recv := make([]T, bufLen), make([]T, bufLen)
	t0, t1 := make([]float64, f.maxiters), make([]float64, f.maxiters)
	dur := make([]float64, f.maxiters)
	algo := "hier-" + f.alg.String()
	failed := false
	must := func(err error) {
		if err != nil {
			die(w, err)
		}
	}
	for coll := range ncoll {
		if !f.want[coll] || coll == barrier {
			continue
		}
		last := int64(-1)
		for _, size := range f.sizes {
			c := &kase[T]{coll: coll, rank: rank, np: np, send: send, recv: recv}
			n := int(size / esz)
			if coll == rsb || coll == allgather {
				c.count = max(n/np, 1)
				c.bytes = int64(c.count*np) * esz
			} else {
				c.count = max(n, 1)
				c.bytes = int64(c.count) * esz
			}
			if c.bytes == last {
				continue
			}
			last = c.bytes

			// Warm-up: doubling batches until one lasts f.warm on the slowest rank.
			c.prepare()
			batch, it := 1, 0
			for {
				a := now()
				for range batch {
					c.touch(it)
					it++
					must(w.Barrier())
					must(c.call(h))
				}
				el := []float64{now() - a}
				must(mpi.Allreduce(w, nil, el, mpi.Max))
				if el[0] >= f.warm || batch >= 1<<16 {
					per := el[0] / float64(batch)
					batch = 1
					if per > 0 {
						batch = max(int(f.target/per/8), 1)
					}
					break
				}
				batch *= 2
			}

			// Timed iterations: chunks until the slowest rank has spent f.target.
			c.prepare()
			must(w.Barrier())
			iters, bad, badAt := 0, 0, 0
			start := now()
			for {
				chunk := batch
				if f.fixed > 0 {
					chunk = f.fixed
				}
				for b := 0; b < chunk && iters < f.maxiters; b++ {
					c.touch(iters)
					must(w.Barrier())
					a := now()
					must(c.call(h))
					e := now()
					t0[iters], t1[iters], dur[iters] = a, e, e-a
					if iters == f.inject && rank == 0 {
						for j := range c.resultLen() {
							c.recv[j] = poison
						}
					}
					bad += c.checkTouched(iters, &badAt)
					iters++
				}
				if f.fixed > 0 || iters >= f.maxiters {
					break
				}
				el := []float64{now() - start}
				must(mpi.Allreduce(w, nil, el, mpi.Max))
				if el[0] >= f.target && iters >= 5 {
					break
				}
			}
			bad += c.checkAll(iters-1, &badAt)

			dmax, smin, emax := slices.Clone(dur[:iters]), slices.Clone(t0[:iters]), slices.Clone(t1[:iters])
			must(mpi.Allreduce(w, nil, dmax, mpi.Max))
			must(mpi.Allreduce(w, nil, smin, mpi.Min))
			must(mpi.Allreduce(w, nil, emax, mpi.Max))
			// Every rank learns the first failing rank and what it saw.
			fail := []int64{int64(np), 0, 0}
			if bad > 0 {
				fail = []int64{int64(rank), int64(badAt), int64(bad)}
			}
			all := make([]int64, 3*np)
			must(mpi.Allgather(w, fail, all))
			first := []int64{int64(np), 0, 0}
			for r := range np {
				if all[3*r] != int64(np) {
					first = all[3*r : 3*r+3]
					break
				}
			}
			if first[0] != int64(np) {
				failed = true
			}
			if rank != 0 {
				continue
			}
			sum := 0.0
			for j := range dmax {
				sum += dmax[j]
				emax[j] -= smin[j]
			}
			slices.Sort(dmax)
			slices.Sort(emax)
			median := func(a []float64) float64 {
				if len(a)%2 == 1 {
					return a[len(a)/2]
				}
				return 0.5 * (a[len(a)/2-1] + a[len(a)/2])
			}
			p99 := max(int(math.Ceil(float64(iters)*0.99))-1, 0)
			med := median(dmax)
			fac := 1.0
			switch coll {
			case allreduce:
				fac = 2 * float64(np-1) / float64(np)
			case rsb, allgather:
				fac = float64(np-1) / float64(np)
			}
			algbw := 0.0
			if med > 0 {
				algbw = float64(c.bytes) / med / 1e9
			}
			check := "ok"
			if first[0] != int64(np) {
				check = fmt.Sprintf("rank %d: %d wrong elements, e.g. index %d", first[0], first[2], first[1])
			}
			b, _ := json.Marshal(result{Type: "result", Coll: names[coll], Algo: algo, Impl: impl, NP: np, Dtype: f.dtype,
				Op: "sum", Bytes: c.bytes, Count: int64(c.count), Iters: iters,
				MinUS: dmax[0] * 1e6, MedianUS: med * 1e6, MeanUS: sum / float64(iters) * 1e6, MaxUS: dmax[iters-1] * 1e6,
				P99US: dmax[p99] * 1e6, SpanUS: median(emax) * 1e6, AlgBW: algbw, BusBW: algbw * fac, Check: check})
			fmt.Printf("%s\n", b)
		}
	}
	return failed
}
