//go:build ignore

/*
 * mpicoll.c - the MPI side of `shmbench compare`: times MPI collectives with
 * the method of shmcoll's docs/DESIGN.md so that its numbers compare with
 * `shmbench run`. Embedded in the Go package internal/mpibench, which builds
 * it with mpicc.openmpi or mpicc.mpich and launches it with mpirun.
 *
 * One iteration is a barrier, then the collective, timed on each rank with
 * CLOCK_MONOTONIC. The barrier and the bookkeeping between sizes (the
 * maxima of elapsed times, the gathering of times and check results) call
 * the PMPI entry points: with an interposer such as libshmcoll preloaded
 * only the measured collective goes through it, and the barrier that starts
 * every iteration is the MPI's own, as in the run without it. With -b mpi
 * that barrier calls MPI_Barrier instead, as the Intel MPI Benchmarks and
 * the OSU benchmarks do, so that an interposer serves it too: how closely
 * the ranks leave the barrier is part of every iteration's time (the
 * earliest rank's timed call waits for the latest), and this shows what the
 * interposer's own barrier makes of it. An iteration's time is the slowest
 * rank's; per size the tool reports min, median, mean, max and p99 of that
 * over the iterations, and the span
 * (median over iterations of last rank's end minus first rank's start; the
 * clock is node-wide). `bytes` is the full vector, as nccl-tests count it:
 *   allreduce, reduce, bcast:  each rank's buffer
 *   reduce_scatter_block:      what each rank contributes (it keeps bytes/np)
 *   allgather:                 what each rank receives (it sends bytes/np)
 *   alltoall:                  what each rank sends (bytes/np to each rank)
 *   gather, scatter:           what the root receives or sends (bytes/np
 *                              from or to each rank; the root is rank 0)
 *   reduce_scatter, allgatherv: the whole vector, cut into the irregular
 *                              blocks of shmbench (m/2 + j*m/(np-1) elements
 *                              for rank j, m = bytes/np/element size)
 *   alltoallv:                 what each rank sends: rank q sends those
 *                              blocks rotated by q (rank t gets block
 *                              (t+q) mod np), as shmbench's matrix
 * Sizes are rounded to whole elements (and to np elements for the last two).
 *
 * Input data changes every iteration: one element, a different one each
 * time, gets an iteration-dependent value, and that element of the result is
 * checked after the iteration. Before timing, the receive buffer is
 * poisoned; after timing every element of the last result is checked. All
 * values are small integers, so sums are exact in every order and type.
 *
 * Output: JSON, one object per line, on rank 0's stdout. First a run line
 *   {"type":"run","impl":...,"library":...,"np":...,"dtype":...,"op":"sum"}
 * then one line per (collective, size)
 *   {"type":"result","coll":...,"algo":"mpi","impl":...,"np":...,"dtype":...,
 *    "op":"sum","bytes":...,"count":...,"iters":...,"min_us":...,
 *    "median_us":...,"mean_us":...,"max_us":...,"p99_us":...,"span_us":...,
 *    "algbw_GBps":...,"busbw_GBps":...,"check":"ok" or the error}
 * count is the element count of the call. A failed check is reported in its
 * line and makes the exit status 2 once all sizes have run.
 *
 * Usage: mpicoll [-c coll,...|all] [-s bytes,...] [-n iters] [-t seconds]
 *                [-w warmup_seconds] [-x maxiters] [-d float64|float32|int32|int64]
 *                [-b pmpi|mpi] [-j iteration]
 * -j K is a test hook: rank 0 corrupts its result after timed iteration K,
 * which the checks must report.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { ALLREDUCE, RSB, ALLGATHER, BCAST, REDUCE, BARRIER, ALLTOALL, RS, ALLGATHERV, ALLTOALLV, GATHER, SCATTER, NCOLL };
static const char *const names[NCOLL] = {
	"allreduce", "reduce_scatter_block", "allgather", "bcast", "reduce", "barrier", "alltoall",
	"reduce_scatter", "allgatherv", "alltoallv", "gather", "scatter",
};

static int rank, np;

/* The irregular blocks of reduce_scatter and allgatherv (counts and packed
 * displacements, in elements), the same on every rank; for alltoallv, what
 * this rank sends to (and, the counts being symmetric, receives from) each
 * rank. */
