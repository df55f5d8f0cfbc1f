/*
 * Every collective libshmcoll intercepts, checked element by element against
 * results computed locally: each rank can compute every rank's input, so the
 * expected value of every element is known exactly.
 *
 * Covered: the reductions (Allreduce, Reduce, Reduce_scatter_block,
 * Reduce_scatter, Scan, Exscan) with every predefined operator on every
 * predefined type it applies to (C integers, multi-language integers,
 * floating types, C_BOOL, Fortran INTEGER/REAL/DOUBLE PRECISION/LOGICAL and
 * the sized ones, byte, complex, the pair types of MINLOC/MAXLOC) and with
 * user operators (a commutative one, and a non-commutative one whose result
 * shows the order of the operands); the data movers (Bcast, Allgather,
 * Allgatherv, Alltoall, Alltoallv, Gather, Scatter) on several types, also
 * with a derived type on one rank against a basic one on the others (equal
 * type signatures, which MPI allows); Barrier, checked through a counter in
 * shared memory. Every call that allows MPI_IN_PLACE runs with and without
 * it, roots rotate, counts go from 0 to a few MiB, and everything runs on
 * MPI_COMM_WORLD and on a communicator whose rank order is reversed.
 *
 * Usage: colls [-big=BYTES] [-oporder] BARRIER_FILE
 * BARRIER_FILE is an empty file all ranks can map. -oporder runs only the
 * check of user operators created in different orders on different ranks. Rank 0 prints
 * " No Errors" when every check passed; a rank that found an error exits 1.
 */
#include <complex.h>
#include <fcntl.h>
#include <limits.h>
#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int wrank, wsize, errs;
static const char *where = "";

#define FAIL(...)                                                       \
    do {                                                                \
        if (errs++ < 30) {                                              \
            fprintf(stderr, "rank %d: %s: ", wrank, where);             \
            fprintf(stderr, __VA_ARGS__);                               \
            fputc('\n', stderr);                                        \
        }                                                               \
    } while (0)

/* With COLLS_TRACE set in the environment, every rank prints each call's
 * description before making it, to find the call a crash or hang is in. */
static int tracing;

static void trace(const char *what)
{
    if (tracing)
        fprintf(stderr, "rank %d: %s\n", wrank, what);
}

/* ---- types ---------------------------------------------------------- */

enum kind { K_SINT, K_UINT, K_FLOAT, K_DOUBLE, K_LDOUBLE, K_BOOL, K_CFLOAT, K_CDOUBLE };

/* Operator classes of MPI's table "predefined reduction operators". */
enum { C_INT = 1, C_FINT = 2, C_FLT = 4, C_LOG = 8, C_BYTE = 16, C_CPLX = 32, C_ML = 64 };

typedef struct {
    const char *name;
    MPI_Datatype dt;
    enum kind kind;
    int size;
    int cls;
} type_t;

static type_t types[64];
static int ntypes;

static void add_type(const char *name, MPI_Datatype dt, enum kind kind, int size, int cls)
{
    int s;
    if (dt == MPI_DATATYPE_NULL)
        return;
    MPI_Type_size(dt, &s);
    if (s != size) /* a Fortran type this MPI was built without */
        return;
    types[ntypes++] = (type_t) { name, dt, kind, size, cls };
}

#define T(dt, kind, ctype, cls) add_type(#dt, dt, kind, sizeof(ctype), cls)

static void init_types(void)
{
    /* Outside the standard's table of operators, but both MPIs reduce
     * MPI_CHAR as C's char with every predefined operator. */
    T(MPI_CHAR, CHAR_MIN < 0 ? K_SINT : K_UINT, char, C_INT);
    T(MPI_SIGNED_CHAR, K_SINT, signed char, C_INT);
    T(MPI_UNSIGNED_CHAR, K_UINT, unsigned char, C_INT);
    T(MPI_SHORT, K_SINT, short, C_INT);
    T(MPI_UNSIGNED_SHORT, K_UINT, unsigned short, C_INT);
    T(MPI_INT, K_SINT, int, C_INT);
    T(MPI_UNSIGNED, K_UINT, unsigned, C_INT);
    T(MPI_LONG, K_SINT, long, C_INT);
    T(MPI_UNSIGNED_LONG, K_UINT, unsigned long, C_INT);
    T(MPI_LONG_LONG, K_SINT, long long, C_INT);
    T(MPI_UNSIGNED_LONG_LONG, K_UINT, unsigned long long, C_INT);
    T(MPI_INT8_T, K_SINT, int8_t, C_INT);
    T(MPI_INT16_T, K_SINT, int16_t, C_INT);
    T(MPI_INT32_T, K_SINT, int32_t, C_INT);
    T(MPI_INT64_T, K_SINT, int64_t, C_INT);
    T(MPI_UINT8_T, K_UINT, uint8_t, C_INT);
    T(MPI_UINT16_T, K_UINT, uint16_t, C_INT);
    T(MPI_UINT32_T, K_UINT, uint32_t, C_INT);
    T(MPI_UINT64_T, K_UINT, uint64_t, C_INT);
    T(MPI_AINT, K_SINT, MPI_Aint, C_ML);
    T(MPI_OFFSET, K_SINT, MPI_Offset, C_ML);
    T(MPI_COUNT, K_SINT, MPI_Count, C_ML);
    T(MPI_FLOAT, K_FLOAT, float, C_FLT);
    T(MPI_DOUBLE, K_DOUBLE, double, C_FLT);
    T(MPI_LONG_DOUBLE, K_LDOUBLE, long double, C_FLT);
    T(MPI_C_BOOL, K_BOOL, bool, C_LOG);
    T(MPI_BYTE, K_UINT, unsigned char, C_BYTE);
    T(MPI_C_FLOAT_COMPLEX, K_CFLOAT, float complex, C_CPLX);
    T(MPI_C_DOUBLE_COMPLEX, K_CDOUBLE, double complex, C_CPLX);
    /* Fortran's types, with gfortran's C equivalents. */
    T(MPI_INTEGER, K_SINT, int32_t, C_FINT);
    T(MPI_INTEGER1, K_SINT, int8_t, C_FINT);
    T(MPI_INTEGER2, K_SINT, int16_t, C_FINT);
    T(MPI_INTEGER4, K_SINT, int32_t, C_FINT);
    T(MPI_INTEGER8, K_SINT, int64_t, C_FINT);
    T(MPI_REAL, K_FLOAT, float, C_FLT);
    T(MPI_DOUBLE_PRECISION, K_DOUBLE, double, C_FLT);
    T(MPI_REAL4, K_FLOAT, float, C_FLT);
    T(MPI_REAL8, K_DOUBLE, double, C_FLT);
    T(MPI_LOGICAL, K_SINT, int32_t, C_LOG);
}

