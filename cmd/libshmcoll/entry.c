//go:build mpi

// The MPI entry points of libshmcoll. Each decides here, in C, whether a
// call can be served (so that a call passed through costs no transition
// into Go), and otherwise calls the MPI's profiling name PMPI_*.
//
// The serve rule. Ranks must never split one collective between shmcoll
// and the MPI, so every decision is taken from values the standard makes
// equal on every rank, in the same order on every rank:
//
//  1. the communicator's state (made at its first intercepted collective,
//     agreed by all ranks through PMPI_Allreduce);
//  2. the base type B of the datatype and the operator: B is the datatype
//     itself when it is predefined, else the one predefined type a derived
//     datatype is built of (none when it mixes types). B is fixed by the
//     type signature, which the standard makes equal (or matching) on every
//     rank, so a rank passing MPI_DOUBLE and a rank passing a vector of
//     MPI_DOUBLE find the same B. B without a kernel (long double, pair
//     types, mixed) or an operator that does not apply to B: pass;
//  3. the total bytes of the type signature against the size band of the
//     (collective, communicator size): outside it, pass;
//  4. a predefined datatype is served. In data movement a derived
//     datatype whose B is served is served too, through a packed copy
//     (equal type signatures are equal bytes), so that a rank passing a
//     vector of MPI_DOUBLE takes part in the same call as ranks passing
//     MPI_DOUBLE. A reduction on a derived datatype passes (both MPIs
//     refuse predefined operators on derived datatypes; a user operator
//     would see a different datatype): a program that mixes a derived
//     datatype on one rank with a predefined one on another in one
//     reduction is not supported.
//
// A served call that fails in shmcoll (a mismatch or a dead peer, which
// shmcoll reports on every rank in the call) passes, and so do the
// communicator's later calls. It is a last resort: nothing the rule
// serves fails in a correct program.

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shmcoll.h"
#include "_cgo_export.h"

int64_t sc_band_min[SC_NCOLL][SC_BAND_P][SC_BANDS];
int64_t sc_band_max[SC_NCOLL][SC_BAND_P][SC_BANDS];

#define SC_SERVE (-1)
#define SC_PACK (-2)

static pthread_once_t sc_once = PTHREAD_ONCE_INIT;
static int sc_ready;     // sc_init has run (read with acquire, so sc_on is seen)
static int sc_on;        // serving: set once by sc_init
static int sc_done;      // MPI_Finalize seen
static int sc_keyval = MPI_KEYVAL_INVALID;
static uint64_t sc_gen;  // bumped by every deletion of a communicator's state (below)

// The calls passed through, counted per thread: a pass then costs a plain
// increment, where one shared counter would cost every pass a locked
// instruction. Each thread's counts are made at its first pass and pushed
// on sc_counts_all; they are never freed, so that a thread's counts outlive
// it. A count is written only by its thread, read by others (sc_passed)
// with relaxed loads.
typedef struct sc_counts {
	uint64_t n[SC_NCOLL][SC_NPASS];
	struct sc_counts *next;
} sc_counts;
static sc_counts *sc_counts_all;
static __thread sc_counts *sc_mine __attribute__((tls_model("initial-exec")));