static int *vcount, *vdispl;
static size_t vm; /* the m of the irregular blocks */

/* a2av(q, t): the elements rank q sends to rank t in alltoallv; a2av(0, j)
 * is block j of reduce_scatter and allgatherv. */
static size_t a2av(int q, int t)
{
	return np > 1 ? vm / 2 + (size_t)((t + q) % np) * vm / (size_t)(np - 1) : vm;
}

/* a2avoff(q, t): where they start in rank q's send buffer. */
static size_t a2avoff(int q, int t)
{
	size_t o = 0;
	for (int u = 0; u < t; u++) o += a2av(q, u);
	return o;
}

/* The element type, chosen at run time; values pass through double. */
static struct {
	const char *name;
	MPI_Datatype mpi;
	size_t size;
	int kind; /* 0 double, 1 float, 2 int32, 3 int64 */
} dt;

static void put(void *buf, size_t i, double v)
{
	switch (dt.kind) {
	case 0: ((double *)buf)[i] = v; break;
	case 1: ((float *)buf)[i] = (float)v; break;
	case 2: ((int32_t *)buf)[i] = (int32_t)v; break;
	default: ((int64_t *)buf)[i] = (int64_t)v; break;
	}
}

static double get(const void *buf, size_t i)
{
	switch (dt.kind) {
	case 0: return ((const double *)buf)[i];
	case 1: return ((const float *)buf)[i];
	case 2: return ((const int32_t *)buf)[i];
	default: return (double)((const int64_t *)buf)[i];
	}
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void die(const char *msg)
{
	fprintf(stderr, "mpicoll: rank %d: %s\n", rank, msg);
	MPI_Abort(MPI_COMM_WORLD, 1);
}

static void *xalloc(size_t bytes)
{
	void *p = NULL;
	if (posix_memalign(&p, 4096, bytes ? bytes : 64) != 0) die("out of memory");
	memset(p, 0, bytes ? bytes : 64); /* first touch outside the timing */
	return p;
}

/*
 * Values. Element j of rank r's input; the touched element of iteration k
 * (index k mod n) adds bump(k) scaled by the rank, so the result changes
 * every iteration. The largest sum stays far below 2^24, exact in float32.
 */
#define POISON (-7.0)
static double red_in(int r, size_t j) { return (double)((r + 1) * (int)(j % 61 + 1)); }
static double gat_in(int r, size_t j) { return (double)((r * 131 + (int)(j % 8191)) % 8191); }
static double bc_in(size_t j) { return (double)(j % 8191 + 1); }
static double bump(long k) { return (double)(k % 5 + 1); }

/* One benchmark case: a collective at one size. */
struct kase {
	int coll;
	size_t count; /* element count passed to MPI (the regular block m for the v-variants) */
	size_t total; /* reduce_scatter and allgatherv: the elements of the whole vector */
	size_t bytes; /* the full vector, docs/DESIGN.md's convention */
	void *sbuf, *rbuf;
};

/* in_len(c, r): the elements of rank r's input. */
static size_t in_len(const struct kase *c, int r)
{
	switch (c->coll) {
	case RSB: case ALLTOALL: case SCATTER: return c->count * (size_t)np;
	case RS: return c->total;
	case ALLGATHERV: return (size_t)vcount[r];
	case ALLTOALLV: return c->total;
	}
	return c->count;
}

/* owner returns the irregular block that holds element i. */
static int owner(size_t i)
{
	int q = np - 1; /* the last block that starts at or before i: not an empty one */
	while (q > 0 && (size_t)vdispl[q] > i) q--;
	return q;
}

/* input(r, j, k): rank r's element j in iteration k (k < 0: untouched). */
static double input(const struct kase *c, int r, size_t j, long k)
{
	size_t n = in_len(c, r);
	int touched = k >= 0 && n > 0 && j == (size_t)k % n;
	switch (c->coll) {
	case ALLGATHER: case ALLTOALL: case ALLGATHERV: case ALLTOALLV: case GATHER: case SCATTER:
		return gat_in(r, j) + (touched ? bump(k) : 0);
	case BCAST: return bc_in(j) + (touched ? 7 * bump(k) : 0);
	default: return red_in(r, j) + (touched ? (r + 1) * bump(k) : 0);
	}
}

/* Expected element i of the receive buffer after iteration k. */
static double expected(const struct kase *c, size_t i, long k)
{
	double s = 0;
	int r;
	switch (c->coll) {
	case ALLREDUCE:
	case REDUCE:
		for (r = 0; r < np; r++) s += input(c, r, i, k);
		return s;
	case RSB:
		for (r = 0; r < np; r++) s += input(c, r, (size_t)rank * c->count + i, k);
		return s;
	case ALLGATHER: case GATHER:
		return input(c, (int)(i / c->count), i % c->count, k);
	case SCATTER:
		return input(c, 0, (size_t)rank * c->count + i, k);
	case BCAST:
		return input(c, 0, i, k);
	case RS:
		for (r = 0; r < np; r++) s += input(c, r, (size_t)vdispl[rank] + i, k);
		return s;
	case ALLGATHERV: {
		int q = owner(i);
		return input(c, q, i - (size_t)vdispl[q], k);
	}
	case ALLTOALLV: { /* block q of the result comes from rank q's block for this rank */
		int q = owner(i);
		return input(c, q, a2avoff(q, rank) + i - (size_t)vdispl[q], k);
	}
	case ALLTOALL: /* block q of the result is block `rank` of rank q's input */
		return input(c, (int)(i / c->count), (size_t)rank * c->count + i % c->count, k);
	}
	return 0;
}

/* Elements of the receive buffer this rank checks. */
static size_t result_len(const struct kase *c)
{
	switch (c->coll) {
	case ALLREDUCE: case BCAST: case RSB: case SCATTER: return c->count;
	case GATHER: return rank == 0 ? c->count * (size_t)np : 0;
	case REDUCE: return rank == 0 ? c->count : 0;
	case ALLGATHER: case ALLTOALL: return c->count * (size_t)np;
	case RS: return (size_t)vcount[rank];
	case ALLGATHERV: case ALLTOALLV: return c->total;
	}
	return 0;
}

/* Where the send data of rank `rank` lives (bcast's root sends from rbuf). */
static void set_input(struct kase *c, size_t j, long k)
{
	if (c->coll == BCAST) {
		if (rank == 0) put(c->rbuf, j, input(c, 0, j, k));
	} else {
		put(c->sbuf, j, input(c, rank, j, k));
	}
}

static void prepare(struct kase *c)
{
	size_t n = in_len(c, rank), j;
	if (c->coll == BARRIER) return;
	for (j = 0; j < n; j++) set_input(c, j, -1);
	for (j = 0; j < result_len(c); j++)
		if (!(c->coll == BCAST && rank == 0)) put(c->rbuf, j, POISON);
}

/* Iteration k changes one input element and undoes iteration k-1's change. */
static void touch(struct kase *c, long k)
{
	size_t n = in_len(c, rank);
	if (c->coll == BARRIER || n == 0) return;
	if (k > 0) set_input(c, (size_t)(k - 1) % n, -1);
	set_input(c, (size_t)k % n, k);
}

static void run(const struct kase *c)
{
	int n = (int)c->count;
	switch (c->coll) {
	case ALLREDUCE: MPI_Allreduce(c->sbuf, c->rbuf, n, dt.mpi, MPI_SUM, MPI_COMM_WORLD); break;
	case RSB: MPI_Reduce_scatter_block(c->sbuf, c->rbuf, n, dt.mpi, MPI_SUM, MPI_COMM_WORLD); break;
	case ALLGATHER: MPI_Allgather(c->sbuf, n, dt.mpi, c->rbuf, n, dt.mpi, MPI_COMM_WORLD); break;
	case BCAST: MPI_Bcast(c->rbuf, n, dt.mpi, 0, MPI_COMM_WORLD); break;
	case REDUCE: MPI_Reduce(c->sbuf, c->rbuf, n, dt.mpi, MPI_SUM, 0, MPI_COMM_WORLD); break;
	case BARRIER: MPI_Barrier(MPI_COMM_WORLD); break;
	case ALLTOALL: MPI_Alltoall(c->sbuf, n, dt.mpi, c->rbuf, n, dt.mpi, MPI_COMM_WORLD); break;
	case RS: MPI_Reduce_scatter(c->sbuf, c->rbuf, vcount, dt.mpi, MPI_SUM, MPI_COMM_WORLD); break;
	case GATHER: MPI_Gather(c->sbuf, n, dt.mpi, c->rbuf, n, dt.mpi, 0, MPI_COMM_WORLD); break;
	case SCATTER: MPI_Scatter(c->sbuf, n, dt.mpi, c->rbuf, n, dt.mpi, 0, MPI_COMM_WORLD); break;
	case ALLGATHERV:
		MPI_Allgatherv(c->sbuf, vcount[rank], dt.mpi, c->rbuf, vcount, vdispl, dt.mpi, MPI_COMM_WORLD);
		break;
	case ALLTOALLV:
		MPI_Alltoallv(c->sbuf, vcount, vdispl, dt.mpi, c->rbuf, vcount, vdispl, dt.mpi, MPI_COMM_WORLD);
		break;
	}
}

/* The result elements iteration k changed on this rank: checked every time. */
static long check_touched(const struct kase *c, long k, size_t *bad_at)
{
	size_t len = result_len(c), i;
	long bad = 0;
	if (len == 0) return 0;
	if (c->coll == ALLGATHER || c->coll == GATHER) {
		for (int r = 0; r < np; r++) {
			i = (size_t)r * c->count + (size_t)k % c->count;
			if (get(c->rbuf, i) != expected(c, i, k)) { *bad_at = i; bad++; }
		}
		return bad;
	}
	if (c->coll == ALLGATHERV) {
		for (int r = 0; r < np; r++) {
			if (vcount[r] == 0) continue;
			i = (size_t)vdispl[r] + (size_t)k % (size_t)vcount[r];
			if (get(c->rbuf, i) != expected(c, i, k)) { *bad_at = i; bad++; }
		}
		return bad;
	}
	if (c->coll == ALLTOALLV) {
		/* Each rank touched element t of its input, which goes to the rank
		 * whose block of that sender holds it; a rank it misses checks an
		 * element that moves with k. */
		size_t t = (size_t)k % c->total;
		int hit = 0;
		for (int q = 0; q < np; q++) {
			size_t o = a2avoff(q, rank);
			if (t < o || t >= o + a2av(q, rank)) continue;
			i = (size_t)vdispl[q] + t - o;
			hit = 1;
			if (get(c->rbuf, i) != expected(c, i, k)) { *bad_at = i; bad++; }
		}
		if (!hit) {
			i = (size_t)k % len;
			if (get(c->rbuf, i) != expected(c, i, k)) { *bad_at = i; bad++; }
		}
		return bad;
	}
	if (c->coll == RS) {
		/* The touched input element lands in one rank's block; the others
		 * check an element of theirs that moves with k. */
		size_t t = (size_t)k % c->total;
		i = owner(t) == rank ? t - (size_t)vdispl[rank] : (size_t)k % len;
		if (get(c->rbuf, i) != expected(c, i, k)) { *bad_at = i; bad++; }
		return bad;
	}
	if (c->coll == ALLTOALL) {
		/* Every rank touched input element t, which lands in rank t / count's
		 * result, once per sending rank; the other ranks check an element
		 * of each block that moves with k. */
		size_t t = (size_t)k % (c->count * (size_t)np);
		size_t j = t / c->count == (size_t)rank ? t % c->count : (size_t)k % c->count;
		for (int r = 0; r < np; r++) {
			i = (size_t)r * c->count + j;
			if (get(c->rbuf, i) != expected(c, i, k)) { *bad_at = i; bad++; }
		}
		return bad;
	}
	if (c->coll == RSB || c->coll == SCATTER) {
		/* The touched input element lands in one rank's block; the others
		 * check an element of theirs that moves with k. */
		size_t t = (size_t)k % (c->count * (size_t)np);
		i = t / c->count == (size_t)rank ? t % c->count : (size_t)k % c->count;
	} else {
		i = (size_t)k % c->count;
	}
	if (get(c->rbuf, i) != expected(c, i, k)) { *bad_at = i; bad++; }
	return bad;
}

static long check_all(const struct kase *c, long k, size_t *bad_at)
{
	size_t len = result_len(c), i;
	long bad = 0;
	for (i = 0; i < len; i++)
		if (get(c->rbuf, i) != expected(c, i, k)) { if (!bad) *bad_at = i; bad++; }
	return bad;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* JSON string with the characters JSON requires escaped. */
static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\') printf("\\%c", ch);
		else if (ch < 0x20) printf("\\u%04x", ch);
		else putchar(ch);
	}
	putchar('"');
}

