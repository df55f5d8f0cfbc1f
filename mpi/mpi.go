//go:build mpi

package mpi

/*
#include <mpi.h>
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

// A communicator handle as an integer: Open MPI's MPI_Comm is a pointer and
// MPICH's an int; both convert to and from intptr_t without loss.
typedef intptr_t sc_comm;
#define SC_COMM(h) ((MPI_Comm)(h))

// sc_pmpi selects the profiling names: set by Attach, so that a library
// that defines the MPI_ names itself (libshmcoll) does not call into its
// own entry points.
static int sc_pmpi;
#define SC_CALL(f) (sc_pmpi ? P##f : f)
static void sc_set_pmpi(void) { sc_pmpi = 1; }


// These numbers are the Go enums of types.go.
static MPI_Datatype sc_dtype(int t) {
	switch (t) {
	case 1: return MPI_BYTE;
	case 2: return MPI_INT8_T;
	case 3: return MPI_INT16_T;
	case 4: return MPI_INT32_T;
	case 5: return MPI_INT64_T;
	case 6: return MPI_UINT8_T;
	case 7: return MPI_UINT16_T;
	case 8: return MPI_UINT32_T;
	case 9: return MPI_UINT64_T;
	case 10: return MPI_FLOAT;
	case 11: return MPI_DOUBLE;
	case 12: return MPI_C_FLOAT_COMPLEX;
	case 13: return MPI_C_DOUBLE_COMPLEX;
	}
	return MPI_DATATYPE_NULL;
}

static MPI_Op sc_op(int o) {
	switch (o) {
	case 1: return MPI_SUM;
	case 2: return MPI_PROD;
	case 3: return MPI_MIN;
	case 4: return MPI_MAX;
	case 5: return MPI_BAND;
	case 6: return MPI_BOR;
	case 7: return MPI_BXOR;
	}
	return MPI_OP_NULL;
}

static int sc_level_to_mpi(int l) {
	switch (l) {
	case 0: return MPI_THREAD_SINGLE;
	case 1: return MPI_THREAD_FUNNELED;
	case 2: return MPI_THREAD_SERIALIZED;
	}
	return MPI_THREAD_MULTIPLE;
}

static int sc_level_from_mpi(int l) {
	if (l == MPI_THREAD_MULTIPLE) return 3;
	if (l == MPI_THREAD_SERIALIZED) return 2;
	if (l == MPI_THREAD_FUNNELED) return 1;
	return 0;
}

static sc_comm sc_comm_world(void) { return (sc_comm)MPI_COMM_WORLD; }
static sc_comm sc_comm_null(void) { return (sc_comm)MPI_COMM_NULL; }
static int sc_max_error_string(void) { return MPI_MAX_ERROR_STRING; }

static int sc_initialized(void) {
	int a = 0, b = 0;
	SC_CALL(MPI_Initialized)(&a);
	SC_CALL(MPI_Finalized)(&b);
	return a || b;
}

static int sc_query_thread(int *provided) {
	int p = MPI_THREAD_SINGLE;
	int rc = SC_CALL(MPI_Query_thread)(&p);
	*provided = sc_level_from_mpi(p);
	return rc;
}

// sc_own_errors makes a communicator this package created return errors
// rather than abort (in attach mode the host's communicators keep theirs).
static int sc_own_errors(sc_comm c) {
	return SC_CALL(MPI_Comm_set_errhandler)(SC_COMM(c), MPI_ERRORS_RETURN);
}

static int sc_init(int required, int *provided) {
	int p = MPI_THREAD_SINGLE;
	int rc = MPI_Init_thread(NULL, NULL, sc_level_to_mpi(required), &p);
	*provided = sc_level_from_mpi(p);
	if (rc != MPI_SUCCESS) return rc;
	rc = SC_CALL(MPI_Comm_set_errhandler)(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	if (rc != MPI_SUCCESS) return rc;
	return SC_CALL(MPI_Comm_set_errhandler)(MPI_COMM_SELF, MPI_ERRORS_RETURN);
}

static int sc_finalize(void) { return MPI_Finalize(); }

static void sc_error(int code, char *buf, int *len, int *cls) {
	*cls = -1;
	*len = 0;
	SC_CALL(MPI_Error_class)(code, cls);
	if (SC_CALL(MPI_Error_string)(code, buf, len) != MPI_SUCCESS) *len = 0;
}

static int sc_type_size(int t, int *size) { return SC_CALL(MPI_Type_size)(sc_dtype(t), size); }

static int sc_comm_rank_size(sc_comm c, int *rank, int *size) {
	int rc = SC_CALL(MPI_Comm_rank)(SC_COMM(c), rank);
	if (rc != MPI_SUCCESS) return rc;
	return SC_CALL(MPI_Comm_size)(SC_COMM(c), size);
}

static int sc_comm_split(sc_comm c, int color, int key, sc_comm *out) {
	MPI_Comm n = MPI_COMM_NULL;
	int rc = SC_CALL(MPI_Comm_split)(SC_COMM(c), color < 0 ? MPI_UNDEFINED : color, key, &n);
	*out = (sc_comm)n;
	return rc;
}

static int sc_comm_split_shared(sc_comm c, int key, sc_comm *out) {
	MPI_Comm n = MPI_COMM_NULL;
	int rc = SC_CALL(MPI_Comm_split_type)(SC_COMM(c), MPI_COMM_TYPE_SHARED, key, MPI_INFO_NULL, &n);
	*out = (sc_comm)n;
	return rc;
}

static int sc_comm_dup(sc_comm c, sc_comm *out) {
	MPI_Comm n = MPI_COMM_NULL;
	int rc = SC_CALL(MPI_Comm_dup)(SC_COMM(c), &n);
	*out = (sc_comm)n;
	return rc;
}

static int sc_comm_free(sc_comm c) {
	MPI_Comm n = SC_COMM(c);
	return SC_CALL(MPI_Comm_free)(&n);
}

static int sc_abort(sc_comm c, int code) { return SC_CALL(MPI_Abort)(SC_COMM(c), code); }

static int sc_barrier(sc_comm c) { return SC_CALL(MPI_Barrier)(SC_COMM(c)); }

static int sc_bcast(void *buf, int n, int t, int root, sc_comm c) {
	return SC_CALL(MPI_Bcast)(buf, n, sc_dtype(t), root, SC_COMM(c));
}

// A NULL send buffer means MPI_IN_PLACE.
static int sc_allreduce(void *s, void *r, int n, int t, int op, sc_comm c) {
	return SC_CALL(MPI_Allreduce)(s ? s : MPI_IN_PLACE, r, n, sc_dtype(t), sc_op(op), SC_COMM(c));
}

static int sc_reduce(void *s, void *r, int n, int t, int op, int root, sc_comm c) {
#if defined(MPICH_NUMVERSION) && MPICH_NUMVERSION < 40200000
	// MPICH before 4.1.2 reads MPI_IN_PLACE as an address at a non-zero root
	// and crashes (pmodels/mpich#6540): give it a copy of the input instead.
	if (!s && root != 0) {
		int size = 0, rc = SC_CALL(MPI_Type_size)(sc_dtype(t), &size);
		if (rc != MPI_SUCCESS) return rc;
		size_t bytes = (size_t)n * (size_t)size;
		void *tmp = malloc(bytes ? bytes : 1);
		if (!tmp) return MPI_ERR_NO_MEM;
		memcpy(tmp, r, bytes);
		rc = SC_CALL(MPI_Reduce)(tmp, r, n, sc_dtype(t), sc_op(op), root, SC_COMM(c));
		free(tmp);
		return rc;
	}
#endif
	return SC_CALL(MPI_Reduce)(s ? s : MPI_IN_PLACE, r, n, sc_dtype(t), sc_op(op), root, SC_COMM(c));
}

static int sc_reduce_scatter_block(void *s, void *r, int n, int t, int op, sc_comm c) {
	return SC_CALL(MPI_Reduce_scatter_block)(s ? s : MPI_IN_PLACE, r, n, sc_dtype(t), sc_op(op), SC_COMM(c));
}

static int sc_reduce_scatter(void *s, void *r, int *counts, int t, int op, sc_comm c) {
	return SC_CALL(MPI_Reduce_scatter)(s ? s : MPI_IN_PLACE, r, counts, sc_dtype(t), sc_op(op), SC_COMM(c));
}

static int sc_allgather(void *s, void *r, int n, int t, sc_comm c) {
	if (!s) return SC_CALL(MPI_Allgather)(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, n, sc_dtype(t), SC_COMM(c));
	return SC_CALL(MPI_Allgather)(s, n, sc_dtype(t), r, n, sc_dtype(t), SC_COMM(c));
}

static int sc_allgatherv(void *s, int n, void *r, int *counts, int *displs, int t, sc_comm c) {
	if (!s) return SC_CALL(MPI_Allgatherv)(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, counts, displs, sc_dtype(t), SC_COMM(c));
	return SC_CALL(MPI_Allgatherv)(s, n, sc_dtype(t), r, counts, displs, sc_dtype(t), SC_COMM(c));
}

static int sc_send(void *buf, int n, int t, int dest, int tag, sc_comm c) {
	return SC_CALL(MPI_Send)(buf, n, sc_dtype(t), dest, tag, SC_COMM(c));
}

static int sc_recv(void *buf, int n, int t, int src, int tag, sc_comm c, int *got) {
	MPI_Status st;
	int rc = SC_CALL(MPI_Recv)(buf, n, sc_dtype(t), src, tag, SC_COMM(c), &st);
	if (rc != MPI_SUCCESS) return rc;
	return SC_CALL(MPI_Get_count)(&st, sc_dtype(t), got);
}
*/
import "C"

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Options configure [Init].
type Options struct {
	// Funnel forces every MPI call through the initializing thread even when
	// the library grants MPI_THREAD_MULTIPLE (only MPI_THREAD_FUNNELED is then
	// requested). SHMCOLL_MPI_FUNNEL=1 in the environment does the same.
	Funnel bool
}