static __attribute__((noinline, cold)) sc_counts *sc_counts_new(void) {
	sc_counts *c = calloc(1, sizeof *c);
	if (!c) return NULL;
	c->next = __atomic_load_n(&sc_counts_all, __ATOMIC_RELAXED);
	while (!__atomic_compare_exchange_n(&sc_counts_all, &c->next, c, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
	}
	return sc_mine = c;
}

// sc_count_in counts a pass in the thread's counts c.
static inline __attribute__((always_inline)) void sc_count_in(sc_counts *c, int coll, int why) {
	__atomic_store_n(&c->n[coll][why], c->n[coll][why] + 1, __ATOMIC_RELAXED);
}

static inline __attribute__((always_inline)) void sc_count_pass(int coll, int why) {
	sc_counts *c = sc_mine;
	if (c || (c = sc_counts_new())) sc_count_in(c, coll, why);
}

// The pass memo. A thread that makes the same call as its last of that
// collective (the same communicator, predefined datatypes, counts and
// operator, and no communicator freed since) and passed it, passes it
// again without deciding anew: every input of the decision is then the
// same (predefined handles are never reused; a communicator's handle may
// be, after a free, which bumps sc_gen; the bands and a communicator's
// state do not change, and a communicator whose served call failed
// passes from then on). The entry point arms the memo with the call's
// keys before it decides, and sc_pass fills in the reason if the call
// passes; a served call leaves it empty. reduce_scatter's keys hold the
// total of its counts. Gather, scatter and the other vector collectives,
// whose decisions read other arguments at the root than elsewhere or
// whole count vectors, have none.
typedef struct {
	uintptr_t k[4];
	uint64_t gen;
	int why; // the pass reason + 1; 0: none (armed or empty)
	int n;   // reduce_scatter: the communicator's size, the counts' length
} sc_memo;
static __thread sc_memo sc_memos[SC_NCOLL] __attribute__((tls_model("initial-exec")));
static __thread int sc_armed __attribute__((tls_model("initial-exec"))); // collective + 1

// sc_memo_pass reports whether the thread's last call of coll had these
// keys and passed, and then counts this one as passed for that reason.
// A thread has its counts from its first pass on, so a hit never makes
// them (a call there would make the entry point save its arguments).
static inline __attribute__((always_inline)) int sc_memo_pass(int coll, uintptr_t a, uintptr_t b, uintptr_t c,
                                                              uintptr_t d) {
	sc_memo *m = &sc_memos[coll];
	sc_counts *n = sc_mine;
	if (n && m->why && m->k[0] == a && m->k[1] == b && m->k[2] == c && m->k[3] == d &&
	    m->gen == __atomic_load_n(&sc_gen, __ATOMIC_ACQUIRE)) {
		sc_count_in(n, coll, m->why - 1);
		return 1;
	}
	return 0;
}

// sc_memo_arm records the keys of a call about to be decided. A derived
// datatype, whose handle may be reused for another type after a free,
// disarms it where the decision looks the datatype up (sc_move,
// sc_reduce); a pass decided before that (the communicator, SHMCOLL_MPI=off)
// does not depend on the datatype.
static void sc_memo_arm(int coll, uintptr_t a, uintptr_t b, uintptr_t c, uintptr_t d) {
	sc_memo *m = &sc_memos[coll];
	m->why = 0;
	m->k[0] = a;
	m->k[1] = b;
	m->k[2] = c;
	m->k[3] = d;
	m->gen = __atomic_load_n(&sc_gen, __ATOMIC_ACQUIRE);
	sc_armed = coll + 1;
}

static void sc_pass(int coll, int why) {
	sc_count_pass(coll, why);
	if (sc_armed == coll + 1 && why != SC_PASS_FALLBACK && why != SC_PASS_DECLINED) sc_memos[coll].why = why + 1;
	sc_armed = 0;
}

uint64_t sc_passed(int coll, int why) {
	uint64_t n = 0;
	for (sc_counts *c = __atomic_load_n(&sc_counts_all, __ATOMIC_ACQUIRE); c; c = c->next)
		n += __atomic_load_n(&c->n[coll][why], __ATOMIC_RELAXED);
	return n;
}

// sc_near_differs: the bands of a near pair (row SC_BAND_NEAR) differ from
// those of p = 2 for some collective, so that a pair's placement matters.
static int sc_near_differs;

static void sc_init_near(void) {
	for (int c = 0; c < SC_NCOLL; c++)
		for (int k = 0; k < SC_BANDS; k++)
			if (sc_band_min[c][SC_BAND_NEAR][k] != sc_band_min[c][2][k] ||
			    sc_band_max[c][SC_BAND_NEAR][k] != sc_band_max[c][2][k])
				sc_near_differs = 1;
}

// sc_in_band reports whether a call of bytes is in the band of coll on a
// communicator of p ranks, near (a pair that shares a cache) or not.
static int sc_in_band(int coll, int p, int near, int64_t bytes) {
	int i = near ? SC_BAND_NEAR : p < SC_BAND_P ? p : SC_BAND_P - 1;
	for (int k = 0; k < SC_BANDS; k++)
		if (bytes >= sc_band_min[coll][i][k] && bytes <= sc_band_max[coll][i][k]) return 1;
	return 0;
}

// ---- datatypes --------------------------------------------------------

enum { K_MOVE, K_INT, K_FLOAT, K_COMPLEX, K_BOOL, K_BYTE };

typedef struct sc_tinfo {
	MPI_Datatype dt;
	int simd; // simd.Type, -1 for move-only types
	int kind;
	int size;
} sc_tinfo;

#define SC_MAXTYPES 96
static sc_tinfo sc_types[SC_MAXTYPES];
static int sc_ntypes;

// sc_add records a predefined datatype of the given kind: its simd type
// follows from its size (and signedness), so MPI_LONG, MPI_INTEGER and
// MPI_INT64_T land on the kernel of their width. Types of a size without a
// kernel are recorded as move-only; handles an MPI leaves null (Fortran
// types of a library built without Fortran) are skipped.
static void sc_add(MPI_Datatype dt, int kind, int sign) {
	if (dt == MPI_DATATYPE_NULL || sc_ntypes == SC_MAXTYPES) return;
	for (int i = 0; i < sc_ntypes; i++)
		if (sc_types[i].dt == dt) return; // an alias (MPI_LONG_LONG)
	int size = 0;
	MPI_Aint lb = 0, extent = 0;
	if (PMPI_Type_size(dt, &size) != MPI_SUCCESS || PMPI_Type_get_extent(dt, &lb, &extent) != MPI_SUCCESS) return;
	if (size <= 0 || lb != 0 || extent != size) return; // not contiguous bytes
	int t = -1;
	switch (kind) {
	case K_INT:
		switch (size) {
		case 1: t = sign ? 0 : 4; break;
		case 2: t = sign ? 1 : 5; break;
		case 4: t = sign ? 2 : 6; break;
		case 8: t = sign ? 3 : 7; break;
		}
		break;
	case K_FLOAT:
		if (size == 4) t = 8;
		if (size == 8) t = 9;
		break;
	case K_COMPLEX:
		if (size == 8) t = 12;
		if (size == 16) t = 13;
		break;
	case K_BOOL:
	case K_BYTE:
		if (size == 1) t = 4;
		break;
	}
	if (t < 0) kind = K_MOVE;
	sc_types[sc_ntypes++] = (sc_tinfo){dt, t, kind, size};
}

static void sc_init_types(void) {
	// The most used first: lookups scan in order.
	sc_add(MPI_DOUBLE, K_FLOAT, 1);
	sc_add(MPI_INT, K_INT, 1);
	sc_add(MPI_FLOAT, K_FLOAT, 1);
	sc_add(MPI_LONG, K_INT, 1);
	sc_add(MPI_BYTE, K_BYTE, 0);
	// The standard lists MPI_CHAR under no reduction operator, but both
	// MPIs reduce it with every predefined one as C's char (the OSU
	// benchmarks' default type): so does the library, signed where char is.
	sc_add(MPI_CHAR, K_INT, CHAR_MIN < 0);
	sc_add(MPI_UNSIGNED, K_INT, 0);
	sc_add(MPI_UNSIGNED_LONG, K_INT, 0);
	sc_add(MPI_LONG_LONG_INT, K_INT, 1);
	sc_add(MPI_UNSIGNED_LONG_LONG, K_INT, 0);
	sc_add(MPI_SHORT, K_INT, 1);
	sc_add(MPI_UNSIGNED_SHORT, K_INT, 0);
	sc_add(MPI_SIGNED_CHAR, K_INT, 1);
	sc_add(MPI_UNSIGNED_CHAR, K_INT, 0);
	sc_add(MPI_INT8_T, K_INT, 1);
	sc_add(MPI_INT16_T, K_INT, 1);
	sc_add(MPI_INT32_T, K_INT, 1);
	sc_add(MPI_INT64_T, K_INT, 1);
	sc_add(MPI_UINT8_T, K_INT, 0);
	sc_add(MPI_UINT16_T, K_INT, 0);
	sc_add(MPI_UINT32_T, K_INT, 0);
	sc_add(MPI_UINT64_T, K_INT, 0);
	sc_add(MPI_AINT, K_INT, 1);
	sc_add(MPI_OFFSET, K_INT, 1);
	sc_add(MPI_COUNT, K_INT, 1);
	sc_add(MPI_C_BOOL, K_BOOL, 0);
	sc_add(MPI_C_FLOAT_COMPLEX, K_COMPLEX, 1);
	sc_add(MPI_C_DOUBLE_COMPLEX, K_COMPLEX, 1);
	sc_add(MPI_WCHAR, K_MOVE, 0);
	sc_add(MPI_PACKED, K_MOVE, 0);
	// Fortran's, as MPICH's Fortran library hands them to the C entry points.
	sc_add(MPI_INTEGER, K_INT, 1);
	sc_add(MPI_REAL, K_FLOAT, 1);
	sc_add(MPI_DOUBLE_PRECISION, K_FLOAT, 1);
	sc_add(MPI_COMPLEX, K_COMPLEX, 1);
	sc_add(MPI_DOUBLE_COMPLEX, K_COMPLEX, 1);
	sc_add(MPI_INTEGER1, K_INT, 1);
	sc_add(MPI_INTEGER2, K_INT, 1);
	sc_add(MPI_INTEGER4, K_INT, 1);
	sc_add(MPI_INTEGER8, K_INT, 1);
	sc_add(MPI_REAL4, K_FLOAT, 1);
	sc_add(MPI_REAL8, K_FLOAT, 1);
	sc_add(MPI_COMPLEX8, K_COMPLEX, 1);
	sc_add(MPI_COMPLEX16, K_COMPLEX, 1);
	sc_add(MPI_LOGICAL, K_MOVE, 0); // .true.'s bits are the compiler's
	sc_add(MPI_CHARACTER, K_MOVE, 0);
}

static const sc_tinfo *sc_lookup(MPI_Datatype dt) {
	for (int i = 0; i < sc_ntypes; i++)
		if (sc_types[i].dt == dt) return &sc_types[i];
	return NULL;
}

static int sc_is_named(MPI_Datatype dt) {
	int ni, na, nd, comb;
	if (PMPI_Type_get_envelope(dt, &ni, &na, &nd, &comb) != MPI_SUCCESS) return 0;
	return comb == MPI_COMBINER_NAMED;
}

// sc_base is the one predefined datatype dt is built of, MPI_DATATYPE_NULL
// when it mixes several (or on any error). Parts of zero size (a struct
// member of block length 0) do not count, as they add nothing to the type
// signature.
static MPI_Datatype sc_base(MPI_Datatype dt, int depth) {
	int ni = 0, na = 0, nd = 0, comb = 0;
	if (PMPI_Type_get_envelope(dt, &ni, &na, &nd, &comb) != MPI_SUCCESS) return MPI_DATATYPE_NULL;
	if (comb == MPI_COMBINER_NAMED) return dt;
	if (depth > 32 || nd < 1) return MPI_DATATYPE_NULL;
	int *ints = malloc(sizeof(int) * (ni + 1));
	MPI_Aint *aints = malloc(sizeof(MPI_Aint) * (na + 1));
	MPI_Datatype *dts = malloc(sizeof(MPI_Datatype) * nd);
	MPI_Datatype b = MPI_DATATYPE_NULL;
	int found = 0, mixed = !ints || !aints || !dts;
	if (!mixed && PMPI_Type_get_contents(dt, ni, na, nd, ints, aints, dts) != MPI_SUCCESS) {
		mixed = 1;
		nd = 0;
	}
	for (int i = 0; i < nd && dts; i++) {
		int size = 0;
		PMPI_Type_size(dts[i], &size);
		int empty = size == 0 || (comb == MPI_COMBINER_STRUCT && ni > i + 1 && ints[i + 1] == 0);
		if (!mixed && !empty) {
			MPI_Datatype bi = sc_base(dts[i], depth + 1);
			if (bi == MPI_DATATYPE_NULL || (found && bi != b))
				mixed = 1;
			b = bi;
			found = 1;
		}
		if (!sc_is_named(dts[i])) PMPI_Type_free(&dts[i]);
	}
	free(ints);
	free(aints);
	free(dts);
	return mixed || !found ? MPI_DATATYPE_NULL : b;
}

// sc_move classifies a datatype of a data-movement collective: SC_SERVE
// (moved as bytes, *size the bytes of one element), SC_PACK (a derived
// datatype of such a base: moved through a packed copy) or
// SC_PASS_DATATYPE.
static int sc_move(MPI_Datatype dt, int64_t *size) {
	const sc_tinfo *ti = sc_lookup(dt);
	if (ti) {
		*size = ti->size;
		return SC_SERVE;
	}
	sc_armed = 0; // not a table type: no pass memo (sc_memo_arm)
	int named = sc_is_named(dt);
	MPI_Datatype b = named ? dt : sc_base(dt, 0);
	if (b == MPI_DATATYPE_NULL) return SC_PASS_DATATYPE;
	int sz = 0;
	MPI_Aint lb = 0, extent = 0;
	if (PMPI_Type_size(b, &sz) != MPI_SUCCESS || PMPI_Type_get_extent(b, &lb, &extent) != MPI_SUCCESS || sz <= 0 ||
	    lb != 0 || extent != sz)
		return SC_PASS_DATATYPE; // pair types and the like: not plain bytes
	if (PMPI_Type_size(dt, &sz) != MPI_SUCCESS) return SC_PASS_DATATYPE;
	*size = sz;
	return named ? SC_SERVE : SC_PACK;
}

// ---- operators --------------------------------------------------------

#define SC_MAXUSER 4096

static struct {
	MPI_Op op;
	MPI_User_function *fn;
	int commute;
} sc_user[SC_MAXUSER];
static int sc_nuser;
static pthread_mutex_t sc_user_mu = PTHREAD_MUTEX_INITIALIZER;

void sc_call_user(int idx, void *in, void *inout, int len, uintptr_t dtype) {
	MPI_Datatype d = (MPI_Datatype)dtype;
	sc_user[idx].fn(in, inout, &len, &d);
}

// sc_opcode is the operator code for Go (see shmcoll.h), or -1 when op
// does not apply to the kind of type (MPI's rules) or is not served.
static int sc_opcode(MPI_Op op, int kind, int *commute) {
	*commute = 1;
	int arith = kind == K_INT || kind == K_FLOAT || kind == K_COMPLEX;
	if (op == MPI_SUM) return arith ? 0 : -1;
	if (op == MPI_PROD) return arith ? 1 : -1;
	if (op == MPI_MIN) return kind == K_INT || kind == K_FLOAT ? 2 : -1;
	if (op == MPI_MAX) return kind == K_INT || kind == K_FLOAT ? 3 : -1;
	if (op == MPI_BAND) return kind == K_INT || kind == K_BYTE ? 4 : -1;
	if (op == MPI_BOR) return kind == K_INT || kind == K_BYTE ? 5 : -1;
	if (op == MPI_BXOR) return kind == K_INT || kind == K_BYTE ? 6 : -1;
	if (op == MPI_LAND) return kind == K_INT || kind == K_BOOL ? 7 : -1;
	if (op == MPI_LOR) return kind == K_INT || kind == K_BOOL ? 8 : -1;
	if (op == MPI_LXOR) return kind == K_INT || kind == K_BOOL ? SC_OP_LXOR : -1;
	if (kind == K_MOVE) return -1;
	int code = -1;
	pthread_mutex_lock(&sc_user_mu);
	for (int i = sc_nuser - 1; i >= 0; i--) // newest first: a freed handle may be reused
		if (sc_user[i].op == op) {
			code = SC_OP_USER + i;
			*commute = sc_user[i].commute;
			break;
		}
	pthread_mutex_unlock(&sc_user_mu);
	return code; // MINLOC, MAXLOC, REPLACE, NO_OP, unknown: -1
}

int MPI_Op_create(MPI_User_function *fn, int commute, MPI_Op *op) {
	int rc = PMPI_Op_create(fn, commute, op);
	if (rc == MPI_SUCCESS) {
		pthread_mutex_lock(&sc_user_mu);
		if (sc_nuser < SC_MAXUSER) {
			sc_user[sc_nuser].op = *op;
			sc_user[sc_nuser].fn = fn;
			sc_user[sc_nuser].commute = commute;
			sc_nuser++;
		}
		pthread_mutex_unlock(&sc_user_mu);
	}
	return rc;
}

int MPI_Op_free(MPI_Op *op) {
	pthread_mutex_lock(&sc_user_mu);
	for (int i = sc_nuser - 1; op && i >= 0; i--)
		if (sc_user[i].op == *op) {
			sc_user[i].op = MPI_OP_NULL;
			break;
		}
	pthread_mutex_unlock(&sc_user_mu);
	return PMPI_Op_free(op);
}

// sc_reduce classifies a reduction: SC_SERVE with *simd,
// *code, *commute and *size (bytes per element) set, or a pass reason.
static int sc_reduce(MPI_Datatype dt, MPI_Op op, int *simd, int *code, int *commute, int64_t *size) {
	const sc_tinfo *ti = sc_lookup(dt);
	int named = ti != NULL;
	if (!ti) {
		sc_armed = 0; // not a table type: no pass memo (sc_memo_arm)
		named = sc_is_named(dt);
		MPI_Datatype b = named ? dt : sc_base(dt, 0);
		ti = b == MPI_DATATYPE_NULL ? NULL : sc_lookup(b);
		if (!ti || ti->simd < 0) return SC_PASS_DATATYPE;
	}
	if (ti->simd < 0) return SC_PASS_DATATYPE;
	*code = sc_opcode(op, ti->kind, commute);
	if (*code < 0) return SC_PASS_OP;
	if (!named) return SC_PASS_DATATYPE;
	*simd = ti->simd;
	*size = ti->size;
	return SC_SERVE;
}

// ---- communicators ----------------------------------------------------

typedef struct sc_state {
	int served;
	int hier; // spans nodes: collectives/hier serves what it has
	int near; // two ranks that share a cache: the bands of SC_BAND_NEAR
	int rank;
	int id;   // Go's communicator, -1 for none
	int size; // ranks
} sc_state;

// The state of the communicator a thread used last, so that a call on it
// finds its state without the MPI's attribute lookup (most programs run
// their collectives on one communicator). It is valid while sc_gen, which
// every deletion of a state bumps, has not moved: a freed communicator's
// handle, which the MPI may reuse for a new one, never finds a stale state.
static __thread struct {
	MPI_Comm comm;
	sc_state *s;
	uint64_t gen;
	int locked; // shmcollLockThread has run on this thread
} sc_last __attribute__((tls_model("initial-exec")));

// sc_lock_thread runs shmcollLockThread once on the calling thread, before
// its other calls into Go.
static void sc_lock_thread(void) {
	if (!sc_last.locked) {
		shmcollLockThread();
		sc_last.locked = 1;
	}
}

static int sc_delete_attr(MPI_Comm comm, int key, void *val, void *extra) {
	(void)comm;
	(void)key;
	(void)extra;
	sc_state *s = val;
	__atomic_fetch_add(&sc_gen, 1, __ATOMIC_ACQ_REL);
	if (s->id >= 0) shmcollRelease(s->id);
	free(s);
	return MPI_SUCCESS;
}

// sc_progress is the progress call of a waiting rank: a probe that
// receives nothing and runs the MPI's progress engine. On MPI_COMM_WORLD,
// since MPICH answers a probe on MPI_COMM_SELF without progressing its
// other channels.
void sc_progress(void) {
	int flag = 0;
	PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
}

static void sc_init(void) {
	const char *e = getenv("SHMCOLL_MPI");
	if (e && (!strcmp(e, "off") || !strcmp(e, "0"))) return;
	int init = 0, fin = 0;
	PMPI_Initialized(&init);
	PMPI_Finalized(&fin);
	if (!init || fin) return;
	sc_init_types();
	if (PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, sc_delete_attr, &sc_keyval, NULL) != MPI_SUCCESS) return;
	sc_lock_thread();
	if (shmcollStart() != 0) return;
	sc_init_near();
	sc_on = 1;
}