/* ---- operators ------------------------------------------------------ */

enum { O_SUM, O_PROD, O_MAX, O_MIN, O_LAND, O_LOR, O_LXOR, O_BAND, O_BOR, O_BXOR,
    O_NPREDEF, O_UADD1 = O_NPREDEF, O_UAFFINE, O_UAFFINE2, O_NOPS };

typedef struct {
    const char *name;
    MPI_Op op;
    int cls;
} op_t;

static op_t ops[O_NOPS];

/* a ⊕ b = a + b + 1, commutative and associative: the result differs from
 * MPI_SUM's, so serving it as MPI_SUM shows. */
static void uadd1(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    if (*dt == MPI_INT) {
        int *a = in, *b = inout;
        for (int i = 0; i < *len; i++)
            b[i] = a[i] + b[i] + 1;
    } else if (*dt == MPI_DOUBLE) {
        double *a = in, *b = inout;
        for (int i = 0; i < *len; i++)
            b[i] = a[i] + b[i] + 1;
    } else {
        FAIL("uadd1 called with an unexpected datatype");
    }
}

/* An element (a, b) packed in a uint64 is the map t -> a*t + b mod 2^32;
 * x ∘ y is composition, x(y(t)): associative, not commutative. MPI computes
 * inoutvec = invec op inoutvec, invec holding the lower ranks' part. */
static uint64_t compose(uint64_t x, uint64_t y)
{
    uint32_t a1 = x >> 32, b1 = x, a2 = y >> 32, b2 = y;
    return (uint64_t) (uint32_t) (a1 * a2) << 32 | (uint32_t) (a1 * b2 + b1);
}

static void uaffine(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    if (*dt != MPI_UINT64_T) {
        FAIL("uaffine called with an unexpected datatype");
        return;
    }
    uint64_t *a = in, *b = inout;
    for (int i = 0; i < *len; i++)
        b[i] = compose(a[i], b[i]);
}

/* The same operator created a second time after another was freed, so that
 * operators known by creation order are told apart. */
static void uaffine2(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    uaffine(in, inout, len, dt);
}

static MPI_Op op_spare;

static void init_ops(void)
{
    op_t predef[] = {
        { "MPI_SUM", MPI_SUM, C_INT | C_FINT | C_FLT | C_CPLX | C_ML },
        { "MPI_PROD", MPI_PROD, C_INT | C_FINT | C_FLT | C_CPLX | C_ML },
        { "MPI_MAX", MPI_MAX, C_INT | C_FINT | C_FLT | C_ML },
        { "MPI_MIN", MPI_MIN, C_INT | C_FINT | C_FLT | C_ML },
        { "MPI_LAND", MPI_LAND, C_INT | C_LOG },
        { "MPI_LOR", MPI_LOR, C_INT | C_LOG },
        { "MPI_LXOR", MPI_LXOR, C_INT | C_LOG },
        { "MPI_BAND", MPI_BAND, C_INT | C_FINT | C_BYTE | C_ML },
        { "MPI_BOR", MPI_BOR, C_INT | C_FINT | C_BYTE | C_ML },
        { "MPI_BXOR", MPI_BXOR, C_INT | C_FINT | C_BYTE | C_ML },
    };
    memcpy(ops, predef, sizeof predef);
    /* User operators apply to the types their functions accept (checked in
     * the tests, not through cls). */
    ops[O_UADD1].name = "uadd1 (commutative)";
    MPI_Op_create(uadd1, 1, &ops[O_UADD1].op);
    MPI_Op_create(uadd1, 1, &op_spare);
    ops[O_UAFFINE].name = "uaffine (non-commutative)";
    MPI_Op_create(uaffine, 0, &ops[O_UAFFINE].op);
    MPI_Op_free(&op_spare);
    ops[O_UAFFINE2].name = "uaffine2 (non-commutative, created after a free)";
    MPI_Op_create(uaffine2, 0, &ops[O_UAFFINE2].op);
}

/* ---- values --------------------------------------------------------- */

/* A value of any kind: integers as bit patterns extended to 64 bits (sign
 * extended for signed kinds), floating ones as double, complex as double
 * complex. Every input is chosen so that every result is exact. */
typedef struct {
    uint64_t u;
    double d;
    double complex c;
} val_t;

static uint64_t hash(uint64_t r, uint64_t i, uint64_t salt)
{
    uint64_t x = r * 0x9E3779B97F4A7C15ull ^ (i + 1) * 0xC2B2AE3D27D4EB4Full ^ salt * 0x165667B19E3779F9ull;
    x ^= x >> 31;
    x *= 0xD6E8FEB86659FD93ull;
    return x ^ x >> 32;
}


/* ext makes a 64-bit pattern what the type holds: truncated to its width,
 * then sign or zero extended. */
static uint64_t ext(const type_t *t, uint64_t u)
{
    int bits = 8 * t->size;
    if (t->kind == K_BOOL)
        return u != 0;
    if (bits == 64)
        return u;
    u &= (1ull << bits) - 1;
    if (t->kind == K_SINT && (u >> (bits - 1)))
        u |= ~0ull << bits;
    return u;
}