const (
	stateNone int32 = iota
	stateRunning
	stateFinalized
)

// request is one MPI call handed to the initializing thread.
type request struct {
	fn   func() C.int
	done chan C.int
	last bool // the loop ends after this call (MPI_Finalize)
}

var reqPool = sync.Pool{New: func() any { return &request{done: make(chan C.int, 1)} }}

// rt is the process-wide MPI state. Fields other than state are written
// before state becomes stateRunning and only read afterwards.
var rt struct {
	initMu   sync.Mutex
	state    atomic.Int32
	direct   bool // calls go straight to MPI from any thread
	provided ThreadLevel
	reqs     chan *request
	world    Comm
	tid      int  // OS thread that initialized MPI
	attached bool // Attach: the host initialized MPI; PMPI names, no funnel
}

// Init initializes MPI (see the package documentation for the thread model).
// It must be called once per process, before any other function of this
// package except [Find] and friends.
func Init(opt Options) error {
	rt.initMu.Lock()
	defer rt.initMu.Unlock()
	if rt.state.Load() != stateNone || C.sc_initialized() != 0 {
		return ErrInitialized
	}
	funnel := opt.Funnel || os.Getenv("SHMCOLL_MPI_FUNNEL") == "1"
	required := ThreadMultiple
	if funnel {
		required = ThreadFunneled
	}
	type result struct {
		rc       C.int
		provided C.int
		tid      int
	}
	started := make(chan result)
	rt.reqs = make(chan *request)
	go func() {
		// MPI's notion of the main thread is this OS thread from now on; the
		// goroutine never unlocks it, so after MPI_Finalize the thread exits
		// with the goroutine instead of returning to the scheduler.
		runtime.LockOSThread()
		var res result
		res.tid = unix.Gettid()
		res.rc = C.sc_init(C.int(required), &res.provided)
		started <- res
		if res.rc != C.MPI_SUCCESS {
			return
		}
		for r := range rt.reqs {
			r.done <- r.fn()
			if r.last {
				return
			}
		}
	}()
	res := <-started
	if err := check("MPI_Init_thread", res.rc); err != nil {
		return err
	}
	rt.provided = ThreadLevel(res.provided)
	rt.direct = !funnel && rt.provided == ThreadMultiple
	rt.tid = res.tid
	rt.state.Store(stateRunning)
	w, err := newComm(C.sc_comm_world())
	if err != nil {
		return err
	}
	rt.world = w
	return nil
}