static void sc_init_once(void) {
	sc_init();
	__atomic_store_n(&sc_ready, 1, __ATOMIC_RELEASE);
}

// sc_setup makes the state of a communicator at its first intercepted
// collective: one shmcoll arena per node, agreed on every rank.
static sc_state *sc_setup(MPI_Comm comm) {
	sc_state *s = calloc(1, sizeof *s);
	if (!s) return NULL;
	s->id = -1;
	int inter = 0, size = 0, rank = 0;
	PMPI_Comm_test_inter(comm, &inter);
	if (!inter) {
		PMPI_Comm_size(comm, &size);
		PMPI_Comm_rank(comm, &rank);
	}
	s->size = size;
	s->rank = rank;
	if (!inter && size > 1) {
		MPI_Comm node = MPI_COMM_NULL;
		const char *ns = getenv("SHMCOLL_NODE_SIZE");
		int k = ns && *ns && !(strchr(ns, ',') == NULL && atoi(ns) >= size); // emulated nodes, more than one
		int rc = PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
		int nrank = 0, nsize = 0, ok = 0;
		if (rc == MPI_SUCCESS) {
			PMPI_Comm_rank(node, &nrank);
			PMPI_Comm_size(node, &nsize);
			// One node: the node ranks are the communicator's ranks (key =
			// rank), and every rank finds one node (all or none do).
			// Emulated nodes (SHMCOLL_NODE_SIZE) and real ones go to hier.
			int single = nsize == size && k == 0;
			char name[72];
			memset(name, 0, sizeof name);
			if (single && nrank == 0) shmcollNewName(name, (int)sizeof name - 1);
			// Rank 0's name reaches the others by an allreduce (the others
			// give zeros), not a bcast: Open MPI's small calls between ranks
			// on different dies stay slower for the rest of the run after a
			// bcast of its own, which the program may never make
			// (docs/PERFORMANCE.md, "Passed calls").
			if (single) PMPI_Allreduce(MPI_IN_PLACE, name, (int)sizeof name, MPI_BYTE, MPI_BOR, node);
			PMPI_Comm_free(&node);
			if (single && name[0]) {
				s->id = shmcollJoin(name, nrank, nsize);
			} else if (!single) {
				s->id = shmcollHier((uintptr_t)comm);
				s->hier = 1;
			}
			ok = s->id >= 0;
		}
		int all = 0;
		PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm);
		if (all) {
			s->served = 1;
			// A pair's placement picks its bands; every rank times it and
			// the pair is near only if both found it so.
			if (size == 2 && !s->hier && sc_near_differs) {
				int near = shmcollNear(s->id), both = 0;
				PMPI_Allreduce(&near, &both, 1, MPI_INT, MPI_MIN, comm);
				s->near = both;
			}
		} else if (s->id >= 0) {
			shmcollRelease(s->id);
			s->id = -1;
		}
	}
	PMPI_Comm_set_attr(comm, sc_keyval, s);
	return s;
}

