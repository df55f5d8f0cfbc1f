package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/shmcoll/shmcoll/collectives"
	"github.com/shmcoll/shmcoll/internal/benchfmt"
	"github.com/shmcoll/shmcoll/internal/clock"
	"github.com/shmcoll/shmcoll/simd"
)

// timing says how long each case runs. It mirrors internal/mpibench's
// mpicoll.c, so that shmbench run and the MPI side of compare measure the
// same way.
type timing struct {
	iters  int           // fixed timed iterations; 0: run for target
	target time.Duration // timed time per case when iters is 0
	warmup time.Duration // warm-up: doubling batches until one lasts this long
	// warmByCount: warm up with warmIters iterations instead (-w, -x)
	warmByCount bool
	warmIters   int
	maxIters    int  // bound on timed iterations
	minIters    int  // timed iterations at least, when iters is 0 (0: 5)
	full        bool // check every element of every result (-check)
	light       bool // check only the changed elements, not all of the last result (tune)
	arena       bool // buffers from collectives.Alloc (-arena)
	dirty       bool // rewrite the whole input before every iteration (-dirty)
	// timedRewrite: the rewrite inside the timing, after the barrier
	// (-timed-rewrite)
	timedRewrite bool
}

// bench is one rank's side of a sweep.
type bench struct {
	helper *collectives.Comm // the auto communicator: calibration, gathering results
	rank   int
	p      int
	dtype  simd.Type
	op     simd.Op
	cop    collectives.Op
	vals   values
	tm     timing

	// inject, when >= 0, makes rank 0 spoil its result after that timed
	// iteration of every case: a test hook (SHMBENCH_INJECT) proving that
	// a wrong result fails the run.
	inject int

	// per-iteration times of this rank, reused across cases
	t0, t1 []int64
	// spare holds the send and receive buffers of the last case, reused
	// by the next one of the same type: a sweep does not fault in fresh
	// memory for every case.
	spare [2]any
}

func newBench(helper *collectives.Comm, dtype simd.Type, op simd.Op, tm timing) (*bench, error) {
	vals, err := newValues(dtype, op, helper.Size())
	if err != nil {
		return nil, err
	}
	n := tm.maxIters
	if tm.iters > 0 {
		n = tm.iters
	}
	return &bench{
		helper: helper, rank: helper.Rank(), p: helper.Size(),
		dtype: dtype, op: op, cop: collectives.Builtin(op), vals: vals, tm: tm,
		t0: make([]int64, n), t1: make([]int64, n),
		inject: injectAt(),
	}, nil
}

// run measures one case on communicator c. Every rank returns the same
// check verdict; rank 0's result holds the statistics. An error means
// the communicator failed (the sweep cannot go on).
func (b *bench) run(ctx context.Context, c *collectives.Comm, cs caseSpec) (benchfmt.Result, error) {
	switch b.dtype {
	case simd.Int8:
		return runCase[int8](ctx, b, c, cs)
	case simd.Int16:
		return runCase[int16](ctx, b, c, cs)
	case simd.Int32:
		return runCase[int32](ctx, b, c, cs)
	case simd.Int64:
		return runCase[int64](ctx, b, c, cs)
	case simd.Uint8:
		return runCase[uint8](ctx, b, c, cs)
	case simd.Uint16:
		return runCase[uint16](ctx, b, c, cs)
	case simd.Uint32:
		return runCase[uint32](ctx, b, c, cs)
	case simd.Uint64:
		return runCase[uint64](ctx, b, c, cs)
	case simd.Float32:
		return runCase[float32](ctx, b, c, cs)
	case simd.Float64:
		return runCase[float64](ctx, b, c, cs)
	case simd.BFloat16T:
		return runCase[simd.BFloat16](ctx, b, c, cs)
	case simd.Float16T:
		return runCase[simd.Float16](ctx, b, c, cs)
	case simd.Complex64:
		return runCase[complex64](ctx, b, c, cs)
	case simd.Complex128:
		return runCase[complex128](ctx, b, c, cs)
	}
	return benchfmt.Result{}, fmt.Errorf("dtype %v is not supported by shmbench run", b.dtype)
}

// envInject names the test hook of bench.inject.
const envInject = "SHMBENCH_INJECT"

func injectAt() int {
	if v, err := strconv.Atoi(os.Getenv(envInject)); err == nil && v >= 0 {
		return v
	}
	return -1
}