// Attach uses an MPI that the host program has initialized (MPI_Init is
// not called), for a library loaded into an MPI program such as
// libshmcoll. Every MPI call of the package then goes to the profiling
// names (PMPI_*), so that a library that defines the MPI_ names itself
// does not call into its own entry points; every call is made on the
// calling thread (no funnel: the host's thread level binds the caller, as
// it binds the host); and the host's communicators keep their error
// handlers: only the communicators this package creates (Split, Dup,
// SplitTypeShared) are set to return errors. [Detach] ends the use
// without finalizing MPI.
func Attach() error {
	rt.initMu.Lock()
	defer rt.initMu.Unlock()
	if rt.state.Load() != stateNone {
		return ErrInitialized
	}
	C.sc_set_pmpi()
	if C.sc_initialized() == 0 {
		return fmt.Errorf("%w: Attach before the host's MPI_Init", ErrNotInitialized)
	}
	var p C.int
	if err := check("MPI_Query_thread", C.sc_query_thread(&p)); err != nil {
		return err
	}
	rt.provided = ThreadLevel(p)
	rt.direct = true
	rt.tid = unix.Gettid()
	rt.state.Store(stateRunning)
	w, err := newComm(C.sc_comm_world())
	if err != nil {
		rt.state.Store(stateNone)
		return err
	}
	rt.world = w
	rt.attached = true
	return nil
}

// Detach ends a use begun by [Attach]; the host finalizes MPI. No call of
// this package may be in flight or follow it.
func Detach() error {
	rt.initMu.Lock()
	defer rt.initMu.Unlock()
	if !rt.attached || !rt.state.CompareAndSwap(stateRunning, stateFinalized) {
		return ErrNotInitialized
	}
	rt.attached = false
	return nil
}

// Attached reports whether [Attach] succeeded (and [Detach] has not
// ended the use).
func Attached() bool { return rt.attached }

// FromHandle wraps a communicator handle of the host program (an MPI_Comm
// converted to uintptr: Open MPI's pointer or MPICH's int), for a library
// that receives the host's communicators. The Comm does not own the
// handle: Free it only if the host asks for that.
func FromHandle(h uintptr) (Comm, error) {
	if rt.state.Load() != stateRunning {
		return Comm{}, ErrNotInitialized
	}
	return newComm(C.sc_comm(h))
}

// Handle is c's MPI_Comm converted to uintptr (see [FromHandle]).
func (c Comm) Handle() uintptr { return uintptr(c.h) }

// own sets a communicator this package created to return errors, in
// attach mode (Init already set the world's, which new ones inherit).
func own(c Comm) (Comm, error) {
	if !rt.attached || c.size == 0 {
		return c, nil
	}
	if err := check("MPI_Comm_set_errhandler", C.sc_own_errors(c.h)); err != nil {
		return Comm{}, err
	}
	return c, nil
}