// The collectives collectives/hier serves on communicators spanning nodes.
static const int sc_hier_has[SC_NCOLL] = {
    [SC_ALLREDUCE] = 1, [SC_REDUCE_SCATTER_BLOCK] = 1, [SC_REDUCE_SCATTER] = 1, [SC_ALLGATHER] = 1,
    [SC_ALLGATHERV] = 1, [SC_BCAST] = 1, [SC_REDUCE] = 1,
};

// sc_state_of returns the communicator's state when it is served, else
// counts the call as passed and returns NULL.
static sc_state *sc_state_of(MPI_Comm comm, int coll) {
	if (!__atomic_load_n(&sc_ready, __ATOMIC_ACQUIRE)) pthread_once(&sc_once, sc_init_once);
	if (!sc_on || sc_done || comm == MPI_COMM_NULL) {
		sc_pass(coll, SC_PASS_OFF);
		return NULL;
	}
	uint64_t gen = __atomic_load_n(&sc_gen, __ATOMIC_ACQUIRE);
	sc_state *s;
	if (sc_last.comm == comm && sc_last.gen == gen && sc_last.s) {
		s = sc_last.s;
	} else {
		void *v = NULL;
		int flag = 0;
		sc_lock_thread();
		if (PMPI_Comm_get_attr(comm, sc_keyval, &v, &flag) == MPI_SUCCESS && flag)
			s = v;
		else
			s = sc_setup(comm);
		sc_last.comm = comm;
		sc_last.s = s;
		sc_last.gen = gen;
	}
	if (!s || !s->served || s->id < 0 || (s->hier && !sc_hier_has[coll])) {
		sc_pass(coll, SC_PASS_COMM);
		return NULL;
	}
	return s;
}