static val_t gen(const type_t *t, int op, int r, size_t i)
{
    val_t v = { 0, 0, 0 };
    uint64_t h = hash(r, i, op);
    switch (op) {
    case O_SUM:
        v.u = ext(t, (r * 7 + i * 3) % 11);
        v.d = (double) ((r * 7 + i * 3) % 11) - 5.5;
        v.c = (double) ((r + i) % 5) + I * (double) ((r * 3 + i) % 4 - 2);
        break;
    case O_PROD: {
        static const double complex cz[] = { 1, I, -1, 1 + I, 2 };
        v.u = ext(t, 1 + (r + i) % 2);
        v.d = ((r + i) % 3 == 0 ? -1.0 : 1.0) * (1 + (h & 1));
        v.c = cz[h % 5];
        break;
    }
    case O_MAX:
    case O_MIN:
        /* Debian's MPICH 4.0 orders the unsigned types as signed, and Open
         * MPI 4.1 does so for MPI_UNSIGNED_LONG and the reverse for
         * MPI_OFFSET: with the top bit clear, both orders agree. */
        v.u = ext(t, h);
        if (t->kind == K_UINT || t->dt == MPI_OFFSET)
            v.u &= ~0ull >> (65 - 8 * t->size);
        v.d = (double) ((int) (h % 2001) - 1000) / 4;
        break;
    case O_LAND:
    case O_LOR:
    case O_LXOR:
        v.u = ext(t, (h >> 7) % 4 == 0 ? 0 : 1 + (h >> 11) % 3);
        if (t->cls == C_LOG)
            v.u = v.u != 0;
        break;
    case O_BAND:
    case O_BOR:
    case O_BXOR:
        v.u = ext(t, h);
        break;
    case O_UADD1:
        v.u = (r * 5 + i) % 13;
        v.d = (double) ((r * 5 + i) % 13) / 2;
        break;
    case O_UAFFINE:
    case O_UAFFINE2:
        v.u = (uint64_t) (uint32_t) (2 * (r + i) + 1 + (h & 0xfff0)) << 32 | (uint32_t) (h >> 40);
        break;
    }
    return v;
}

static val_t combine(const type_t *t, int op, val_t a, val_t b)
{
    val_t v = { 0, 0, 0 };
    int sgn = t->kind == K_SINT;
    switch (op) {
    case O_SUM:
        v.u = ext(t, a.u + b.u);
        v.d = a.d + b.d;
        v.c = a.c + b.c;
        break;
    case O_PROD:
        v.u = ext(t, a.u * b.u);
        v.d = a.d * b.d;
        v.c = a.c * b.c;
        break;
    case O_MAX:
        v.u = sgn ? ((int64_t) a.u > (int64_t) b.u ? a.u : b.u) : (a.u > b.u ? a.u : b.u);
        v.d = a.d > b.d ? a.d : b.d;
        break;
    case O_MIN:
        v.u = sgn ? ((int64_t) a.u < (int64_t) b.u ? a.u : b.u) : (a.u < b.u ? a.u : b.u);
        v.d = a.d < b.d ? a.d : b.d;
        break;
    case O_LAND:
        v.u = a.u && b.u;
        break;
    case O_LOR:
        v.u = a.u || b.u;
        break;
    case O_LXOR:
        v.u = !a.u != !b.u;
        break;
    case O_BAND:
        v.u = a.u & b.u;
        break;
    case O_BOR:
        v.u = a.u | b.u;
        break;
    case O_BXOR:
        v.u = a.u ^ b.u;
        break;
    case O_UADD1:
        v.u = ext(t, a.u + b.u + 1);
        v.d = a.d + b.d + 1;
        break;
    case O_UAFFINE:
    case O_UAFFINE2:
        v.u = compose(a.u, b.u);
        break;
    }
    return v;
}

static void store(const type_t *t, void *buf, size_t i, val_t v)
{
    char *p = (char *) buf + i * t->size;
    switch (t->kind) {
    case K_SINT:
    case K_UINT:
        memcpy(p, &v.u, t->size); /* little endian: the low bytes */
        break;
    case K_BOOL:
        *(bool *) p = v.u != 0;
        break;
    case K_FLOAT:
        *(float *) p = v.d;
        break;
    case K_DOUBLE:
        *(double *) p = v.d;
        break;
    case K_LDOUBLE:
        *(long double *) p = v.d;
        break;
    case K_CFLOAT:
        *(float complex *) p = v.c;
        break;
    case K_CDOUBLE:
        *(double complex *) p = v.c;
        break;
    }
}

static int equal(const type_t *t, const void *buf, size_t i, val_t v, char *got, size_t n)
{
    const char *p = (const char *) buf + i * t->size;
    switch (t->kind) {
    case K_SINT:
    case K_UINT: {
        uint64_t u = 0;
        memcpy(&u, p, t->size);
        u = ext(t, u);
        if (t->cls == C_LOG && t->kind == K_SINT) /* Fortran LOGICAL: any non-zero is true */
            u = u != 0;
        snprintf(got, n, "%#llx, want %#llx", (unsigned long long) u, (unsigned long long) v.u);
        return u == v.u;
    }
    case K_BOOL: {
        unsigned char b = *(const unsigned char *) p;
        snprintf(got, n, "%d, want %d", b, (int) v.u);
        return b == v.u;
    }
    case K_FLOAT: {
        float f = *(const float *) p, w = v.d;
        snprintf(got, n, "%a, want %a", f, w);
        return memcmp(&f, &w, sizeof f) == 0;
    }
    case K_DOUBLE: {
        double f = *(const double *) p, w = v.d;
        snprintf(got, n, "%a, want %a", f, w);
        return memcmp(&f, &w, sizeof f) == 0;
    }
    case K_LDOUBLE: {
        long double f = *(const long double *) p;
        snprintf(got, n, "%La, want %a", f, v.d);
        return f == (long double) v.d;
    }
    case K_CFLOAT: {
        float complex f = *(const float complex *) p;
        snprintf(got, n, "%a%+ai, want %a%+ai", crealf(f), cimagf(f), creal(v.c), cimag(v.c));
        return f == (float complex) v.c;
    }
    case K_CDOUBLE: {
        double complex f = *(const double complex *) p;
        snprintf(got, n, "%a%+ai, want %a%+ai", creal(f), cimag(f), creal(v.c), cimag(v.c));
        return f == v.c;
    }
    }
    return 0;
}