// Finalize shuts MPI down on the initializing thread. No MPI call may be in
// flight or follow it. After [Attach], use [Detach].
func Finalize() error {
	rt.initMu.Lock()
	defer rt.initMu.Unlock()
	if rt.attached {
		return fmt.Errorf("%w: Finalize after Attach (the host finalizes MPI; use Detach)", ErrArgument)
	}
	if !rt.state.CompareAndSwap(stateRunning, stateFinalized) {
		return ErrNotInitialized
	}
	r := &request{fn: func() C.int { return C.sc_finalize() }, done: make(chan C.int, 1), last: true}
	rt.reqs <- r
	return check("MPI_Finalize", <-r.done)
}

// Provided is the thread support level the MPI library granted.
func Provided() ThreadLevel { return rt.provided }

// Funneled reports whether MPI calls are funnelled through the initializing
// thread (MPI_THREAD_MULTIPLE was not granted, or funnelling was forced).
func Funneled() bool { return !rt.direct }

// Linked names the MPI implementation this binary was built against.
func Linked() Impl { return linked }

// World is MPI_COMM_WORLD (the zero Comm before Init).
func World() Comm { return rt.world }

// funnel runs fn on the initializing thread and returns its result.
func funnel(fn func() C.int) C.int {
	r := reqPool.Get().(*request)
	r.fn = fn
	rt.reqs <- r
	rc := <-r.done
	r.fn = nil
	reqPool.Put(r)
	return rc
}

// onMPIThread runs fn where MPI calls run: on the caller's thread in direct
// mode, on the initializing thread when funnelled. Tests use it to see which
// thread MPI calls land on.
func onMPIThread(fn func()) {
	if rt.direct {
		fn()
		return
	}
	funnel(func() C.int { fn(); return 0 })
}

func check(call string, rc C.int) error {
	if rc == C.MPI_SUCCESS {
		return nil
	}
	buf := make([]byte, int(C.sc_max_error_string())+1)
	var n, cls C.int
	C.sc_error(rc, (*C.char)(unsafe.Pointer(&buf[0])), &n, &cls)
	msg := string(buf[:max(0, min(int(n), len(buf)))])
	if msg == "" {
		msg = fmt.Sprintf("error code %d", int(rc))
	}
	return &Error{Call: call, Code: int(rc), Class: int(cls), Message: msg}
}

// typeSize is MPI_Type_size of d's MPI datatype (tests use it to check the
// C-side mapping of the Datatype enum).
func typeSize(d Datatype) (int, error) {
	if rt.state.Load() != stateRunning {
		return 0, ErrNotInitialized
	}
	var sz C.int
	var rc C.int
	if rt.direct {
		rc = C.sc_type_size(C.int(d), &sz)
	} else {
		p := &sz
		rc = funnel(func() C.int { return C.sc_type_size(C.int(d), p) })
	}
	return int(sz), check("MPI_Type_size", rc)
}

// Comm is an MPI communicator. The zero value is MPI_COMM_NULL; a Comm is a
// small value, copy it freely. Rank and Size are cached.
type Comm struct {
	h          C.sc_comm
	rank, size int
}

func newComm(h C.sc_comm) (Comm, error) {
	if h == C.sc_comm_null() {
		return Comm{}, nil
	}
	var r, s C.int
	var rc C.int
	if rt.direct {
		rc = C.sc_comm_rank_size(h, &r, &s)
	} else {
		pr, ps := &r, &s
		rc = funnel(func() C.int { return C.sc_comm_rank_size(h, pr, ps) })
	}
	if err := check("MPI_Comm_rank", rc); err != nil {
		return Comm{}, err
	}
	return Comm{h: h, rank: int(r), size: int(s)}, nil
}

// IsNull reports whether c is MPI_COMM_NULL (for example the result of a
// Split with a negative color).
func (c Comm) IsNull() bool { return c.size == 0 }

// Rank is the calling process's rank in c (0 for a null communicator).
func (c Comm) Rank() int { return c.rank }

// Size is the number of processes in c (0 for a null communicator).
func (c Comm) Size() int { return c.size }

// ready checks that MPI is running and c is not null.
func (c Comm) ready(call string) error {
	if rt.state.Load() != stateRunning {
		return fmt.Errorf("%s: %w", call, ErrNotInitialized)
	}
	if c.size == 0 {
		return fmt.Errorf("%w: %s on a null communicator", ErrArgument, call)
	}
	return nil
}

func (c Comm) checkRank(call, what string, r int) error {
	if r < 0 || r >= c.size {
		return fmt.Errorf("%w: %s: %s %d out of range [0, %d)", ErrArgument, call, what, r, c.size)
	}
	return nil
}

// Split is MPI_Comm_split: processes with the same color form a new
// communicator, ordered by key then by rank in c. A negative color
// (MPI_UNDEFINED) yields the null communicator. Collective over c.
func (c Comm) Split(color, key int) (Comm, error) {
	const call = "MPI_Comm_split"
	if err := c.ready(call); err != nil {
		return Comm{}, err
	}
	if color > math.MaxInt32 || key > math.MaxInt32 || key < math.MinInt32 {
		return Comm{}, fmt.Errorf("%w: %s: color %d or key %d does not fit an int", ErrArgument, call, color, key)
	}
	out := new(C.sc_comm)
	var rc C.int
	if rt.direct {
		rc = C.sc_comm_split(c.h, C.int(max(color, -1)), C.int(key), out)
	} else {
		rc = funnel(func() C.int { return C.sc_comm_split(c.h, C.int(max(color, -1)), C.int(key), out) })
	}
	if err := check(call, rc); err != nil {
		return Comm{}, err
	}
	n, err := newComm(*out)
	if err != nil {
		return Comm{}, err
	}
	return own(n)
}