// sc_failed handles a served call that shmcoll could not complete (every
// rank sees the failure): pass it through, and the communicator from now
// on (Go has released it).
static void sc_failed(sc_state *s, int coll) {
	s->served = 0;
	s->id = -1;
	sc_pass(coll, SC_PASS_FALLBACK);
}


// ---- reductions -------------------------------------------------------

// sc_red decides a reduction and serves it; it returns 1 when served.
// counts are reduce_scatter's receive counts, in place its send.
static int sc_red(int coll, const void *sb, void *rb, int count, const int *counts, MPI_Datatype dt, MPI_Op op,
                  int root, MPI_Comm comm) {
	sc_state *s = sc_state_of(comm, coll);
	if (!s) return 0;
	int simd = 0, code = 0, commute = 1;
	int64_t size = 0;
	int k = sc_reduce(dt, op, &simd, &code, &commute, &size);
	if (k >= 0) {
		sc_pass(coll, k);
		return 0;
	}
	int64_t elems = count;
	if (counts) {
		elems = 0;
		for (int i = 0; i < s->size; i++) elems += counts[i];
		// reduce_scatter's memo keys the counts' total, which only the
		// communicator's size lets the entry sum: armed here, for a
		// served communicator and a datatype of the table.
		sc_memo_arm(coll, (uintptr_t)comm, (uintptr_t)dt, (uintptr_t)op, (uintptr_t)elems);
		sc_memos[coll].n = s->size;
	}
	if (!sc_in_band(coll, s->size, s->near, elems * size)) {
		sc_pass(coll, SC_PASS_SIZE);
		return 0;
	}
	void *send = sb == MPI_IN_PLACE ? NULL : (void *)sb;
	if (shmcollReduce(s->id, coll, send, rb, count, (int *)counts, simd, code, commute, (uintptr_t)dt, root) != 0) {
		sc_failed(s, coll);
		return 0;
	}
	return 1;
}

// The entry points that have a pass memo check it inline and pass at
// once on a hit (a tail call of PMPI_); after a miss they tail-call a
// function of their own that decides, serves or makes the PMPI_ call
// itself, so that neither path of the entry saves a register.

// sc_red_call is a reduction of one count after a miss of the pass memo,
// which it arms: served, or passed to the MPI.
static int sc_red_call(int coll, const void *sb, void *rb, int count, MPI_Datatype dt, MPI_Op op, int root,
                       MPI_Comm comm) {
	sc_memo_arm(coll, (uintptr_t)comm, (uintptr_t)dt, (uintptr_t)op, (uintptr_t)count);
	if (sc_red(coll, sb, rb, count, NULL, dt, op, root, comm)) return MPI_SUCCESS;
	switch (coll) {
	case SC_ALLREDUCE:
		return PMPI_Allreduce(sb, rb, count, dt, op, comm);
	case SC_REDUCE:
		return PMPI_Reduce(sb, rb, count, dt, op, root, comm);
	case SC_REDUCE_SCATTER_BLOCK:
		return PMPI_Reduce_scatter_block(sb, rb, count, dt, op, comm);
	case SC_SCAN:
		return PMPI_Scan(sb, rb, count, dt, op, comm);
	default:
		return PMPI_Exscan(sb, rb, count, dt, op, comm);
	}
}

// sc_red_hit reports a hit of the pass memo for a reduction of one count.
static inline __attribute__((always_inline)) int sc_red_hit(int coll, int count, MPI_Datatype dt, MPI_Op op,
                                                            MPI_Comm comm) {
	return sc_memo_pass(coll, (uintptr_t)comm, (uintptr_t)dt, (uintptr_t)op, (uintptr_t)count);
}

// Each entry's miss path has the entry's own arguments, so that the entry
// reaches it by a jump.
static __attribute__((noinline)) int sc_allreduce(const void *sb, void *rb, int count, MPI_Datatype dt, MPI_Op op,
                                                  MPI_Comm comm) {
	return sc_red_call(SC_ALLREDUCE, sb, rb, count, dt, op, 0, comm);
}

int MPI_Allreduce(const void *sb, void *rb, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
	if (sc_red_hit(SC_ALLREDUCE, count, dt, op, comm)) return PMPI_Allreduce(sb, rb, count, dt, op, comm);
	return sc_allreduce(sb, rb, count, dt, op, comm);
}

static __attribute__((noinline)) int sc_reduce_call(const void *sb, void *rb, int count, MPI_Datatype dt, MPI_Op op,
                                               int root, MPI_Comm comm) {
	return sc_red_call(SC_REDUCE, sb, rb, count, dt, op, root, comm);
}

int MPI_Reduce(const void *sb, void *rb, int count, MPI_Datatype dt, MPI_Op op, int root, MPI_Comm comm) {
	if (sc_red_hit(SC_REDUCE, count, dt, op, comm)) return PMPI_Reduce(sb, rb, count, dt, op, root, comm);
	return sc_reduce_call(sb, rb, count, dt, op, root, comm);
}

static __attribute__((noinline)) int sc_rsb(const void *sb, void *rb, int count, MPI_Datatype dt, MPI_Op op,
                                            MPI_Comm comm) {
	return sc_red_call(SC_REDUCE_SCATTER_BLOCK, sb, rb, count, dt, op, 0, comm);
}

int MPI_Reduce_scatter_block(const void *sb, void *rb, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
	if (sc_red_hit(SC_REDUCE_SCATTER_BLOCK, count, dt, op, comm))
		return PMPI_Reduce_scatter_block(sb, rb, count, dt, op, comm);
	return sc_rsb(sb, rb, count, dt, op, comm);
}

static __attribute__((noinline)) int sc_reduce_scatter(const void *sb, void *rb, const int counts[], MPI_Datatype dt,
                                                       MPI_Op op, MPI_Comm comm) {
	sc_armed = 0; // armed in sc_red once the counts are summed: a pass before that keeps no memo
	if (sc_red(SC_REDUCE_SCATTER, sb, rb, 0, counts, dt, op, 0, comm)) return MPI_SUCCESS;
	return PMPI_Reduce_scatter(sb, rb, counts, dt, op, comm);
}