/* fold reduces the inputs of ranks lo..hi-1 in rank order. */
static val_t fold(const type_t *t, int op, int lo, int hi, size_t i)
{
    val_t acc = gen(t, op, lo, i);
    for (int q = lo + 1; q < hi; q++)
        acc = combine(t, op, acc, gen(t, op, q, i));
    return acc;
}

static int check_fold(const type_t *t, int op, const void *buf, size_t off, size_t n, int lo, int hi,
                      const char *what)
{
    char got[160];
    for (size_t j = 0; j < n; j++) {
        val_t want = fold(t, op, lo, hi, off + j);
        if (!equal(t, buf, j, want, got, sizeof got)) {
            FAIL("element %zu of %zu is %s", j, n, got);
            return 0;
        }
    }
    return 1;
}

/* ---- reductions ----------------------------------------------------- */

typedef struct {
    MPI_Comm comm;
    const char *name;
    int rank, size;
} comm_t;

static int rootseq;

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "rank %d: out of memory (%zu bytes)\n", wrank, n);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

static void fill_input(const type_t *t, int op, int r, void *buf, size_t off, size_t n)
{
    for (size_t j = 0; j < n; j++)
        store(t, buf, j, gen(t, op, r, off + j));
}

/* The calls reductions makes, by bit; IP_ the same with MPI_IN_PLACE. */
enum {
    ALLRED = 1, RED = 2, SCAN = 4, EXSCAN = 8, RSB = 16, RS = 32, NCOLL = 6,
    IP = 64, /* shift a call's bit by 6 for its in-place form */
    ALL = (1 << 12) - 1,
};
#define IP_(x) ((x) << 6)

/* reductions runs the reductions named by which on count elements of t. */
static void reductions(const comm_t *c, const type_t *t, int op, size_t count, int which)
{
    char what[256];
    int r = c->rank, p = c->size;
    MPI_Datatype dt = t->dt;
    MPI_Op mop = ops[op].op;
    size_t sz = t->size;
    void *in = xmalloc(count * p * sz + sz), *out = xmalloc(count * p * sz + sz);

#define WHAT(coll, ip) (snprintf(what, sizeof what, "%s(%s, %s, count %zu%s) on %s", coll, t->name, ops[op].name, \
                                 count, ip ? ", MPI_IN_PLACE" : "", c->name), trace(what), where = what)
#define DO(bit) (which & (ip ? IP_(bit) : (bit)))

    for (int ip = 0; ip < 2; ip++) {
        if (DO(ALLRED)) {
            WHAT("MPI_Allreduce", ip);
            fill_input(t, op, r, ip ? out : in, 0, count);
            MPI_Allreduce(ip ? MPI_IN_PLACE : in, out, count, dt, mop, c->comm);
            check_fold(t, op, out, 0, count, 0, p, what);
        }

        /* Reduce, the root rotating; non-roots pass no receive buffer. */
        int root = rootseq++ % p;
#ifdef MPICH_VERSION
        /* MPICH 4.0 reads from MPI_IN_PLACE in its large-count reduce to a
         * root other than 0. */
        if (ip && count * sz > 2048)
            root = 0;
#endif
        if (DO(RED)) {
            WHAT("MPI_Reduce", ip);
            snprintf(what + strlen(what), sizeof what - strlen(what), " root %d", root);
            trace(what);
            fill_input(t, op, r, ip && r == root ? out : in, 0, count);
            MPI_Reduce(ip && r == root ? MPI_IN_PLACE : in, r == root ? out : NULL, count, dt, mop, root, c->comm);
            if (r == root)
                check_fold(t, op, out, 0, count, 0, p, what);
        }

        if (DO(SCAN)) {
            WHAT("MPI_Scan", ip);
            fill_input(t, op, r, ip ? out : in, 0, count);
            MPI_Scan(ip ? MPI_IN_PLACE : in, out, count, dt, mop, c->comm);
            check_fold(t, op, out, 0, count, 0, r + 1, what);
        }
        if (DO(EXSCAN)) {
            WHAT("MPI_Exscan", ip);
            fill_input(t, op, r, ip ? out : in, 0, count);
            MPI_Exscan(ip ? MPI_IN_PLACE : in, out, count, dt, mop, c->comm);
            if (r > 0)
                check_fold(t, op, out, 0, count, 0, r, what);
        }

        /* Reduce_scatter_block: count elements per rank. */
        if (DO(RSB)) {
            WHAT("MPI_Reduce_scatter_block", ip);
            fill_input(t, op, r, ip ? out : in, 0, count * p);
            MPI_Reduce_scatter_block(ip ? MPI_IN_PLACE : in, out, count, dt, mop, c->comm);
            check_fold(t, op, out, r * count, count, 0, p, what);
        }

        /* Reduce_scatter: rank q gets count + q elements, rank 0 none when
         * count is odd. */
        if (DO(RS)) {
            int *rc = xmalloc(p * sizeof *rc);
            size_t total = 0, mine = 0;
            for (int q = 0; q < p; q++) {
                rc[q] = q == 0 && count % 2 ? 0 : count + q;
                if (q < r)
                    mine += rc[q];
                total += rc[q];
            }
            int skip = 0;
#ifdef MPICH_VERSION
            /* MPICH 4.0's in-place reduce_scatter of 512 KiB and more
             * copies between overlapping parts of the buffer and asserts. */
            skip = ip && total * sz >= 512 << 10;
#endif
            if (!skip) {
                WHAT("MPI_Reduce_scatter", ip);
                void *in2 = xmalloc(total * sz), *out2 = xmalloc(total * sz);
                fill_input(t, op, r, ip ? out2 : in2, 0, total);
                MPI_Reduce_scatter(ip ? MPI_IN_PLACE : in2, out2, rc, dt, mop, c->comm);
                check_fold(t, op, out2, mine, rc[r], 0, p, what);
                free(in2);
                free(out2);
            }
            free(rc);
        }
    }