// typedCase is one case with buffers of element type T.
type typedCase[T simd.Element] struct {
	b          *bench
	c          *collectives.Comm
	lay        layout
	send, recv []T
	in         []T // the rank's input: send, or recv for bcast
	conv       func(int64) T
	poison     T
	call       func(context.Context, *typedCase[T]) error

	bad    int // wrong elements seen
	badMsg string

	// got holds the changed result elements that record kept for the
	// current plan, which verify checks before the next plan and between
	// chunks of timed iterations.
	got []T

	prevJ int // the input element the last touch changed (-1: none), and its value before
	prevV T
	pl    iterPlan[T]

	pristine []T // -dirty: the input as prepare wrote it
}

// collCall is the table of collective calls by docs/DESIGN.md name: the one
// place where shmbench calls the library.
func collCall[T simd.Element](coll string) func(context.Context, *typedCase[T]) error {
	switch coll {
	case "allreduce":
		return func(ctx context.Context, k *typedCase[T]) error {
			return collectives.Allreduce(ctx, k.c, k.send, k.recv, k.b.cop)
		}
	case "reduce_scatter_block":
		return func(ctx context.Context, k *typedCase[T]) error {
			return collectives.ReduceScatterBlock(ctx, k.c, k.send, k.recv, k.b.cop)
		}
	case "reduce_scatter":
		return func(ctx context.Context, k *typedCase[T]) error {
			return collectives.ReduceScatter(ctx, k.c, k.send, k.recv, k.lay.count, k.b.cop)
		}
	case "allgather":
		return func(ctx context.Context, k *typedCase[T]) error {
			return collectives.Allgather(ctx, k.c, k.send, k.recv)
		}
	case "allgatherv":
		return func(ctx context.Context, k *typedCase[T]) error {
			return collectives.Allgatherv(ctx, k.c, k.send, k.recv, k.lay.count, k.lay.displ)
		}
	case "bcast":
		return func(ctx context.Context, k *typedCase[T]) error {
			return collectives.Bcast(ctx, k.c, k.recv, k.lay.root)
		}
	case "reduce":
		return func(ctx context.Context, k *typedCase[T]) error {
			return collectives.Reduce(ctx, k.c, k.send, k.recv, k.b.cop, k.lay.root)
		}
	case "barrier":
		return func(ctx context.Context, k *typedCase[T]) error { return collectives.Barrier(ctx, k.c) }
	case "alltoall":
		return func(ctx context.Context, k *typedCase[T]) error {
			return collectives.Alltoall(ctx, k.c, k.send, k.recv)
		}
	case "alltoallv":
		return func(ctx context.Context, k *typedCase[T]) error {
			r := k.b.rank
			return collectives.Alltoallv(ctx, k.c, k.send, k.lay.scount[r], k.lay.sdispl[r], k.recv, k.lay.rcount[r], k.lay.rdispl[r])
		}
	case "scatter":
		return func(ctx context.Context, k *typedCase[T]) error {
			return collectives.Scatter(ctx, k.c, k.send, k.recv, k.lay.root)
		}
	case "gather":
		return func(ctx context.Context, k *typedCase[T]) error {
			return collectives.Gather(ctx, k.c, k.send, k.recv, k.lay.root)
		}
	case "scan":
		return func(ctx context.Context, k *typedCase[T]) error {
			return collectives.Scan(ctx, k.c, k.send, k.recv, k.b.cop)
		}
	case "exscan":
		return func(ctx context.Context, k *typedCase[T]) error {
			return collectives.Exscan(ctx, k.c, k.send, k.recv, k.b.cop)
		}
	}
	return nil
}

// reuse returns n elements of the buffer in spare if it is a []T large
// enough, else a new one that it keeps there.
func reuse[T any](spare *any, n int) []T {
	if n == 0 {
		return nil
	}
	if s, ok := (*spare).([]T); ok && cap(s) >= n {
		return s[:n]
	}
	s := make([]T, n)
	*spare = s
	return s
}