// SplitTypeShared is MPI_Comm_split_type(MPI_COMM_TYPE_SHARED): the processes
// of c that can share memory (those on this node), ordered by key then by rank
// in c. Collective over c.
func (c Comm) SplitTypeShared(key int) (Comm, error) {
	const call = "MPI_Comm_split_type"
	if err := c.ready(call); err != nil {
		return Comm{}, err
	}
	if key > math.MaxInt32 || key < math.MinInt32 {
		return Comm{}, fmt.Errorf("%w: %s: key %d does not fit an int", ErrArgument, call, key)
	}
	out := new(C.sc_comm)
	var rc C.int
	if rt.direct {
		rc = C.sc_comm_split_shared(c.h, C.int(key), out)
	} else {
		rc = funnel(func() C.int { return C.sc_comm_split_shared(c.h, C.int(key), out) })
	}
	if err := check(call, rc); err != nil {
		return Comm{}, err
	}
	n, err := newComm(*out)
	if err != nil {
		return Comm{}, err
	}
	return own(n)
}

// Dup is MPI_Comm_dup: a communicator with the same group and a separate
// context, so its traffic never matches c's. Collective over c.
func (c Comm) Dup() (Comm, error) {
	const call = "MPI_Comm_dup"
	if err := c.ready(call); err != nil {
		return Comm{}, err
	}
	out := new(C.sc_comm)
	var rc C.int
	if rt.direct {
		rc = C.sc_comm_dup(c.h, out)
	} else {
		rc = funnel(func() C.int { return C.sc_comm_dup(c.h, out) })
	}
	if err := check(call, rc); err != nil {
		return Comm{}, err
	}
	n, err := newComm(*out)
	if err != nil {
		return Comm{}, err
	}
	return own(n)
}

// Free is MPI_Comm_free. Freeing the null communicator does nothing; World
// must not be freed. Collective over c.
func (c Comm) Free() error {
	const call = "MPI_Comm_free"
	if c.size == 0 {
		return nil
	}
	if err := c.ready(call); err != nil {
		return err
	}
	if c.h == C.sc_comm_world() {
		return fmt.Errorf("%w: %s of the world communicator", ErrArgument, call)
	}
	if rt.direct {
		return check(call, C.sc_comm_free(c.h))
	}
	return check(call, funnel(func() C.int { return C.sc_comm_free(c.h) }))
}

// Abort is MPI_Abort: it ends every process of c's job with code. It is
// called from the caller's thread even when funnelled (the initializing
// thread may be blocked in a collective) and does not return.
func (c Comm) Abort(code int) {
	h := c.h
	if c.size == 0 {
		h = C.sc_comm_world()
	}
	C.sc_abort(h, C.int(code))
	os.Exit(code) // MPI_Abort does not return; this is for a library that does
}

// Barrier is MPI_Barrier.
func (c Comm) Barrier() error {
	const call = "MPI_Barrier"
	if err := c.ready(call); err != nil {
		return err
	}
	if rt.direct {
		return check(call, C.sc_barrier(c.h))
	}
	return check(call, funnel(func() C.int { return C.sc_barrier(c.h) }))
}

// Collectives. Each is a method taking raw bytes and an explicit Datatype
// (for callers whose element types are not Go's, such as shmcoll's
// simd.Element) and a generic function on typed slices. Lengths are in
// bytes for the methods, multiples of the datatype's size.

// elems is the element count of b for dt, as MPI's int.
func elems(call, what string, b []byte, dt Datatype) (C.int, error) {
	if !dt.Valid() {
		return 0, fmt.Errorf("%w: %s: invalid datatype %v", ErrArgument, call, dt)
	}
	if len(b)%dt.Size() != 0 {
		return 0, fmt.Errorf("%w: %s: %s of %d bytes is not a whole number of %v", ErrArgument, call, what, len(b), dt)
	}
	return count(call, what, len(b)/dt.Size())
}

// count converts a length to MPI's int count.
func count(call, what string, n int) (C.int, error) {
	if n < 0 || n > math.MaxInt32 {
		return 0, fmt.Errorf("%w: %s: %s of %d elements does not fit MPI's int count", ErrArgument, call, what, n)
	}
	return C.int(n), nil
}

func checkOp(call string, op Op, t Datatype) error {
	if !op.Applies(t) {
		return fmt.Errorf("%w: %s: operator %v does not apply to %v", ErrArgument, call, op, t)
	}
	return nil
}

func ptr(b []byte) unsafe.Pointer {
	if b == nil {
		return nil
	}
	return unsafe.Pointer(unsafe.SliceData(b))
}

func asBytes[T Elem](s []T) []byte {
	if s == nil {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z)))
}