#undef DO
    where = "";
    free(in);
    free(out);
}

/* reductions_matrix runs every predefined operator on every type it
 * applies to: each pair through Allreduce at count elements and an
 * in-place Reduce at a few; every reduction in both forms for each type
 * under its first operator and for each operator under MPI_INT and
 * MPI_DOUBLE. */
static void reductions_matrix(const comm_t *c, size_t count)
{
    for (int ti = 0; ti < ntypes; ti++) {
        int first = 1;
        for (int op = 0; op < O_NPREDEF; op++) {
            if (!(types[ti].cls & ops[op].cls))
                continue;
            int all = first || types[ti].dt == MPI_INT || types[ti].dt == MPI_DOUBLE;
            reductions(c, &types[ti], op, count, all ? ALL : ALLRED);
            reductions(c, &types[ti], op, 7, IP_(RED));
            first = 0;
        }
    }
}

static const type_t *type_of(MPI_Datatype dt)
{
    for (int ti = 0; ti < ntypes; ti++)
        if (types[ti].dt == dt)
            return &types[ti];
    fprintf(stderr, "no type\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
    return NULL;
}

static void user_reductions(const comm_t *c, size_t count)
{
    reductions(c, type_of(MPI_INT), O_UADD1, count, ALL);
    reductions(c, type_of(MPI_DOUBLE), O_UADD1, count, ALLRED | IP_(RED) | RS);
    reductions(c, type_of(MPI_UINT64_T), O_UAFFINE, count, ALL);
    reductions(c, type_of(MPI_UINT64_T), O_UAFFINE2, count, ALLRED | RED | SCAN | RSB);
}

/* MINLOC and MAXLOC on the pair types, which shmcoll passes through. */
static void pair_reductions(const comm_t *c, size_t count)
{
    int r = c->rank, p = c->size;
    struct { int v, i; } *a = xmalloc(count * sizeof *a), *b = xmalloc(count * sizeof *b);
    struct { double v; int i; } *d = xmalloc(count * sizeof *d), *e = xmalloc(count * sizeof *e);
    for (size_t j = 0; j < count; j++) {
        a[j].v = hash(r, j, 99) % 7;
        a[j].i = r;
        d[j].v = (double) (hash(r, j, 98) % 7) / 2;
        d[j].i = r;
    }
    char what[128];
    snprintf(what, sizeof what, "MPI_Allreduce(MPI_2INT/MPI_DOUBLE_INT, MINLOC/MAXLOC, count %zu) on %s", count,
             c->name);
    where = what;
    MPI_Allreduce(a, b, count, MPI_2INT, MPI_MINLOC, c->comm);
    MPI_Allreduce(d, e, count, MPI_DOUBLE_INT, MPI_MAXLOC, c->comm);
    for (size_t j = 0; j < count; j++) {
        int minv = 1 << 30, mini = 0;
        double maxv = -1;
        int maxi = 0;
        for (int q = 0; q < p; q++) {
            int v = hash(q, j, 99) % 7;
            double w = (double) (hash(q, j, 98) % 7) / 2;
            if (v < minv)
                minv = v, mini = q;
            if (w > maxv)
                maxv = w, maxi = q;
        }
        if (b[j].v != minv || b[j].i != mini) {
            FAIL("MINLOC element %zu is (%d, %d), want (%d, %d)", j, b[j].v, b[j].i, minv, mini);
            break;
        }
        if (e[j].v != maxv || e[j].i != maxi) {
            FAIL("MAXLOC element %zu is (%g, %d), want (%g, %d)", j, e[j].v, e[j].i, maxv, maxi);
            break;
        }
    }
    where = "";
    free(a);
    free(b);
    free(d);
    free(e);
}

/* Sums that are not exact: every rank must hold the same bits. */
static void inexact_allreduce(const comm_t *c, size_t count)
{
    double *in = xmalloc(count * sizeof *in), *out = xmalloc(count * sizeof *out);
    float *fin = xmalloc(count * sizeof *fin), *fout = xmalloc(count * sizeof *fout);
    for (size_t j = 0; j < count; j++) {
        in[j] = 0.1 * (double) (hash(c->rank, j, 7) % 1000) / 7;
        fin[j] = 0.1f * (float) (hash(c->rank, j, 8) % 1000) / 7;
    }
    where = "MPI_Allreduce(MPI_DOUBLE and MPI_FLOAT, MPI_SUM, inexact) bitwise equal on every rank";
    MPI_Allreduce(in, out, count, MPI_DOUBLE, MPI_SUM, c->comm);
    MPI_Allreduce(fin, fout, count, MPI_FLOAT, MPI_SUM, c->comm);
    /* Compare with rank 0's result through point-to-point messages, which
     * the library does not touch; and with a sum in rank order, loosely. */
    if (c->rank == 0) {
        for (int q = 1; q < c->size; q++) {
            MPI_Send(out, count, MPI_DOUBLE, q, 0, c->comm);
            MPI_Send(fout, count, MPI_FLOAT, q, 1, c->comm);
        }
    } else {
        MPI_Recv(in, count, MPI_DOUBLE, 0, 0, c->comm, MPI_STATUS_IGNORE);
        MPI_Recv(fin, count, MPI_FLOAT, 0, 1, c->comm, MPI_STATUS_IGNORE);
        if (memcmp(in, out, count * sizeof *in) != 0 || memcmp(fin, fout, count * sizeof *fin) != 0)
            FAIL("count %zu on %s: this rank's result differs from rank 0's", count, c->name);
    }
    for (size_t j = 0; j < count; j++) {
        double s = 0;
        for (int q = 0; q < c->size; q++)
            s += 0.1 * (double) (hash(q, j, 7) % 1000) / 7;
        if (out[j] < s * (1 - 1e-12) || out[j] > s * (1 + 1e-12)) {
            FAIL("count %zu on %s: element %zu is %.17g, want about %.17g", count, c->name, j, out[j], s);
            break;
        }
    }
    where = "";
    free(in);
    free(out);
    free(fin);
    free(fout);
}

/* ---- data movement -------------------------------------------------- */

/* The byte at offset i of the data rank src sends to dst. */
static unsigned char pat(int src, int dst, size_t i)
{
    return (unsigned char) (src * 131 + dst * 29 + i * 7 + (i >> 8) + 1);
}

static void fill_pat(unsigned char *b, int src, int dst, size_t n)
{
    for (size_t i = 0; i < n; i++)
        b[i] = pat(src, dst, i);
}

static int check_pat(const unsigned char *b, int src, int dst, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != pat(src, dst, i)) {
            FAIL("byte %zu of %zu from rank %d is %#x, want %#x", i, n, src, b[i], pat(src, dst, i));
            return 0;
        }
    return 1;
}