func runCase[T simd.Element](ctx context.Context, b *bench, c *collectives.Comm, cs caseSpec) (benchfmt.Result, error) {
	k := &typedCase[T]{b: b, c: c, lay: cs.lay, conv: converter[T](), call: collCall[T](cs.coll)}
	if k.call == nil {
		return benchfmt.Result{}, fmt.Errorf("collective %q has no entry in shmbench's call table", cs.coll)
	}
	k.poison = k.conv(-7)
	r := b.rank
	if b.tm.arena {
		// A case's own buffers, from the heap of the communicator that
		// runs it.
		var err error
		for i, n := range []int{k.lay.sendLen(r), k.lay.recvLen(r)} {
			var buf []T
			if n > 0 {
				if buf, err = collectives.Alloc[T](c, n); err != nil {
					return benchfmt.Result{}, err
				}
				defer collectives.Free(c, buf)
			}
			if i == 0 {
				k.send = buf
			} else {
				k.recv = buf
			}
		}
	} else {
		k.send, k.recv = reuse[T](&b.spare[0], k.lay.sendLen(r)), reuse[T](&b.spare[1], k.lay.recvLen(r))
	}
	if k.lay.recvLen(r) == 0 && (cs.coll == "reduce_scatter") {
		k.recv = []T{} // a zero-length block still takes part
	}
	k.in = k.send
	if cs.coll == "bcast" && r == cs.lay.root {
		k.in = k.recv
	}

	// Warm-up: doubling batches until one lasts b.tm.warmup on the slowest
	// rank (or one batch of b.tm.warmIters); the last batch sets the timed
	// chunk to about 1/8 of the target.
	k.prepare()
	batch, it := 1, 0
	if b.tm.warmByCount {
		batch = b.tm.warmIters
	}
	for batch > 0 {
		a := clock.Nanotime()
		for done := 0; done < batch; {
			n := k.plan(it, batch-done)
			for range n {
				k.dirty()
				k.touch(it)
				if err := k.iterate(ctx); err != nil {
					return benchfmt.Result{}, err
				}
				it++
			}
			done += n
		}
		el, err := b.maxOver(ctx, clock.Nanotime()-a)
		if err != nil {
			return benchfmt.Result{}, err
		}
		if b.tm.warmByCount || el >= int64(b.tm.warmup) || batch >= 1<<16 {
			per := max(el/int64(batch), 1)
			batch = max(1, int(int64(b.tm.target)/per/8))
			break
		}
		batch *= 2
	}
	batch = max(batch, 1) // no warm-up: chunks of one iteration

	// Timed iterations: barrier, then the collective between two clock
	// reads; checks run after the second read.
	k.prepare()
	maxIters := len(b.t0)
	minIters := b.tm.minIters
	if minIters == 0 {
		minIters = 5
	}
	iters := 0
	var chosen collectives.Algorithm // what the call ran: auto's choice
	start := clock.Nanotime()
	for {
		chunk := batch
		if b.tm.iters > 0 {
			chunk = b.tm.iters
		}
		var err error
		if iters, err = k.timed(ctx, iters, min(chunk, maxIters-iters)); err != nil {
			return benchfmt.Result{}, err
		}
		chosen = c.LastAlgorithm()
		k.verify() // between chunks: no rank is in a timed call
		if b.tm.iters > 0 || iters >= maxIters {
			break
		}
		el, err := b.maxOver(ctx, clock.Nanotime()-start)
		if err != nil {
			return benchfmt.Result{}, err
		}
		if el >= int64(b.tm.target) && iters >= minIters {
			break
		}
	}
	if !b.tm.full && !b.tm.light {
		k.checkAll(iters - 1)
	}
	res, err := b.collect(ctx, cs, iters, k.bad, k.badMsg)
	if cs.algo == "auto" {
		res.Chosen = chosen.String()
	}
	return res, err
}

// timed runs n timed iterations from iteration from and returns the
// iteration after them. It is a function of its own, not a loop inside
// runCase, so that its machine code does not move with unrelated edits to
// runCase (the compiler's layout of a loop depends on the whole function):
// where ranks share a CPU, what an iteration does around the call is part
// of what a small collective measures, and before/after comparisons of
// two builds must not see the harness change.
//
//go:noinline
func (k *typedCase[T]) timed(ctx context.Context, from, n int) (int, error) {
	b, c, iters := k.b, k.c, from
	for n > 0 {
		m := k.plan(iters, n)
		n -= m
		for range m {
			if !b.tm.timedRewrite {
				k.dirty()
				k.touch(iters)
			}
			if err := collectives.Barrier(ctx, c); err != nil {
				return iters, err
			}
			t0 := clock.Nanotime()
			if b.tm.timedRewrite {
				k.dirty()
				k.touch(iters)
			}
			if err := k.call(ctx, k); err != nil {
				return iters, err
			}
			t1 := clock.Nanotime()
			b.t0[iters], b.t1[iters] = t0, t1
			if iters == b.inject && b.rank == 0 {
				for i := range k.recv { // the test hook: a wrong result
					k.recv[i] = k.poison
				}
			}
			if b.tm.full {
				k.checkAll(iters)
			} else {
				k.record(iters)
			}
			iters++
		}
	}
	return iters, nil
}