// The memo's communicator is checked before the counts are summed: its
// size is their length.
int MPI_Reduce_scatter(const void *sb, void *rb, const int counts[], MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
	const sc_memo *m = &sc_memos[SC_REDUCE_SCATTER];
	if (m->why && m->k[0] == (uintptr_t)comm && m->gen == __atomic_load_n(&sc_gen, __ATOMIC_ACQUIRE)) {
		int64_t t = 0;
		for (int i = 0; i < m->n; i++) t += counts[i];
		if (sc_memo_pass(SC_REDUCE_SCATTER, (uintptr_t)comm, (uintptr_t)dt, (uintptr_t)op, (uintptr_t)t))
			return PMPI_Reduce_scatter(sb, rb, counts, dt, op, comm);
	}
	return sc_reduce_scatter(sb, rb, counts, dt, op, comm);
}

static __attribute__((noinline)) int sc_scan(const void *sb, void *rb, int count, MPI_Datatype dt, MPI_Op op,
                                             MPI_Comm comm) {
	return sc_red_call(SC_SCAN, sb, rb, count, dt, op, 0, comm);
}

int MPI_Scan(const void *sb, void *rb, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
	if (sc_red_hit(SC_SCAN, count, dt, op, comm)) return PMPI_Scan(sb, rb, count, dt, op, comm);
	return sc_scan(sb, rb, count, dt, op, comm);
}

static __attribute__((noinline)) int sc_exscan(const void *sb, void *rb, int count, MPI_Datatype dt, MPI_Op op,
                                               MPI_Comm comm) {
	return sc_red_call(SC_EXSCAN, sb, rb, count, dt, op, 0, comm);
}

int MPI_Exscan(const void *sb, void *rb, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm) {
	if (sc_red_hit(SC_EXSCAN, count, dt, op, comm)) return PMPI_Exscan(sb, rb, count, dt, op, comm);
	return sc_exscan(sb, rb, count, dt, op, comm);
}

// ---- data movement ----------------------------------------------------

// A derived datatype (sc_move's SC_PACK) moves through a contiguous copy:
// the rank packs what it sends and unpacks what it receives around the
// served call, so that it takes part in the same call as ranks that pass
// predefined types (equal type signatures are equal bytes).

static void *sc_alloc(int64_t bytes) {
	void *t = malloc(bytes > 0 ? (size_t)bytes : 1);
	if (!t) PMPI_Abort(MPI_COMM_WORLD, 1);
	return t;
}

static void *sc_packed(const void *buf, int count, MPI_Datatype dt, int64_t bytes, MPI_Comm comm) {
	void *t = sc_alloc(bytes);
	int pos = 0;
	if (count > 0) PMPI_Pack(buf, count, dt, t, (int)bytes, &pos, comm);
	return t;
}

static void sc_unpack(const void *t, int64_t bytes, void *buf, int count, MPI_Datatype dt, MPI_Comm comm) {
	int pos = 0;
	if (count > 0) PMPI_Unpack(t, (int)bytes, &pos, buf, count, dt, comm);
}

// sc_decide finishes the decision of a data-movement call classified k
// (sc_join2 of its datatypes) with bytes the band's measure: 1 to serve.
static int sc_decide(sc_state *s, int coll, int k, int64_t bytes) {
	if (k >= 0) {
		sc_pass(coll, k);
		return 0;
	}
	if (!sc_in_band(coll, s->size, s->near, bytes)) {
		sc_pass(coll, SC_PASS_SIZE);
		return 0;
	}
	return 1;
}

// sc_serve runs a data-movement call in shmcoll: 1 when served. A NULL
// send (or recv for scatter) is MPI_IN_PLACE. An alltoallv that every rank
// found outside its band in the call's first step (2) passes, counted as
// declined (it paid that step, where a pass by size in C did not), and the
// communicator stays served.
static int sc_serve(sc_state *s, int coll, void *send, void *recv, int64_t n, int root, const int *sc, const int *sd,
                    const int *rc, const int *rd, int64_t ssize, int64_t rsize) {
	int r = shmcollMove(s->id, coll, send, recv, n, root, (int *)sc, (int *)sd, (int *)rc, (int *)rd, ssize, rsize);
	if (r == 2) {
		sc_pass(coll, SC_PASS_DECLINED);
		return 0;
	}
	if (r != 0) {
		sc_failed(s, coll);
		return 0;
	}
	return 1;
}

// sc_band_any reports whether coll has a band at p at all: alltoallv's
// bytes differ between ranks, so the ranks take its band's decision in the
// served call's first step (serve.go), where each learns every rank's.
static int sc_band_any(int coll, int p) {
	int i = p < SC_BAND_P ? p : SC_BAND_P - 1;
	for (int k = 0; k < SC_BANDS; k++)
		if (sc_band_min[coll][i][k] <= sc_band_max[coll][i][k]) return 1;
	return 0;
}

static int sc_join2(int a, int b) {
	if (a >= 0) return a;
	if (b >= 0) return b;
	return a == SC_PACK || b == SC_PACK ? SC_PACK : SC_SERVE;
}

static __attribute__((noinline)) int sc_barrier(MPI_Comm comm) {
	sc_memo_arm(SC_BARRIER, (uintptr_t)comm, 0, 0, 0);
	sc_state *s = sc_state_of(comm, SC_BARRIER);
	if (s && sc_decide(s, SC_BARRIER, SC_SERVE, 0) &&
	    sc_serve(s, SC_BARRIER, NULL, NULL, 0, 0, NULL, NULL, NULL, NULL, 0, 0))
		return MPI_SUCCESS;
	return PMPI_Barrier(comm);
}

int MPI_Barrier(MPI_Comm comm) {
	if (sc_memo_pass(SC_BARRIER, (uintptr_t)comm, 0, 0, 0)) return PMPI_Barrier(comm);
	return sc_barrier(comm);
}

static __attribute__((noinline)) int sc_bcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm) {
	sc_memo_arm(SC_BCAST, (uintptr_t)comm, (uintptr_t)dt, (uintptr_t)count, 0);
	sc_state *s = sc_state_of(comm, SC_BCAST);
	int64_t sz = 0;
	int k = s ? sc_move(dt, &sz) : 0;
	if (s && sc_decide(s, SC_BCAST, k, count * sz)) {
		int64_t bytes = count * sz;
		void *b = buf;
		if (k == SC_PACK) b = s->rank == root ? sc_packed(buf, count, dt, bytes, comm) : sc_alloc(bytes);
		int ok = sc_serve(s, SC_BCAST, b, b, bytes, root, NULL, NULL, NULL, NULL, 0, 0);
		if (k == SC_PACK) {
			if (ok && s->rank != root) sc_unpack(b, bytes, buf, count, dt, comm);
			free(b);
		}
		if (ok) return MPI_SUCCESS;
	}
	return PMPI_Bcast(buf, count, dt, root, comm);
}