static int check_untouched(const unsigned char *b, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != 0xEE) {
            FAIL("byte %zu of a gap written (%#x)", i, b[i]);
            return 0;
        }
    return 1;
}

/* movers runs every data-moving collective with count elements of dt.
 * When odd is set, rank odd_rank describes its part with one element of a
 * contiguous type of count elements of dt (the same type signature). */
static void movers(const comm_t *c, MPI_Datatype dt, const char *tname, size_t count, int odd)
{
    char what[256];
    int r = c->rank, p = c->size, sz;
    MPI_Type_size(dt, &sz);
    size_t n = count * sz; /* bytes per block */
    int root = rootseq++ % p;
    int odd_rank = odd ? (root + 1) % p : -1;
    MPI_Datatype ct = MPI_DATATYPE_NULL;
    if (odd) {
        MPI_Type_contiguous(count, dt, &ct);
        MPI_Type_commit(&ct);
    }
    /* What this rank passes: (1, ct) on the odd rank, (count, dt) elsewhere. */
    int mycount = r == odd_rank ? 1 : count;
    MPI_Datatype mydt = r == odd_rank ? ct : dt;
    unsigned char *s = xmalloc(n * p + 16 + (size_t) p * sz), *b = xmalloc(n * p + 16 + (size_t) p * sz);

#define W(coll, ip) (snprintf(what, sizeof what, "%s(%s x %zu%s%s) root %d on %s", coll, tname, count, \
                              ip ? ", MPI_IN_PLACE" : "", odd ? ", one rank with a contiguous type" : "", root, c->name), \
                     trace(what), where = what)

    /* Bcast */
    W("MPI_Bcast", 0);
    if (r == root)
        fill_pat(b, root, 0, n);
    else
        memset(b, 0xEE, n + 16);
    MPI_Bcast(b, mycount, mydt, root, c->comm);
    check_pat(b, root, 0, n, what);
    if (r != root)
        check_untouched(b + n, 16, what);

    for (int ip = 0; ip < 2; ip++) {
        if (ip && odd)
            break;
        /* Allgather */
        W("MPI_Allgather", ip);
        memset(b, 0xEE, n * p + 16);
        fill_pat(ip ? b + r * n : s, r, 0, n);
        MPI_Allgather(ip ? MPI_IN_PLACE : s, mycount, mydt, b, mycount, mydt, c->comm);
        for (int q = 0; q < p; q++)
            check_pat(b + q * n, q, 0, n, what);
        check_untouched(b + n * p, 16, what);

        /* Gather to the root, which alone may pass MPI_IN_PLACE. */
        W("MPI_Gather", ip);
        memset(b, 0xEE, n * p + 16);
        fill_pat(ip && r == root ? b + r * n : s, r, 0, n);
        MPI_Gather(ip && r == root ? MPI_IN_PLACE : s, mycount, mydt, r == root ? b : NULL, mycount, mydt, root,
                   c->comm);
        if (r == root) {
            for (int q = 0; q < p; q++)
                check_pat(b + q * n, q, 0, n, what);
            check_untouched(b + n * p, 16, what);
        }

        /* Scatter from the root, which alone may pass MPI_IN_PLACE. */
        W("MPI_Scatter", ip);
        if (r == root)
            for (int q = 0; q < p; q++)
                fill_pat(s + q * n, root, q, n);
        memset(b, 0xEE, n + 16);
        if (ip && r == root) {
            MPI_Scatter(s, mycount, mydt, MPI_IN_PLACE, mycount, mydt, root, c->comm);
        } else {
            MPI_Scatter(r == root ? s : NULL, mycount, mydt, b, mycount, mydt, root, c->comm);
            check_pat(b, root, r, n, what);
            check_untouched(b + n, 16, what);
        }

        /* Alltoall */
        W("MPI_Alltoall", ip);
        unsigned char *src = ip ? b : s;
        for (int q = 0; q < p; q++)
            fill_pat(src + q * n, r, q, n);
        if (!ip)
            memset(b, 0xEE, n * p + 16);
        MPI_Alltoall(ip ? MPI_IN_PLACE : s, mycount, mydt, b, mycount, mydt, c->comm);
        for (int q = 0; q < p; q++)
            check_pat(b + q * n, q, r, n, what);
    }

    /* The v-variants with gaps between blocks (left untouched), varying
     * counts and a zero count; in elements of dt, so basic types only. */
    if (!odd) {
        int *cnt = xmalloc(p * sizeof *cnt), *dsp = xmalloc(p * sizeof *dsp);
        int *scnt = xmalloc(p * sizeof *scnt), *sdsp = xmalloc(p * sizeof *sdsp);
        for (int ip = 0; ip < 2; ip++) {
            /* Allgatherv: rank q contributes count + q elements, rank 1
             * none when count is odd; one element of gap after each. */
            W("MPI_Allgatherv", ip);
            int at = 0;
            for (int q = 0; q < p; q++) {
                cnt[q] = q == 1 && count % 2 ? 0 : count + q;
                dsp[q] = at;
                at += cnt[q] + 1;
            }
            unsigned char *g = xmalloc((size_t) at * sz + 16);
            memset(g, 0xEE, (size_t) at * sz + 16);
            fill_pat(ip ? g + (size_t) dsp[r] * sz : s, r, 0, (size_t) cnt[r] * sz);
            MPI_Allgatherv(ip ? MPI_IN_PLACE : s, cnt[r], dt, g, cnt, dsp, dt, c->comm);
            for (int q = 0; q < p; q++) {
                check_pat(g + (size_t) dsp[q] * sz, q, 0, (size_t) cnt[q] * sz, what);
                check_untouched(g + (size_t) (dsp[q] + cnt[q]) * sz, sz, what);
            }
            free(g);

            /* Alltoallv: rank a sends count + (a+b)%3 elements to b, a
             * symmetric pattern, so send and receive counts agree. */
            W("MPI_Alltoallv", ip);
            int sat = 0, rat = 0;
            for (int q = 0; q < p; q++) {
                scnt[q] = count + (r + q) % 3;
                cnt[q] = scnt[q];
                sdsp[q] = sat;
                dsp[q] = rat;
                sat += scnt[q];
                rat += cnt[q] + 2;
            }
            unsigned char *sv = xmalloc((size_t) sat * sz + 1), *rv = xmalloc((size_t) rat * sz + 16);
            memset(rv, 0xEE, (size_t) rat * sz + 16);
            for (int q = 0; q < p; q++)
                fill_pat(ip ? rv + (size_t) dsp[q] * sz : sv + (size_t) sdsp[q] * sz, r, q, (size_t) scnt[q] * sz);
            if (ip)
                MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, dt, rv, cnt, dsp, dt, c->comm);
            else
                MPI_Alltoallv(sv, scnt, sdsp, dt, rv, cnt, dsp, dt, c->comm);
            for (int q = 0; q < p; q++) {
                check_pat(rv + (size_t) dsp[q] * sz, q, r, (size_t) cnt[q] * sz, what);
                check_untouched(rv + (size_t) (dsp[q] + cnt[q]) * sz, 2 * sz, what);
            }
            free(sv);
            free(rv);
        }
        free(cnt);
        free(dsp);
        free(scnt);
        free(sdsp);
    }
    where = "";
    if (odd)
        MPI_Type_free(&ct);
    free(s);
    free(b);
}