// iterate is one untimed iteration: barrier, collective.
func (k *typedCase[T]) iterate(ctx context.Context) error {
	if err := collectives.Barrier(ctx, k.c); err != nil {
		return err
	}
	return k.call(ctx, k)
}

// prepare writes the untouched input and poisons the result.
func (k *typedCase[T]) prepare() {
	r := k.b.rank
	k.prevJ = -1
	for j := range k.in {
		k.in[j] = k.conv(k.b.vals.at(r, j, -1, 0))
	}
	if !(k.lay.coll == "bcast" && r == k.lay.root) {
		for i := range k.recv {
			k.recv[i] = k.poison
		}
	}
	if k.b.tm.dirty {
		k.pristine = append(k.pristine[:0], k.in...)
	}
}

// dirty rewrites the whole input (-dirty), before touch changes one
// element: the lines are then modified in this rank's cache, as after a
// program computed them, and a rank that reads them in place (direct)
// cannot find them in its own cache from the last iteration.
func (k *typedCase[T]) dirty() {
	if k.b.tm.dirty {
		copy(k.in, k.pristine)
	}
}

// touchOf is the input element rank q changes in iteration k.
func (k *typedCase[T]) touchOf(q, it int) int {
	if n := k.lay.inputLen(q); n > 0 {
		return it % n
	}
	return -1
}

// plan works out what touch and record do in iterations from to
// from+n-1, for at most maxPlan of them, and returns how many. It runs
// before them: the reference arithmetic (and the layout's switch on the
// collective's name), done between two timed calls, delayed the ranks
// still in theirs wherever ranks share a CPU, and so did every cache line
// it touched (np=8 on 2 CPUs: about 70 lines of code and 30 of data per
// iteration, against none in the MPI benchmark's loop).
func (k *typedCase[T]) plan(from, n int) int {
	k.verify() // what the last plan's iterations recorded
	n = min(n, maxPlan)
	pl := &k.pl
	pl.from = from
	pl.tj, pl.tv, pl.rs, pl.ri = pl.tj[:0], pl.tv[:0], pl.rs[:0], pl.ri[:0]
	r := k.b.rank
	for it := from; it < from+n; it++ {
		j := -1
		var v T
		if len(k.in) > 0 {
			if j = k.touchOf(r, it); j >= 0 {
				v = k.conv(k.b.vals.at(r, j, it, j))
			}
		}
		pl.tj, pl.tv = append(pl.tj, j), append(pl.tv, v)
		pl.rs = append(pl.rs, len(pl.ri))
		pl.ri = k.touched(pl.ri, it)
	}
	pl.rs = append(pl.rs, len(pl.ri))
	return n
}

// maxPlan bounds the iterations of one plan.
const maxPlan = 4096

// iterPlan is what plan works out for iterations from on: the input
// element touch changes in iteration from+i (tj[i], -1 for none) and its
// value (tv[i]), and the result elements record keeps (ri[rs[i]:rs[i+1]]).
type iterPlan[T simd.Element] struct {
	from     int
	tj       []int
	tv       []T
	rs, ri   []int
	recorded int // iterations from from on whose elements record kept
}

// touch makes the input of iteration it (planned): it restores the element
// the previous iteration changed and changes one.
func (k *typedCase[T]) touch(it int) {
	if k.prevJ >= 0 {
		k.in[k.prevJ] = k.prevV // as prepare wrote it
	}
	i := it - k.pl.from
	j := k.pl.tj[i]
	k.prevJ = j
	if j >= 0 {
		k.prevV = k.in[j]
		k.in[j] = k.pl.tv[i]
	}
}

// expected is element i of this rank's result after iteration it.
func (k *typedCase[T]) expected(i, it int) (T, bool) {
	qlo, qhi, j, ok := k.lay.source(k.b.rank, i)
	if !ok {
		var z T
		return z, false
	}
	v := k.b.vals
	acc := v.at(qlo, j, it, k.touchOf(qlo, it))
	for q := qlo + 1; q < qhi; q++ {
		acc = v.combine(acc, v.at(q, j, it, k.touchOf(q, it)))
	}
	return k.conv(acc), true
}

func (k *typedCase[T]) checkElem(i, it int) { k.checkValue(i, it, k.recv[i]) }

// checkValue checks got, element i of the result of iteration it.
func (k *typedCase[T]) checkValue(i, it int, got T) {
	want, ok := k.expected(i, it)
	if !ok || got == want {
		return
	}
	if k.bad == 0 {
		k.badMsg = fmt.Sprintf("rank %d: iteration %d: element %d is %v, want %v", k.b.rank, it, i, got, want)
	}
	k.bad++
}