int MPI_Bcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm) {
	if (sc_memo_pass(SC_BCAST, (uintptr_t)comm, (uintptr_t)dt, (uintptr_t)count, 0))
		return PMPI_Bcast(buf, count, dt, root, comm);
	return sc_bcast(buf, count, dt, root, comm);
}

// sc_blocks serves allgather, alltoall and gather (at the root): p blocks
// of block bytes arrive in rb (rcount elements of rt each); sb holds sn
// elements of st (NULL: in place, the rank's data already in rb).
static int sc_blocks(sc_state *s, int coll, int ks, int kr, const void *sb, int sn, MPI_Datatype st, void *rb,
                     int rcount, MPI_Datatype rt, int64_t block, int root, MPI_Comm comm) {
	int64_t all = block * s->size;
	int nr = rcount * s->size;
	void *send = sb == MPI_IN_PLACE ? NULL : (void *)sb, *recv = rb;
	if (send && ks == SC_PACK) send = sc_packed(sb, sn, st, block * (coll == SC_ALLTOALL ? s->size : 1), comm);
	if (recv && kr == SC_PACK) recv = send ? sc_alloc(all) : sc_packed(rb, nr, rt, all, comm);
	int ok = sc_serve(s, coll, send, recv, block, root, NULL, NULL, NULL, NULL, 0, 0);
	if (send && send != sb) free(send);
	if (recv && recv != rb) {
		if (ok) sc_unpack(recv, all, rb, nr, rt, comm);
		free(recv);
	}
	return ok;
}

// sc_all_blocks is an allgather or an alltoall after a miss of the pass
// memo, which it arms: served, or passed to the MPI. Each rank sends
// scount elements of st (alltoall: to each rank) and receives rcount of rt
// from each. The memo's keys are what the decision reads (in place: a
// sentinel for st).
static int sc_all_blocks(int coll, const void *sb, int scount, MPI_Datatype st, void *rb, int rcount,
                         MPI_Datatype rt, MPI_Comm comm) {
	uintptr_t kst = sb == MPI_IN_PLACE ? 1 : (uintptr_t)st;
	sc_memo_arm(coll, (uintptr_t)comm, (uintptr_t)rt, (uintptr_t)rcount, kst);
	sc_state *s = sc_state_of(comm, coll);
	if (s) {
		int64_t ssz = 0, rsz = 0;
		int kr = sc_move(rt, &rsz), ks = SC_SERVE;
		if (sb != MPI_IN_PLACE) ks = sc_move(st, &ssz);
		int sn = coll == SC_ALLTOALL ? scount * s->size : scount;
		if (sc_decide(s, coll, sc_join2(kr, ks), rcount * rsz) &&
		    sc_blocks(s, coll, ks, kr, sb, sn, st, rb, rcount, rt, rcount * rsz, 0, comm))
			return MPI_SUCCESS;
	}
	if (coll == SC_ALLTOALL) return PMPI_Alltoall(sb, scount, st, rb, rcount, rt, comm);
	return PMPI_Allgather(sb, scount, st, rb, rcount, rt, comm);
}

static __attribute__((noinline)) int sc_allgather(const void *sb, int scount, MPI_Datatype st, void *rb, int rcount,
                                                  MPI_Datatype rt, MPI_Comm comm) {
	return sc_all_blocks(SC_ALLGATHER, sb, scount, st, rb, rcount, rt, comm);
}

int MPI_Allgather(const void *sb, int scount, MPI_Datatype st, void *rb, int rcount, MPI_Datatype rt, MPI_Comm comm) {
	if (sc_memo_pass(SC_ALLGATHER, (uintptr_t)comm, (uintptr_t)rt, (uintptr_t)rcount,
	                 sb == MPI_IN_PLACE ? 1 : (uintptr_t)st))
		return PMPI_Allgather(sb, scount, st, rb, rcount, rt, comm);
	return sc_allgather(sb, scount, st, rb, rcount, rt, comm);
}

static __attribute__((noinline)) int sc_alltoall(const void *sb, int scount, MPI_Datatype st, void *rb, int rcount,
                                                 MPI_Datatype rt, MPI_Comm comm) {
	return sc_all_blocks(SC_ALLTOALL, sb, scount, st, rb, rcount, rt, comm);
}

int MPI_Alltoall(const void *sb, int scount, MPI_Datatype st, void *rb, int rcount, MPI_Datatype rt, MPI_Comm comm) {
	if (sc_memo_pass(SC_ALLTOALL, (uintptr_t)comm, (uintptr_t)rt, (uintptr_t)rcount,
	                 sb == MPI_IN_PLACE ? 1 : (uintptr_t)st))
		return PMPI_Alltoall(sb, scount, st, rb, rcount, rt, comm);
	return sc_alltoall(sb, scount, st, rb, rcount, rt, comm);
}

int MPI_Gather(const void *sb, int scount, MPI_Datatype st, void *rb, int rcount, MPI_Datatype rt, int root,
               MPI_Comm comm) {
	sc_state *s = sc_state_of(comm, SC_GATHER);
	if (s) {
		int64_t ssz = 0, rsz = 0;
		int ks = SC_SERVE, kr = SC_SERVE;
		if (s->rank == root) {
			kr = sc_move(rt, &rsz);
			if (sb != MPI_IN_PLACE) ks = sc_move(st, &ssz);
			if (sc_decide(s, SC_GATHER, sc_join2(kr, ks), rcount * rsz) &&
			    sc_blocks(s, SC_GATHER, ks, kr, sb, scount, st, rb, rcount, rt, rcount * rsz, root, comm))
				return MPI_SUCCESS;
		} else {
			ks = sc_move(st, &ssz);
			int64_t bytes = scount * ssz;
			if (sc_decide(s, SC_GATHER, ks, bytes)) {
				void *send = ks == SC_PACK ? sc_packed(sb, scount, st, bytes, comm) : (void *)sb;
				int ok = sc_serve(s, SC_GATHER, send, NULL, bytes, root, NULL, NULL, NULL, NULL, 0, 0);
				if (send != sb) free(send);
				if (ok) return MPI_SUCCESS;
			}
		}
	}
	return PMPI_Gather(sb, scount, st, rb, rcount, rt, root, comm);
}

int MPI_Scatter(const void *sb, int scount, MPI_Datatype st, void *rb, int rcount, MPI_Datatype rt, int root,
                MPI_Comm comm) {
	sc_state *s = sc_state_of(comm, SC_SCATTER);
	if (s) {
		int64_t ssz = 0, rsz = 0, bytes;
		int ks = SC_SERVE, kr = SC_SERVE;
		int inplace = s->rank == root && rb == MPI_IN_PLACE;
		if (s->rank == root) {
			ks = sc_move(st, &ssz);
			bytes = scount * ssz;
		} else {
			kr = sc_move(rt, &rsz);
			bytes = rcount * rsz;
		}
		if (s->rank == root && !inplace) kr = sc_move(rt, &rsz);
		if (sc_decide(s, SC_SCATTER, sc_join2(ks, kr), bytes)) {
			void *send = NULL, *recv = inplace ? NULL : rb;
			if (s->rank == root)
				send = ks == SC_PACK ? sc_packed(sb, scount * s->size, st, bytes * s->size, comm) : (void *)sb;
			if (recv && kr == SC_PACK) recv = sc_alloc(bytes);
			int ok = sc_serve(s, SC_SCATTER, send, recv, bytes, root, NULL, NULL, NULL, NULL, 0, 0);
			if (send && send != sb) free(send);
			if (recv && recv != rb) {
				if (ok) sc_unpack(recv, bytes, rb, rcount, rt, comm);
				free(recv);
			}
			if (ok) return MPI_SUCCESS;
		}
	}
	return PMPI_Scatter(sb, scount, st, rb, rcount, rt, root, comm);
}