static double *xdoubles(long n)
{
	double *p = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
	if (!p) die("out of memory");
	return p;
}

/* timing_barrier is the barrier before every iteration: the MPI's own
 * (PMPI_Barrier), or with -b mpi MPI_Barrier, which an interposer serves. */
static int (*timing_barrier)(MPI_Comm) = PMPI_Barrier;

int main(int argc, char **argv)
{
	int want[NCOLL] = {0}, any = 0, i, c;
	size_t sizes[256], nsizes = 0, maxbytes = 0;
	long fixed = 0, maxiters = 200000, inject = -1;
	double target = 0.3, warm = 0.02;
	char impl[64], lib[MPI_MAX_LIBRARY_VERSION_STRING + 1];
	int len, failed = 0;

	int provided;
	MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &np);
	vcount = calloc((size_t)np, sizeof(int));
	vdispl = calloc((size_t)np, sizeof(int));
	if (!vcount || !vdispl) die("out of memory");
#if defined(OPEN_MPI)
	snprintf(impl, sizeof impl, "openmpi-%d.%d.%d", OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION, OMPI_RELEASE_VERSION);
#elif defined(MPICH_VERSION)
	snprintf(impl, sizeof impl, "mpich-%s", MPICH_VERSION);
#else
	snprintf(impl, sizeof impl, "mpi");