// sendPtr returns the send buffer for C: nil (MPI_IN_PLACE) when send is nil
// or starts where recv starts. Any other overlap is an error, as MPI forbids
// aliasing.
func sendPtr(call string, send, recv []byte) (unsafe.Pointer, error) {
	if len(send) == 0 || len(recv) == 0 {
		return ptr(send), nil
	}
	s0 := uintptr(unsafe.Pointer(unsafe.SliceData(send)))
	r0 := uintptr(unsafe.Pointer(unsafe.SliceData(recv)))
	if s0 == r0 {
		return nil, nil
	}
	if s0 < r0+uintptr(len(recv)) && r0 < s0+uintptr(len(send)) {
		return nil, fmt.Errorf("%w: %s: send and recv overlap (pass a nil send for in place)", ErrArgument, call)
	}
	return ptr(send), nil
}

// separateSendPtr is sendPtr for the calls whose send and recv differ in
// size, where MPI has no send == recv form: in place is a nil send only.
func separateSendPtr(call string, send, recv []byte) (unsafe.Pointer, error) {
	s, err := sendPtr(call, send, recv)
	if err == nil && s == nil && send != nil {
		err = fmt.Errorf("%w: %s: send == recv; pass a nil send for in place", ErrArgument, call)
	}
	return s, err
}

// Bcast is MPI_Bcast of buf from root.
func (c Comm) Bcast(buf []byte, dt Datatype, root int) error {
	const call = "MPI_Bcast"
	if err := c.ready(call); err != nil {
		return err
	}
	if err := c.checkRank(call, "root", root); err != nil {
		return err
	}
	n, err := elems(call, "buf", buf, dt)
	if err != nil {
		return err
	}
	t, b := C.int(dt), ptr(buf)
	if rt.direct {
		return check(call, C.sc_bcast(b, n, t, C.int(root), c.h))
	}
	return check(call, funnel(func() C.int { return C.sc_bcast(b, n, t, C.int(root), c.h) }))
}

// Allreduce is MPI_Allreduce: recv = op over all ranks' send. A nil send (or
// send == recv) reduces in place, with the input in recv.
func (c Comm) Allreduce(send, recv []byte, dt Datatype, op Op) error {
	const call = "MPI_Allreduce"
	if err := c.ready(call); err != nil {
		return err
	}
	if err := checkOp(call, op, dt); err != nil {
		return err
	}
	if send != nil && len(send) != len(recv) {
		return fmt.Errorf("%w: %s: len(send) %d != len(recv) %d", ErrArgument, call, len(send), len(recv))
	}
	n, err := elems(call, "recv", recv, dt)
	if err != nil {
		return err
	}
	s, err := sendPtr(call, send, recv)
	if err != nil {
		return err
	}
	r, t, o := ptr(recv), C.int(dt), C.int(op)
	if rt.direct {
		return check(call, C.sc_allreduce(s, r, n, t, o, c.h))
	}
	return check(call, funnel(func() C.int { return C.sc_allreduce(s, r, n, t, o, c.h) }))
}

// Reduce is MPI_Reduce: recv on root = op over all ranks' send; recv is
// ignored elsewhere (may be nil). At the root a nil send (or send == recv)
// reduces in place.
func (c Comm) Reduce(send, recv []byte, dt Datatype, op Op, root int) error {
	const call = "MPI_Reduce"
	if err := c.ready(call); err != nil {
		return err
	}
	if err := c.checkRank(call, "root", root); err != nil {
		return err
	}
	if err := checkOp(call, op, dt); err != nil {
		return err
	}
	var s, r unsafe.Pointer
	var n C.int
	var err error
	if c.rank == root {
		if send != nil && len(send) != len(recv) {
			return fmt.Errorf("%w: %s: len(send) %d != len(recv) %d at the root", ErrArgument, call, len(send), len(recv))
		}
		if s, err = sendPtr(call, send, recv); err != nil {
			return err
		}
		r = ptr(recv)
		n, err = elems(call, "recv", recv, dt)
	} else {
		if send == nil {
			return fmt.Errorf("%w: %s: nil send on rank %d, not the root", ErrArgument, call, c.rank)
		}
		s = ptr(send)
		n, err = elems(call, "send", send, dt)
	}
	if err != nil {
		return err
	}
	t, o := C.int(dt), C.int(op)
	if rt.direct {
		return check(call, C.sc_reduce(s, r, n, t, o, C.int(root), c.h))
	}
	return check(call, funnel(func() C.int { return C.sc_reduce(s, r, n, t, o, C.int(root), c.h) }))
}