// sc_layout fills packed displacements (in elements) for counts.
static int *sc_layout(const int *counts, int p) {
	int *d = sc_alloc(sizeof(int) * p);
	int o = 0;
	for (int i = 0; i < p; i++) {
		d[i] = o;
		o += counts[i];
	}
	return d;
}

static int64_t sc_extent(MPI_Datatype dt) {
	MPI_Aint lb = 0, extent = 0;
	PMPI_Type_get_extent(dt, &lb, &extent);
	return extent;
}

int MPI_Allgatherv(const void *sb, int scount, MPI_Datatype st, void *rb, const int rcounts[], const int displs[],
                   MPI_Datatype rt, MPI_Comm comm) {
	sc_state *s = sc_state_of(comm, SC_ALLGATHERV);
	if (s) {
		int64_t ssz = 0, rsz = 0, total = 0;
		int kr = sc_move(rt, &rsz), ks = SC_SERVE;
		if (sb != MPI_IN_PLACE) ks = sc_move(st, &ssz);
		for (int i = 0; i < s->size; i++) total += rcounts[i];
		if (sc_decide(s, SC_ALLGATHERV, sc_join2(kr, ks), total * rsz)) {
			int p = s->size;
			void *send = sb == MPI_IN_PLACE ? NULL : (void *)sb, *recv = rb;
			const int *d = displs;
			if (send && ks == SC_PACK) send = sc_packed(sb, scount, st, scount * ssz, comm);
			if (kr == SC_PACK) {
				// Packed blocks in rank order; in place, the own block is packed in.
				int *pd = sc_layout(rcounts, p);
				recv = sc_alloc(total * rsz);
				if (!send) {
					int pos = 0;
					PMPI_Pack((char *)rb + displs[s->rank] * sc_extent(rt), rcounts[s->rank], rt,
					          (char *)recv + pd[s->rank] * rsz, (int)(rcounts[s->rank] * rsz), &pos, comm);
				}
				d = pd;
			}
			int ok = sc_serve(s, SC_ALLGATHERV, send, recv, scount * ssz, 0, NULL, NULL, rcounts, d, ssz, rsz);
			if (send && send != sb) free(send);
			if (recv != rb) {
				int64_t ext = sc_extent(rt);
				for (int q = 0; ok && q < p; q++)
					sc_unpack((char *)recv + d[q] * rsz, rcounts[q] * rsz, (char *)rb + displs[q] * ext, rcounts[q], rt,
					          comm);
				free(recv);
				free((void *)d);
			}
			if (ok) return MPI_SUCCESS;
		}
	}
	return PMPI_Allgatherv(sb, scount, st, rb, rcounts, displs, rt, comm);
}

int MPI_Alltoallv(const void *sb, const int scounts[], const int sdispls[], MPI_Datatype st, void *rb,
                  const int rcounts[], const int rdispls[], MPI_Datatype rt, MPI_Comm comm) {
	sc_state *s = sc_state_of(comm, SC_ALLTOALLV);
	const void *sb0 = sb;
	const int *sc0 = scounts, *sd0 = sdispls;
	MPI_Datatype st0 = st;
	if (s) {
		// The bytes differ between ranks: the band's decision is taken in
		// the served call (sc_band_any), here only whether it has one.
		int64_t ssz = 0, rsz = 0;
		int kr = sc_move(rt, &rsz), ks = SC_SERVE;
		int inplace = sb == MPI_IN_PLACE;
		if (!inplace) ks = sc_move(st, &ssz);
		int k = sc_join2(kr, ks);
		if (k < 0 && !sc_band_any(SC_ALLTOALLV, s->size)) k = SC_PASS_SIZE;
		if (k >= 0) {
			sc_pass(SC_ALLTOALLV, k);
		} else {
			int p = s->size;
			void *send = inplace ? NULL : (void *)sb, *recv = rb;
			const int *sd = sdispls, *rd = rdispls;
			if (inplace && kr == SC_PACK) {
				// Send what recv holds, by the receive counts, packed.
				scounts = rcounts;
				ks = SC_PACK;
				st = rt;
				ssz = rsz;
				sb = rb;
				sdispls = rdispls;
			}
			if (ks == SC_PACK) {
				int *pd = sc_layout(scounts, p);
				int64_t tot = 0, ext = sc_extent(st);
				for (int q = 0; q < p; q++) tot += scounts[q];
				send = sc_alloc(tot * ssz);
				for (int q = 0; q < p; q++) {
					int pos = 0;
					if (scounts[q] > 0)
						PMPI_Pack((const char *)sb + sdispls[q] * ext, scounts[q], st, (char *)send + pd[q] * ssz,
						          (int)(scounts[q] * ssz), &pos, comm);
				}
				sd = pd;
			}
			if (kr == SC_PACK) {
				int *pd = sc_layout(rcounts, p);
				int64_t tot = 0;
				for (int q = 0; q < p; q++) tot += rcounts[q];
				recv = sc_alloc(tot * rsz);
				rd = pd;
			}
			int ok = sc_serve(s, SC_ALLTOALLV, send, recv, 0, 0, scounts, sd, rcounts, rd, ssz, rsz);
			if (sd != sdispls) {
				free(send);
				free((void *)sd);
			}
			if (recv != rb) {
				int64_t ext = sc_extent(rt);
				for (int q = 0; ok && q < p; q++)
					sc_unpack((char *)recv + rd[q] * rsz, rcounts[q] * rsz, (char *)rb + rdispls[q] * ext, rcounts[q], rt,
					          comm);
				free(recv);
				free((void *)rd);
			}
			if (ok) return MPI_SUCCESS;
		}
	}
	// The arguments as given: in place packed has replaced the send's.
	return PMPI_Alltoallv(sb0, sc0, sd0, st0, rb, rcounts, rdispls, rt, comm);
}

// ---- finalize ---------------------------------------------------------

int MPI_Finalize(void) {
	const char *e = getenv("SHMCOLL_MPI_STATS");
	int first = 0;
	if (e && !strcmp(e, "1")) {
		MPI_Comm node = MPI_COMM_NULL;
		int rank = 1;
		if (PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
			PMPI_Comm_rank(node, &rank);
			PMPI_Comm_free(&node);
		}
		first = rank == 0;
	}
	sc_done = 1;
	shmcollFinalize(first);
	return PMPI_Finalize();
}