#endif
	dt.name = "float64"; dt.mpi = MPI_DOUBLE; dt.size = 8; dt.kind = 0;

	for (i = 1; i + 1 < argc; i += 2) {
		const char *f = argv[i], *v = argv[i + 1];
		if (!strcmp(f, "-c")) {
			char *dup = strdup(v), *save = NULL, *tok;
			for (tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
				int found = 0;
				for (c = 0; c < NCOLL; c++)
					if (!strcmp(tok, "all") || !strcmp(tok, names[c])) { want[c] = 1; found = 1; }
				if (!found) die("unknown collective in -c");
			}
			free(dup);
			any = 1;
		} else if (!strcmp(f, "-s")) {
			char *dup = strdup(v), *save = NULL, *tok;
			for (tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
				char *end;
				unsigned long long b = strtoull(tok, &end, 10);
				if (*end || nsizes == sizeof sizes / sizeof sizes[0]) die("bad -s (byte counts, at most 256)");
				sizes[nsizes++] = (size_t)b;
			}
			free(dup);
		} else if (!strcmp(f, "-n")) {
			fixed = atol(v);
		} else if (!strcmp(f, "-t")) {
			target = atof(v);
		} else if (!strcmp(f, "-w")) {
			warm = atof(v);
		} else if (!strcmp(f, "-b")) {
			if (!strcmp(v, "pmpi")) timing_barrier = PMPI_Barrier;
			else if (!strcmp(v, "mpi")) timing_barrier = MPI_Barrier;
			else die("bad -b (pmpi or mpi)");
		} else if (!strcmp(f, "-j")) {
			inject = atol(v);
		} else if (!strcmp(f, "-x")) {
			maxiters = atol(v);
		} else if (!strcmp(f, "-d")) {
			if (!strcmp(v, "float64")) { dt.mpi = MPI_DOUBLE; dt.size = 8; dt.kind = 0; }
			else if (!strcmp(v, "float32")) { dt.mpi = MPI_FLOAT; dt.size = 4; dt.kind = 1; }
			else if (!strcmp(v, "int32")) { dt.mpi = MPI_INT32_T; dt.size = 4; dt.kind = 2; }
			else if (!strcmp(v, "int64")) { dt.mpi = MPI_INT64_T; dt.size = 8; dt.kind = 3; }
			else die("bad -d (float64, float32, int32, int64)");
			dt.name = v;
		} else {
			die("usage: mpicoll [-c coll,...|all] [-s bytes,...] [-n iters] [-t seconds] [-w seconds] [-x maxiters] [-d dtype] [-b pmpi|mpi]");
		}
	}
	if (i != argc) die("flags come in pairs");
	if (!any) for (c = 0; c < NCOLL; c++) want[c] = 1;
	if (nsizes == 0) for (size_t b = 8; b <= (64u << 20); b *= 8) sizes[nsizes++] = b;
	if (fixed > 0) maxiters = fixed;
	if (maxiters < 1) maxiters = 1;
	for (size_t s = 0; s < nsizes; s++) if (sizes[s] > maxbytes) maxbytes = sizes[s];

	if (rank == 0) {
		MPI_Get_library_version(lib, &len);
		lib[len < (int)sizeof lib ? len : (int)sizeof lib - 1] = 0;
		char *nl = strchr(lib, '\n');
		if (nl) *nl = 0;
		printf("{\"type\":\"run\",\"impl\":");
		json_str(impl);
		printf(",\"library\":");
		json_str(lib);
		printf(",\"np\":%d,\"dtype\":\"%s\",\"op\":\"sum\",\"clock\":\"CLOCK_MONOTONIC\"}\n", np, dt.name);
		fflush(stdout);
	}

	size_t bufbytes = maxbytes + (size_t)np * dt.size;
	void *sbuf = xalloc(bufbytes), *rbuf = xalloc(bufbytes);
	double *t0 = xdoubles(maxiters), *t1 = xdoubles(maxiters), *dur = xdoubles(maxiters);
	double *dmax = xdoubles(maxiters), *smin = xdoubles(maxiters), *emax = xdoubles(maxiters);

	for (c = 0; c < NCOLL; c++) {
		if (!want[c]) continue;
		size_t last = (size_t)-1;
		for (size_t s = 0; s < nsizes; s++) {
			struct kase k = { .coll = c, .sbuf = sbuf, .rbuf = rbuf };
			size_t n = sizes[s] / dt.size;
			if (c == RSB || c == ALLGATHER || c == ALLTOALL || c == GATHER || c == SCATTER) {
				k.count = n / (size_t)np ? n / (size_t)np : 1;
				k.bytes = k.count * (size_t)np * dt.size;
			} else if (c == RS || c == ALLGATHERV || c == ALLTOALLV) {
				/* The irregular blocks; alltoallv's rotated by the rank. */
				vm = n / (size_t)np ? n / (size_t)np : 1;
				k.count = vm;
				k.total = 0;
				for (int t = 0; t < np; t++) {
					size_t ct = a2av(c == ALLTOALLV ? rank : 0, t);
					if (ct > 0x7fffffff) die("size too large for an int count");
					vcount[t] = (int)ct;
					vdispl[t] = (int)k.total;
					k.total += ct;
				}
				if (k.total > 0x7fffffff) die("size too large for an int count");
				k.bytes = k.total * dt.size;
			} else if (c == BARRIER) {
				k.count = 0;
				k.bytes = 0;
			} else {
				k.count = n ? n : 1;
				k.bytes = k.count * dt.size;
			}
			if (k.bytes == last) continue; /* rounding made a duplicate */
			last = k.bytes;
			if (k.count > 0x7fffffff) die("size too large for an int count");

			/* Warm-up: doubling batches until one lasts `warm` seconds on the slowest rank. */
			prepare(&k);
			long batch = 1, it = 0;
			for (;;) {
				double a = now(), el, elmax;
				for (long b = 0; b < batch; b++) {
					touch(&k, it++);
					timing_barrier(MPI_COMM_WORLD);
					run(&k);
				}
				el = now() - a;
				PMPI_Allreduce(&el, &elmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
				if (elmax >= warm || batch >= (1L << 16)) {
					double per = elmax / (double)batch;
					batch = per > 0 ? (long)(target / per / 8) : 1;
					break;
				}
				batch *= 2;
			}
			if (batch < 1) batch = 1;

			/* Timed iterations: chunks until the slowest rank has spent `target` seconds. */
			prepare(&k);
			PMPI_Barrier(MPI_COMM_WORLD);
			long iters = 0, bad = 0;
			size_t bad_at = 0;
			double start = now();
			for (;;) {
				long chunk = fixed > 0 ? fixed : batch;
				for (long b = 0; b < chunk && iters < maxiters; b++) {
					touch(&k, iters);
					timing_barrier(MPI_COMM_WORLD);
					double a = now();
					run(&k);
					double e = now();
					t0[iters] = a;
					t1[iters] = e;
					dur[iters] = e - a;
					if (iters == inject && rank == 0)
						for (size_t j = 0; j < result_len(&k); j++) put(k.rbuf, j, POISON);
					bad += check_touched(&k, iters, &bad_at);
					iters++;
				}
				if (fixed > 0 || iters >= maxiters) break;
				double el = now() - start, elmax;
				PMPI_Allreduce(&el, &elmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
				if (elmax >= target && iters >= 5) break;
			}
			bad += check_all(&k, iters - 1, &bad_at);

			PMPI_Reduce(dur, dmax, (int)iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
			PMPI_Reduce(t0, smin, (int)iters, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
			PMPI_Reduce(t1, emax, (int)iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

			/* Rank 0 learns the first failing rank and what it saw. */
			long fail[3] = { bad ? rank : np, (long)bad_at, bad }, first[3];
			{
				long key = fail[0], minkey;
				PMPI_Allreduce(&key, &minkey, 1, MPI_LONG, MPI_MIN, MPI_COMM_WORLD);
				if (minkey != np && minkey != 0) {
					if (rank == minkey) PMPI_Send(fail, 3, MPI_LONG, 0, 9, MPI_COMM_WORLD);
					if (rank == 0) PMPI_Recv(first, 3, MPI_LONG, (int)minkey, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				} else {
					memcpy(first, fail, sizeof first);
				}
			}

			if (rank == 0) {
				double sum = 0;
				for (long j = 0; j < iters; j++) {
					sum += dmax[j];
					emax[j] -= smin[j]; /* span of iteration j */
				}
				qsort(dmax, (size_t)iters, sizeof(double), cmp);
				qsort(emax, (size_t)iters, sizeof(double), cmp);
#define MEDIAN(a) (iters % 2 ? (a)[iters / 2] : 0.5 * ((a)[iters / 2 - 1] + (a)[iters / 2]))
				long p99 = (long)((double)iters * 0.99 + 0.999999) - 1;
				if (p99 < 0) p99 = 0;
				double med = MEDIAN(dmax), span = MEDIAN(emax);
				double f = 1;
				if (c == ALLREDUCE) f = 2.0 * (np - 1) / np;
				else if (c == RSB || c == ALLGATHER || c == ALLTOALL || c == RS || c == ALLGATHERV || c == ALLTOALLV || c == GATHER || c == SCATTER)
					f = (double)(np - 1) / np;
				double algbw = med > 0 ? (double)k.bytes / med / 1e9 : 0;
				printf("{\"type\":\"result\",\"coll\":\"%s\",\"algo\":\"mpi\",\"impl\":", names[c]);
				json_str(impl);
				printf(",\"np\":%d,\"dtype\":\"%s\",\"op\":\"sum\",\"bytes\":%zu,\"count\":%zu,\"iters\":%ld,"
				       "\"min_us\":%.4f,\"median_us\":%.4f,\"mean_us\":%.4f,\"max_us\":%.4f,\"p99_us\":%.4f,"
				       "\"span_us\":%.4f,\"algbw_GBps\":%.4f,\"busbw_GBps\":%.4f,\"check\":",
				       np, c == BARRIER ? "none" : dt.name, k.bytes, k.count, iters,
				       dmax[0] * 1e6, med * 1e6, sum / (double)iters * 1e6, dmax[iters - 1] * 1e6,
				       dmax[p99] * 1e6, span * 1e6, algbw, algbw * f);
				if (first[0] == np) {
					printf("\"ok\"}\n");
				} else {
					char msg[160];
					snprintf(msg, sizeof msg, "rank %ld: %ld wrong elements, e.g. index %ld", first[0], first[2], first[1]);
					json_str(msg);
					printf("}\n");
					failed = 1;
				}
				fflush(stdout);
			}
			if (c == BARRIER) break;
		}
	}
	free(t0); free(t1); free(dur); free(dmax); free(smin); free(emax);
	free(sbuf); free(rbuf);
	PMPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
	MPI_Finalize();
	return failed ? 2 : 0;
}