// ReduceScatterBlock is MPI_Reduce_scatter_block: rank i receives block i
// (len(recv) bytes) of op over all ranks' send (Size() blocks). With a nil
// send the input is recv itself (Size() blocks) and the result lands in its
// first block.
func (c Comm) ReduceScatterBlock(send, recv []byte, dt Datatype, op Op) error {
	const call = "MPI_Reduce_scatter_block"
	if err := c.ready(call); err != nil {
		return err
	}
	if err := checkOp(call, op, dt); err != nil {
		return err
	}
	block := recv
	if send == nil {
		if len(recv)%c.size != 0 {
			return fmt.Errorf("%w: %s in place: len(recv) %d is not a multiple of size %d", ErrArgument, call, len(recv), c.size)
		}
		block = recv[:len(recv)/c.size]
	} else if len(send) != c.size*len(recv) {
		return fmt.Errorf("%w: %s: len(send) %d != size %d * len(recv) %d", ErrArgument, call, len(send), c.size, len(recv))
	}
	n, err := elems(call, "block", block, dt)
	if err != nil {
		return err
	}
	s, err := separateSendPtr(call, send, recv)
	if err != nil {
		return err
	}
	r, t, o := ptr(recv), C.int(dt), C.int(op)
	if rt.direct {
		return check(call, C.sc_reduce_scatter_block(s, r, n, t, o, c.h))
	}
	return check(call, funnel(func() C.int { return C.sc_reduce_scatter_block(s, r, n, t, o, c.h) }))
}

// ReduceScatter is MPI_Reduce_scatter: rank i receives the counts[i]
// elements of op over all ranks' send that follow the blocks of ranks 0..i-1
// (send holds the sum of counts elements; recv at least counts[Rank()]).
// With a nil send the input is recv itself and the result lands at its start.
func (c Comm) ReduceScatter(send, recv []byte, dt Datatype, op Op, counts []int) error {
	const call = "MPI_Reduce_scatter"
	if err := c.ready(call); err != nil {
		return err
	}
	if err := checkOp(call, op, dt); err != nil {
		return err
	}
	if len(counts) != c.size {
		return fmt.Errorf("%w: %s: len(counts) %d != size %d", ErrArgument, call, len(counts), c.size)
	}
	cc := make([]C.int, c.size)
	total := 0
	for i, k := range counts {
		if k < 0 || k > math.MaxInt32 {
			return fmt.Errorf("%w: %s: counts[%d] = %d", ErrArgument, call, i, k)
		}
		cc[i] = C.int(k)
		total += k
	}
	if _, err := elems(call, "recv", recv, dt); err != nil {
		return err
	}
	in := send
	if in == nil {
		in = recv
	}
	if n, err := elems(call, "input", in, dt); err != nil {
		return err
	} else if int(n) != total {
		return fmt.Errorf("%w: %s: input of %d elements, counts sum to %d", ErrArgument, call, n, total)
	}
	if send != nil && len(recv) < counts[c.rank]*dt.Size() {
		return fmt.Errorf("%w: %s: recv of %d bytes, counts[%d] is %d elements", ErrArgument, call, len(recv), c.rank, counts[c.rank])
	}
	s, err := separateSendPtr(call, send, recv)
	if err != nil {
		return err
	}
	r, t, o, pc := ptr(recv), C.int(dt), C.int(op), &cc[0]
	if rt.direct {
		return check(call, C.sc_reduce_scatter(s, r, pc, t, o, c.h))
	}
	return check(call, funnel(func() C.int { return C.sc_reduce_scatter(s, r, pc, t, o, c.h) }))
}

// Allgather is MPI_Allgather: recv = every rank's send, in rank order
// (len(recv) == Size()*len(send)). With a nil send each rank's contribution
// is already in its own block of recv.
func (c Comm) Allgather(send, recv []byte, dt Datatype) error {
	const call = "MPI_Allgather"
	if err := c.ready(call); err != nil {
		return err
	}
	block := send
	if send == nil {
		if len(recv)%c.size != 0 {
			return fmt.Errorf("%w: %s in place: len(recv) %d is not a multiple of size %d", ErrArgument, call, len(recv), c.size)
		}
		block = recv[:len(recv)/c.size]
	} else if len(recv) != c.size*len(send) {
		return fmt.Errorf("%w: %s: len(recv) %d != size %d * len(send) %d", ErrArgument, call, len(recv), c.size, len(send))
	}
	n, err := elems(call, "block", block, dt)
	if err != nil {
		return err
	}
	s, err := separateSendPtr(call, send, recv)
	if err != nil {
		return err
	}
	r, t := ptr(recv), C.int(dt)
	if rt.direct {
		return check(call, C.sc_allgather(s, r, n, t, c.h))
	}
	return check(call, funnel(func() C.int { return C.sc_allgather(s, r, n, t, c.h) }))
}