// touched appends to is the indices in this rank's result of the elements
// that iteration it changed, in the order of the ranks whose change reaches
// them (in a reduction every rank changes the same element: one index).
func (k *typedCase[T]) touched(is []int, it int) []int {
	for q := range k.lay.p {
		j := k.touchOf(q, it)
		if j < 0 {
			continue
		}
		if t, i, ok := k.lay.dest(q, j); ok && (t == -1 || t == k.b.rank) && i < len(k.recv) {
			is = append(is, i)
		}
		if reducing(k.lay.coll) {
			break
		}
	}
	return is
}

// record keeps the result elements that iteration it changed (the plan's,
// in iteration order from the plan's first), for verify. Checking them at
// once takes a reference computation per source rank, and where ranks
// share CPUs that time delays the ranks still inside their timed call,
// which a small collective shows. (The C program that times Open MPI and MPICH,
// internal/mpibench, checks the changed elements after each timed call: a
// few dozen instructions of C.)
func (k *typedCase[T]) record(it int) {
	pl := &k.pl
	i := it - pl.from
	for _, x := range pl.ri[pl.rs[i]:pl.rs[i+1]] {
		k.got = append(k.got, k.recv[x])
	}
	pl.recorded = i + 1
}

// verify checks what record kept under the current plan (plan calls it
// before it makes the next).
func (k *typedCase[T]) verify() {
	pl := &k.pl
	n := 0
	for i := range pl.recorded {
		for _, x := range pl.ri[pl.rs[i]:pl.rs[i+1]] {
			k.checkValue(x, pl.from+i, k.got[n])
			n++
		}
	}
	k.got, pl.recorded = k.got[:0], 0
}

// checkAll checks every element of the result of iteration it.
func (k *typedCase[T]) checkAll(it int) {
	for i := range k.recv {
		k.checkElem(i, it)
	}
}

// maxOver returns the largest x over the ranks.
func (b *bench) maxOver(ctx context.Context, x int64) (int64, error) {
	in, out := []int64{x}, []int64{0}
	if err := collectives.Allreduce(ctx, b.helper, in, out, collectives.Max); err != nil {
		return 0, err
	}
	return out[0], nil
}

// msgBytes bounds a rank's check message as gathered to rank 0.
const msgBytes = 160

// collect brings the per-iteration times and check verdicts of all ranks to
// rank 0 and summarizes them there.
func (b *bench) collect(ctx context.Context, cs caseSpec, iters, bad int, badMsg string) (benchfmt.Result, error) {
	var dmax, smin, emax []int64
	if b.rank == 0 {
		dmax, smin, emax = make([]int64, iters), make([]int64, iters), make([]int64, iters)
	}
	h := b.helper
	dur := make([]int64, iters)
	for i := range dur {
		dur[i] = b.t1[i] - b.t0[i]
	}
	if err := collectives.Reduce(ctx, h, dur, dmax, collectives.Max, 0); err != nil {
		return benchfmt.Result{}, err
	}
	if err := collectives.Reduce(ctx, h, b.t0[:iters], smin, collectives.Min, 0); err != nil {
		return benchfmt.Result{}, err
	}
	if err := collectives.Reduce(ctx, h, b.t1[:iters], emax, collectives.Max, 0); err != nil {
		return benchfmt.Result{}, err
	}
	msg := make([]uint8, msgBytes)
	if bad > 0 {
		copy(msg, fmt.Sprintf("%d wrong; %s", bad, badMsg))
	}
	all := make([]uint8, msgBytes*b.p)
	if err := collectives.Allgather(ctx, h, msg, all); err != nil {
		return benchfmt.Result{}, err
	}
	check := "ok"
	for q := range b.p {
		if m := all[q*msgBytes : (q+1)*msgBytes]; m[0] != 0 {
			check = string(m[:clen(m)])
			break
		}
	}
	res := benchfmt.Result{
		Coll: cs.coll, Algo: cs.algo, NP: b.p, Dtype: b.dtype.String(), Op: b.op.String(),
		Bytes: cs.lay.bytes(b.dtype.Size()), Check: check,
	}
	if cs.coll == "barrier" {
		res.Dtype, res.Op = "none", "none"
	} else if !reducing(cs.coll) {
		res.Op = "none"
	}
	if b.rank == 0 {
		slowest, span := make([]float64, iters), make([]float64, iters)
		for i := range iters {
			slowest[i], span[i] = float64(dmax[i]), float64(emax[i]-smin[i])
		}
		res.Fill(slowest, span)
	}
	return res, nil
}

func clen(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return len(b)
}