/* movers_all moves about bytes bytes per block in several types, and with
 * a contiguous type on one rank. */
static void movers_all(const comm_t *c, size_t bytes)
{
    MPI_Datatype list[] = { MPI_BYTE, MPI_INT, MPI_DOUBLE, MPI_2INT, MPI_C_DOUBLE_COMPLEX };
    const char *names[] = { "MPI_BYTE", "MPI_INT", "MPI_DOUBLE", "MPI_2INT", "MPI_C_DOUBLE_COMPLEX" };
    for (int k = 0; k < (int) (sizeof list / sizeof list[0]); k++) {
        int sz;
        MPI_Type_size(list[k], &sz);
        size_t count = bytes / sz + (bytes > 64 ? k : 0);
        movers(c, list[k], names[k], count ? count : 1, 0);
    }
    movers(c, MPI_DOUBLE, "MPI_DOUBLE", bytes / 8 + 1, 1);
}

/* ---- barrier -------------------------------------------------------- */

/* Each rank adds 1 to a counter in shared memory, then enters the barrier:
 * past it, the counter must show every rank's addition. A second barrier
 * keeps the next round's additions out of the check. */
static void barrier(const comm_t *c, volatile int64_t *counter, int rounds)
{
    char what[128];
    snprintf(what, sizeof what, "MPI_Barrier on %s", c->name);
    where = what;
    MPI_Barrier(c->comm);
    int64_t base = __atomic_load_n(counter, __ATOMIC_SEQ_CST);
    MPI_Barrier(c->comm);
    for (int k = 1; k <= rounds; k++) {
        __atomic_fetch_add(counter, 1, __ATOMIC_SEQ_CST);
        MPI_Barrier(c->comm);
        int64_t v = __atomic_load_n(counter, __ATOMIC_SEQ_CST);
        if (v != base + (int64_t) k * c->size) {
            FAIL("round %d: counter %lld after the barrier, want %lld", k, (long long) v,
                 (long long) (base + (int64_t) k * c->size));
            break;
        }
        MPI_Barrier(c->comm);
    }
    where = "";
}