// Allgatherv is MPI_Allgatherv: rank i's counts[i] elements land at element
// displs[i] of recv. A nil displs packs the blocks in rank order. With a nil
// send each rank's contribution is already in place in recv.
func (c Comm) Allgatherv(send, recv []byte, dt Datatype, counts, displs []int) error {
	const call = "MPI_Allgatherv"
	if err := c.ready(call); err != nil {
		return err
	}
	total, err := elems(call, "recv", recv, dt)
	if err != nil {
		return err
	}
	if len(counts) != c.size || (displs != nil && len(displs) != c.size) {
		return fmt.Errorf("%w: %s: len(counts) %d and len(displs) %d must equal size %d", ErrArgument, call, len(counts), len(displs), c.size)
	}
	cc := make([]C.int, 2*c.size)
	cd := cc[c.size:]
	off := 0
	for i, k := range counts {
		d := off
		if displs != nil {
			d = displs[i]
		}
		if k < 0 || d < 0 || d > int(total) || k > int(total)-d {
			return fmt.Errorf("%w: %s: block %d (count %d at %d) outside recv of %d", ErrArgument, call, i, k, d, total)
		}
		cc[i], cd[i] = C.int(k), C.int(d)
		off = d + k
	}
	var n C.int
	if send != nil {
		if n, err = elems(call, "send", send, dt); err != nil {
			return err
		}
		if int(n) != counts[c.rank] {
			return fmt.Errorf("%w: %s: send has %d elements, counts[%d] is %d", ErrArgument, call, n, c.rank, counts[c.rank])
		}
	}
	s, err := separateSendPtr(call, send, recv)
	if err != nil {
		return err
	}
	r, t := ptr(recv), C.int(dt)
	pc, pd := &cc[0], &cd[0]
	if rt.direct {
		return check(call, C.sc_allgatherv(s, n, r, pc, pd, t, c.h))
	}
	return check(call, funnel(func() C.int { return C.sc_allgatherv(s, n, r, pc, pd, t, c.h) }))
}

// Send is MPI_Send of buf to rank dest with tag (>= 0).
func (c Comm) Send(buf []byte, dt Datatype, dest, tag int) error {
	const call = "MPI_Send"
	if err := c.ready(call); err != nil {
		return err
	}
	if err := c.checkRank(call, "dest", dest); err != nil {
		return err
	}
	if tag < 0 || tag > math.MaxInt32 {
		return fmt.Errorf("%w: %s: tag %d", ErrArgument, call, tag)
	}
	n, err := elems(call, "buf", buf, dt)
	if err != nil {
		return err
	}
	b, t := ptr(buf), C.int(dt)
	if rt.direct {
		return check(call, C.sc_send(b, n, t, C.int(dest), C.int(tag), c.h))
	}
	return check(call, funnel(func() C.int { return C.sc_send(b, n, t, C.int(dest), C.int(tag), c.h) }))
}

// Recv is MPI_Recv into buf from rank src with tag (>= 0); it returns the
// number of elements received. A longer message is an MPI error
// (MPI_ERR_TRUNCATE).
func (c Comm) Recv(buf []byte, dt Datatype, src, tag int) (int, error) {
	const call = "MPI_Recv"
	if err := c.ready(call); err != nil {
		return 0, err
	}
	if err := c.checkRank(call, "src", src); err != nil {
		return 0, err
	}
	if tag < 0 || tag > math.MaxInt32 {
		return 0, fmt.Errorf("%w: %s: tag %d", ErrArgument, call, tag)
	}
	n, err := elems(call, "buf", buf, dt)
	if err != nil {
		return 0, err
	}
	b, t := ptr(buf), C.int(dt)
	got := new(C.int)
	var rc C.int
	if rt.direct {
		rc = C.sc_recv(b, n, t, C.int(src), C.int(tag), c.h, got)
	} else {
		rc = funnel(func() C.int { return C.sc_recv(b, n, t, C.int(src), C.int(tag), c.h, got) })
	}
	return int(*got), check(call, rc)
}

// Bcast is [Comm.Bcast] on a typed slice.
func Bcast[T Elem](c Comm, buf []T, root int) error {
	return c.Bcast(asBytes(buf), TypeOf[T](), root)
}

// Allreduce is [Comm.Allreduce] on typed slices.
func Allreduce[T Elem](c Comm, send, recv []T, op Op) error {
	return c.Allreduce(asBytes(send), asBytes(recv), TypeOf[T](), op)
}

// Reduce is [Comm.Reduce] on typed slices.
func Reduce[T Elem](c Comm, send, recv []T, op Op, root int) error {
	return c.Reduce(asBytes(send), asBytes(recv), TypeOf[T](), op, root)
}

// ReduceScatterBlock is [Comm.ReduceScatterBlock] on typed slices.
func ReduceScatterBlock[T Elem](c Comm, send, recv []T, op Op) error {
	return c.ReduceScatterBlock(asBytes(send), asBytes(recv), TypeOf[T](), op)
}

// ReduceScatter is [Comm.ReduceScatter] on typed slices.
func ReduceScatter[T Elem](c Comm, send, recv []T, op Op, counts []int) error {
	return c.ReduceScatter(asBytes(send), asBytes(recv), TypeOf[T](), op, counts)
}

// Allgather is [Comm.Allgather] on typed slices.
func Allgather[T Elem](c Comm, send, recv []T) error {
	return c.Allgather(asBytes(send), asBytes(recv), TypeOf[T]())
}

// Allgatherv is [Comm.Allgatherv] on typed slices.
func Allgatherv[T Elem](c Comm, send, recv []T, counts, displs []int) error {
	return c.Allgatherv(asBytes(send), asBytes(recv), TypeOf[T](), counts, displs)
}

// Send is [Comm.Send] of a typed slice.
func Send[T Elem](c Comm, buf []T, dest, tag int) error {
	return c.Send(asBytes(buf), TypeOf[T](), dest, tag)
}

// Recv is [Comm.Recv] into a typed slice.
func Recv[T Elem](c Comm, buf []T, src, tag int) (int, error) {
	return c.Recv(asBytes(buf), TypeOf[T](), src, tag)
}