/* -------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    size_t big = 2 << 20;
    int oporder = 0;
    const char *bfile = NULL;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "-big=", 5) == 0)
            big = strtoull(argv[i] + 5, NULL, 10);
        else if (strcmp(argv[i], "-oporder") == 0)
            oporder = 1;
        else
            bfile = argv[i];
    }
    if (!bfile) {
        if (wrank == 0)
            fprintf(stderr, "usage: colls [-big=BYTES] [-oporder] BARRIER_FILE\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    tracing = getenv("COLLS_TRACE") != NULL;
    init_types();
    init_ops();

    comm_t world = { MPI_COMM_WORLD, "MPI_COMM_WORLD", wrank, wsize };
    comm_t rev = { MPI_COMM_NULL, "a communicator in reverse rank order", 0, wsize };
    MPI_Comm_split(MPI_COMM_WORLD, 0, wsize - wrank, &rev.comm);
    MPI_Comm_rank(rev.comm, &rev.rank);
    comm_t half = { MPI_COMM_NULL, "a communicator of the even or odd ranks", 0, 0 };
    MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wrank, &half.comm);
    MPI_Comm_rank(half.comm, &half.rank);
    MPI_Comm_size(half.comm, &half.size);

    /* -oporder: operators are local objects, and MPI does not ask the
     * ranks to create theirs in the same order. Rank 0 creates one for its
     * own use, then every rank creates the same non-commutative one, which
     * must still reduce correctly (served or passed through). */
    if (oporder) {
        MPI_Op local;
        uint64_t a = 3ull << 32 | 1, b = 5ull << 32 | 2;
        if (wrank == 0) {
            MPI_Op_create(uaffine2, 0, &local);
            MPI_Reduce_local(&a, &b, 1, MPI_UINT64_T, local);
            if (b != compose(3ull << 32 | 1, 5ull << 32 | 2))
                FAIL("MPI_Reduce_local with a user operator");
        }
        MPI_Op kept = ops[O_UAFFINE2].op;
        MPI_Op_create(uaffine, 0, &ops[O_UAFFINE2].op);
        reductions(&world, type_of(MPI_UINT64_T), O_UAFFINE2, 4099, ALLRED | RED | SCAN | RSB);
        reductions(&rev, type_of(MPI_UINT64_T), O_UAFFINE2, 7, ALLRED | RED);
        MPI_Op_free(&ops[O_UAFFINE2].op);
        ops[O_UAFFINE2].op = kept;
        if (wrank == 0)
            MPI_Op_free(&local);
        goto done;
    }

    /* Reductions: every (type, operator) at a few KiB and at a few
     * elements; empty and one-element calls; the reversed and the half
     * communicators; user operators; a few at the large size. */
    reductions_matrix(&world, 1031);
    for (int op = 0; op < O_NPREDEF; op++)
        reductions(&rev, type_of(MPI_INT), op, 1031, ALL);
    reductions(&rev, type_of(MPI_DOUBLE), O_SUM, 1031, ALL);
    for (size_t count = 0; count < 2; count++) {
        reductions(&world, type_of(MPI_INT), O_SUM, count, ALL);
        reductions(&world, type_of(MPI_DOUBLE), O_MAX, count, ALL);
    }
    size_t counts[] = { 1, 7, 4099 };
    for (int k = 0; k < 3; k++) {
        user_reductions(&world, counts[k]);
        user_reductions(&rev, counts[k]);
    }
    user_reductions(&half, 4099);
    size_t nbig = big / 8 + 5;
    reductions(&world, type_of(MPI_INT), O_SUM, big / 4 + 1, ALL);
    reductions(&world, type_of(MPI_DOUBLE), O_SUM, nbig, ALL);
    reductions(&rev, type_of(MPI_DOUBLE), O_MAX, nbig, ALLRED | RED | RSB);
    reductions(&world, type_of(MPI_FLOAT), O_PROD, big / 4 + 3, ALLRED | IP_(RED) | IP_(RSB));
    reductions(&world, type_of(MPI_UINT8_T), O_BXOR, big + 7, ALLRED | IP_(ALLRED) | RED | SCAN);
    reductions(&half, type_of(MPI_LONG), O_MIN, nbig, ALLRED | RSB | RS);
    user_reductions(&world, nbig);
    pair_reductions(&world, 1000);
    size_t inexact[] = { 1, 1000, 100000, nbig };
    for (int k = 0; k < 4; k++) {
        inexact_allreduce(&world, inexact[k]);
        inexact_allreduce(&rev, inexact[k]);
    }

    /* Data movement from a few bytes to the large size. */
    size_t bytes[] = { 8, 1000, 65536, big };
    for (int k = 0; k < 4; k++)
        movers_all(&world, bytes[k]);
    movers(&rev, MPI_INT, "MPI_INT", 1001, 0);
    movers(&rev, MPI_DOUBLE, "MPI_DOUBLE", big / 8, 0);
    movers(&half, MPI_DOUBLE, "MPI_DOUBLE", 8193, 0);
    movers(&world, MPI_BYTE, "MPI_BYTE", 0, 0);

    /* Barrier on three communicators, and on one freed and made again. */
    int fd = open(bfile, O_RDWR);
    if (fd < 0 || ftruncate(fd, 4096) != 0) {
        perror(bfile);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int64_t *cnt = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (cnt == MAP_FAILED) {
        perror("mmap");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    barrier(&world, &cnt[0], 40);
    barrier(&rev, &cnt[1], 20);
    barrier(&half, &cnt[2 + wrank % 2], 20);
    MPI_Comm_free(&half.comm);
    MPI_Comm_split(MPI_COMM_WORLD, wrank % 2, wrank, &half.comm);
    barrier(&half, &cnt[4 + wrank % 2], 20);
    munmap(cnt, 4096);
    close(fd);

done:
    MPI_Comm_free(&rev.comm);
    MPI_Comm_free(&half.comm);
    for (int op = O_NPREDEF; op < O_NOPS; op++)
        MPI_Op_free(&ops[op].op);

    /* Rank 0 learns the error count through point-to-point messages. */
    int total = errs;
    if (wrank == 0) {
        for (int q = 1; q < wsize; q++) {
            int e;
            MPI_Recv(&e, 1, MPI_INT, q, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            total += e;
        }
        if (total == 0)
            printf(" No Errors\n");
        else
            printf(" Found %d errors\n", total);
        fflush(stdout);
    } else {
        MPI_Send(&errs, 1, MPI_INT, 0, 9, MPI_COMM_WORLD);
    }
    MPI_Finalize();
    return errs != 0;
}
