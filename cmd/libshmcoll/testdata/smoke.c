// smoke.c: every intercepted collective, exact results, run plain and with
// libshmcoll preloaded by the Go test of cmd/libshmcoll. Prints "No Errors"
// on rank 0 when every check passed; exits 1 on the first failure.
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, errs;

#define CHECK(cond, ...)                                                   \
	do {                                                                   \
		if (!(cond)) {                                                     \
			fprintf(stderr, "rank %d: line %d: ", rank, __LINE__);          \
			fprintf(stderr, __VA_ARGS__);                                  \
			fprintf(stderr, "\n");                                         \
			errs++;                                                        \
		}                                                                  \
	} while (0)

// A non-commutative user operator: 2x2 integer matrix product, row-major,
// inout = in * inout.
static void matmul(void *in, void *inout, int *len, MPI_Datatype *dt) {
	(void)dt;
	int *a = in, *b = inout;
	for (int i = 0; i < *len / 4; i++, a += 4, b += 4) {
		int c[4] = {a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3], a[2] * b[0] + a[3] * b[2],
		            a[2] * b[1] + a[3] * b[3]};
		memcpy(b, c, sizeof c);
	}
}

// A commutative user operator on doubles: inout = in + 2*inout - inout.
static void addop(void *in, void *inout, int *len, MPI_Datatype *dt) {
	(void)dt;
	double *a = in, *b = inout;
	for (int i = 0; i < *len; i++) b[i] = a[i] + b[i];
}

static void test_allreduce(int n) {
	double *s = malloc(sizeof(double) * n), *r = malloc(sizeof(double) * n);
	for (int i = 0; i < n; i++) s[i] = rank + i;
	MPI_Allreduce(s, r, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	for (int i = 0; i < n; i++)
		CHECK(r[i] == (double)size * (size - 1) / 2 + (double)size * i, "allreduce n=%d [%d]=%g", n, i, r[i]);
	// in place, MAX on int
	int *x = malloc(sizeof(int) * n);
	for (int i = 0; i < n; i++) x[i] = (rank * 7 + i) % (size + 3);
	MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	for (int i = 0; i < n; i++) {
		int m = 0;
		for (int q = 0; q < size; q++) m = (q * 7 + i) % (size + 3) > m ? (q * 7 + i) % (size + 3) : m;
		CHECK(x[i] == m, "allreduce max n=%d [%d]=%d want %d", n, i, x[i], m);
	}
	free(s);
	free(r);
	free(x);
}

static void test_ops(void) {
	long l = rank + 1, lr;
	MPI_Allreduce(&l, &lr, 1, MPI_LONG, MPI_PROD, MPI_COMM_WORLD);
	long f = 1;
	for (int q = 1; q <= size; q++) f *= q;
	CHECK(lr == f, "prod %ld want %ld", lr, f);
	unsigned u = 1u << rank, ur;
	MPI_Allreduce(&u, &ur, 1, MPI_UNSIGNED, MPI_BOR, MPI_COMM_WORLD);
	CHECK(ur == (1u << size) - 1, "bor %u", ur);
	int b = rank == 0, br;
	MPI_Allreduce(&b, &br, 1, MPI_INT, MPI_LXOR, MPI_COMM_WORLD);
	CHECK(br == 1, "lxor %d", br);
	MPI_Allreduce(&b, &br, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
	CHECK(br == 0, "land %d", br);
	float fl = (float)rank, flr;
	MPI_Allreduce(&fl, &flr, 1, MPI_FLOAT, MPI_MIN, MPI_COMM_WORLD);
	CHECK(flr == 0, "min %g", flr);
	// user ops
	MPI_Op mm, add;
	MPI_Op_create(matmul, 0, &mm);
	MPI_Op_create(addop, 1, &add);
	int m[4] = {1, rank + 1, 0, 1}, mr[4]; // product: [[1, sum(q+1)],[0,1]]... non-commuting with a twist below
	if (rank % 2) m[2] = 1;                // makes the order matter
	MPI_Allreduce(m, mr, 4, MPI_INT, mm, MPI_COMM_WORLD);
	int want[4] = {1, 0, 0, 1};
	for (int q = 0; q < size; q++) {
		int a[4] = {1, q + 1, q % 2, 1}, c[4] = {want[0] * a[0] + want[1] * a[2], want[0] * a[1] + want[1] * a[3],
		                                         want[2] * a[0] + want[3] * a[2], want[2] * a[1] + want[3] * a[3]};
		memcpy(want, c, sizeof c);
	}
	CHECK(!memcmp(mr, want, sizeof want), "matmul got %d %d %d %d want %d %d %d %d", mr[0], mr[1], mr[2], mr[3], want[0],
	      want[1], want[2], want[3]);
	double d = rank, dr;
	MPI_Allreduce(&d, &dr, 1, MPI_DOUBLE, add, MPI_COMM_WORLD);
	CHECK(dr == size * (size - 1) / 2.0, "user add %g", dr);
	int sc = rank + 1, scr = -1;
	MPI_Scan(&sc, &scr, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	CHECK(scr == (rank + 1) * (rank + 2) / 2, "scan %d", scr);
	MPI_Exscan(&sc, &scr, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank > 0) CHECK(scr == rank * (rank + 1) / 2, "exscan %d", scr);
	int ms[4] = {1, rank + 1, rank % 2, 1}, msr[4];
	MPI_Scan(ms, msr, 4, MPI_INT, mm, MPI_COMM_WORLD);
	int w2[4] = {1, 0, 0, 1};
	for (int q = 0; q <= rank; q++) {
		int a[4] = {1, q + 1, q % 2, 1}, c[4] = {w2[0] * a[0] + w2[1] * a[2], w2[0] * a[1] + w2[1] * a[3],
		                                         w2[2] * a[0] + w2[3] * a[2], w2[2] * a[1] + w2[3] * a[3]};
		memcpy(w2, c, sizeof c);
	}
	CHECK(!memcmp(msr, w2, sizeof w2), "matmul scan");
	MPI_Op_free(&mm);
	MPI_Op_free(&add);
}

static void test_rooted(int n) {
	for (int root = 0; root < size; root++) {
		int *v = malloc(sizeof(int) * n);
		for (int i = 0; i < n; i++) v[i] = rank == root ? i * 3 + root : -1;
		MPI_Bcast(v, n, MPI_INT, root, MPI_COMM_WORLD);
		for (int i = 0; i < n; i++) CHECK(v[i] == i * 3 + root, "bcast root %d [%d]=%d", root, i, v[i]);
		double *s = malloc(sizeof(double) * n), *r = malloc(sizeof(double) * n);
		for (int i = 0; i < n; i++) s[i] = rank * 2 + i;
		if (rank == root) {
			memcpy(r, s, sizeof(double) * n);
			MPI_Reduce(root == 0 ? MPI_IN_PLACE : s, r, n, MPI_DOUBLE, MPI_SUM, root, MPI_COMM_WORLD);
			for (int i = 0; i < n; i++)
				CHECK(r[i] == (double)size * (size - 1) + (double)size * i, "reduce root %d [%d]=%g", root, i, r[i]);
		} else {
			MPI_Reduce(s, NULL, n, MPI_DOUBLE, MPI_SUM, root, MPI_COMM_WORLD);
		}
		// gather / scatter
		int *g = malloc(sizeof(int) * n * size), *mine = malloc(sizeof(int) * n);
		for (int i = 0; i < n; i++) mine[i] = rank * 1000 + i;
		if (rank == root && root % 2) {
			memcpy(g + rank * n, mine, sizeof(int) * n);
			MPI_Gather(MPI_IN_PLACE, n, MPI_INT, g, n, MPI_INT, root, MPI_COMM_WORLD);
		} else {
			MPI_Gather(mine, n, MPI_INT, g, n, MPI_INT, root, MPI_COMM_WORLD);
		}
		if (rank == root)
			for (int q = 0; q < size; q++)
				for (int i = 0; i < n; i++) CHECK(g[q * n + i] == q * 1000 + i, "gather root %d", root);
		if (rank == root)
			for (int q = 0; q < size; q++)
				for (int i = 0; i < n; i++) g[q * n + i] = q * 77 + i + root;
		memset(mine, 0, sizeof(int) * n);
		MPI_Scatter(g, n, MPI_INT, mine, n, MPI_INT, root, MPI_COMM_WORLD);
		for (int i = 0; i < n; i++) CHECK(mine[i] == rank * 77 + i + root, "scatter root %d", root);
		free(v);
		free(s);
		free(r);
		free(g);
		free(mine);
	}
}

static void test_gathers(int n) {
	int *s = malloc(sizeof(int) * n * size), *r = malloc(sizeof(int) * n * size);
	for (int i = 0; i < n; i++) s[i] = rank * 100 + i;
	MPI_Allgather(s, n, MPI_INT, r, n, MPI_INT, MPI_COMM_WORLD);
	for (int q = 0; q < size; q++)
		for (int i = 0; i < n; i++) CHECK(r[q * n + i] == q * 100 + i, "allgather");
	memset(r, 0, sizeof(int) * n * size);
	memcpy(r + rank * n, s, sizeof(int) * n);
	MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, n, MPI_INT, MPI_COMM_WORLD);
	for (int q = 0; q < size; q++)
		for (int i = 0; i < n; i++) CHECK(r[q * n + i] == q * 100 + i, "allgather in place");
	// alltoall
	for (int q = 0; q < size; q++)
		for (int i = 0; i < n; i++) s[q * n + i] = rank * 10000 + q * 100 + i;
	MPI_Alltoall(s, n, MPI_INT, r, n, MPI_INT, MPI_COMM_WORLD);
	for (int q = 0; q < size; q++)
		for (int i = 0; i < n; i++) CHECK(r[q * n + i] == q * 10000 + rank * 100 + i, "alltoall");
	// allgatherv: rank q contributes q+1 ints, displaced with a gap
	int *cnt = malloc(sizeof(int) * size), *dsp = malloc(sizeof(int) * size), tot = 0;
	for (int q = 0; q < size; q++) {
		cnt[q] = q + 1;
		dsp[q] = tot + q;
		tot += q + 1 + q;
	}
	int *v = calloc(tot + 1, sizeof(int));
	for (int i = 0; i <= rank; i++) s[i] = rank * 10 + i;
	MPI_Allgatherv(s, rank + 1, MPI_INT, v, cnt, dsp, MPI_INT, MPI_COMM_WORLD);
	for (int q = 0; q < size; q++)
		for (int i = 0; i <= q; i++) CHECK(v[dsp[q] + i] == q * 10 + i, "allgatherv");
	// alltoallv: rank sends j+1 ints to rank j
	int *sc = malloc(sizeof(int) * size), *sd = malloc(sizeof(int) * size), *rc = malloc(sizeof(int) * size),
	    *rd = malloc(sizeof(int) * size);
	int so = 0, ro = 0;
	for (int q = 0; q < size; q++) {
		sc[q] = q + 1;
		sd[q] = so;
		so += q + 1;
		rc[q] = rank + 1;
		rd[q] = ro;
		ro += rank + 1;
	}
	int *as = malloc(sizeof(int) * so), *ar = malloc(sizeof(int) * ro);
	for (int q = 0; q < size; q++)
		for (int i = 0; i < sc[q]; i++) as[sd[q] + i] = rank * 1000 + q * 10 + i;
	MPI_Alltoallv(as, sc, sd, MPI_INT, ar, rc, rd, MPI_INT, MPI_COMM_WORLD);
	for (int q = 0; q < size; q++)
		for (int i = 0; i < rc[q]; i++) CHECK(ar[rd[q] + i] == q * 1000 + rank * 10 + i, "alltoallv");
	free(s);
	free(r);
	free(cnt);
	free(dsp);
	free(v);
	free(sc);
	free(sd);
	free(rc);
	free(rd);
	free(as);
	free(ar);
}

static void test_reduce_scatter(int n) {
	int *s = malloc(sizeof(int) * n * size), *r = malloc(sizeof(int) * n * size);
	for (int i = 0; i < n * size; i++) s[i] = rank + i;
	MPI_Reduce_scatter_block(s, r, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	for (int i = 0; i < n; i++)
		CHECK(r[i] == size * (size - 1) / 2 + size * (rank * n + i), "rsb [%d]=%d", i, r[i]);
	memcpy(r, s, sizeof(int) * n * size);
	MPI_Reduce_scatter_block(MPI_IN_PLACE, r, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	for (int i = 0; i < n; i++)
		CHECK(r[i] == size * (size - 1) / 2 + size * (rank * n + i), "rsb in place [%d]=%d", i, r[i]);
	int *cnt = malloc(sizeof(int) * size), tot = 0, off = 0;
	for (int q = 0; q < size; q++) {
		cnt[q] = q + 1;
		if (q < rank) off += q + 1;
		tot += q + 1;
	}
	int *vs = malloc(sizeof(int) * tot), *vr = malloc(sizeof(int) * tot);
	for (int i = 0; i < tot; i++) vs[i] = rank * i;
	MPI_Reduce_scatter(vs, vr, cnt, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	for (int i = 0; i <= rank; i++) CHECK(vr[i] == size * (size - 1) / 2 * (off + i), "reduce_scatter [%d]", i);
	memcpy(vr, vs, sizeof(int) * tot);
	MPI_Reduce_scatter(MPI_IN_PLACE, vr, cnt, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	for (int i = 0; i <= rank; i++) CHECK(vr[i] == size * (size - 1) / 2 * (off + i), "reduce_scatter in place [%d]", i);
	free(s);
	free(r);
	free(cnt);
	free(vs);
	free(vr);
}

// A derived type on one rank, MPI_DOUBLE on the others: legal (equal type
// signatures); the library must not split the call. (Both MPIs refuse
// predefined operators on derived types, so only data movement here.)
static void test_mixed_types(void) {
	MPI_Datatype two;
	MPI_Type_contiguous(2, MPI_DOUBLE, &two);
	MPI_Type_commit(&two);
	double s[4] = {rank, rank + 1, rank + 2, rank + 3}, r[4 * 64];
	if (rank == 0)
		MPI_Allgather(s, 2, two, r, 4, MPI_DOUBLE, MPI_COMM_WORLD);
	else
		MPI_Allgather(s, 4, MPI_DOUBLE, r, 4, MPI_DOUBLE, MPI_COMM_WORLD);
	for (int q = 0; q < size; q++)
		for (int i = 0; i < 4; i++) CHECK(r[q * 4 + i] == q + i, "mixed allgather [%d]=%g", q * 4 + i, r[q * 4 + i]);
	if (rank == 0)
		MPI_Bcast(s, 2, two, 0, MPI_COMM_WORLD);
	else
		MPI_Bcast(s, 4, MPI_DOUBLE, 0, MPI_COMM_WORLD);
	for (int i = 0; i < 4; i++) CHECK(s[i] == i, "mixed bcast [%d]=%g", i, s[i]);
	MPI_Type_free(&two);
	// and the communicator still works
	test_allreduce(3);
}


// Derived datatypes on even ranks, MPI_INT on odd ones, in every
// data-movement collective: a strided vector of two ints (extent three
// ints), so the library's packed copies must gather and scatter the
// elements. Logical int j of a buffer of vectors sits at physical index
// (j/2)*3 + (j%2)*2.
static MPI_Datatype vec;
static int phys(int j) { return rank % 2 == 0 ? (j / 2) * 3 + (j % 2) * 2 : j; }
static MPI_Datatype mytype(void) { return rank % 2 == 0 ? vec : MPI_INT; }
static int mycount(int ints) { return rank % 2 == 0 ? ints / 2 : ints; }
static int *mkbuf(int ints) {
	int *b = malloc(sizeof(int) * (size_t)(ints / 2 * 3 + 2));
	for (int i = 0; i < ints / 2 * 3 + 2; i++) b[i] = -7;
	return b;
}

static void test_derived(int n) { // n even: ints per block
	MPI_Type_vector(2, 1, 2, MPI_INT, &vec);
	MPI_Type_commit(&vec);
	MPI_Datatype t = mytype();
	for (int root = 0; root < 2 && root < size; root++) {
		int *b = mkbuf(n);
		for (int j = 0; j < n; j++) b[phys(j)] = rank == root ? j * 5 + root : 0;
		MPI_Bcast(b, mycount(n), t, root, MPI_COMM_WORLD);
		for (int j = 0; j < n; j++) CHECK(b[phys(j)] == j * 5 + root, "derived bcast root %d [%d]=%d", root, j, b[phys(j)]);
		free(b);
	}
	int *s = mkbuf(n * size), *r = mkbuf(n * size);
	for (int j = 0; j < n; j++) s[phys(j)] = rank * 1000 + j;
	MPI_Allgather(s, mycount(n), t, r, mycount(n), t, MPI_COMM_WORLD);
	for (int j = 0; j < n * size; j++) CHECK(r[phys(j)] == (j / n) * 1000 + j % n, "derived allgather [%d]", j);
	free(r);
	r = mkbuf(n * size);
	for (int j = 0; j < n; j++) r[phys(rank * n + j)] = rank * 1000 + j;
	MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, mycount(n), t, MPI_COMM_WORLD);
	for (int j = 0; j < n * size; j++) CHECK(r[phys(j)] == (j / n) * 1000 + j % n, "derived allgather in place [%d]", j);
	for (int j = 0; j < n * size; j++) s[phys(j)] = rank * 1000 + j;
	MPI_Alltoall(s, mycount(n), t, r, mycount(n), t, MPI_COMM_WORLD);
	for (int j = 0; j < n * size; j++)
		CHECK(r[phys(j)] == (j / n) * 1000 + rank * n + j % n, "derived alltoall [%d]=%d", j, r[phys(j)]);
	int root = size - 1;
	for (int j = 0; j < n; j++) s[phys(j)] = rank * 100 + j;
	MPI_Gather(s, mycount(n), t, r, mycount(n), t, root, MPI_COMM_WORLD);
	if (rank == root)
		for (int j = 0; j < n * size; j++) CHECK(r[phys(j)] == (j / n) * 100 + j % n, "derived gather [%d]", j);
	for (int j = 0; j < n * size; j++) s[phys(j)] = j * 3 + 1;
	MPI_Scatter(s, mycount(n), t, r, mycount(n), t, root, MPI_COMM_WORLD);
	for (int j = 0; j < n; j++) CHECK(r[phys(j)] == (rank * n + j) * 3 + 1, "derived scatter [%d]", j);
	// allgatherv: rank q gives 2(q+1) ints, displaced in whole elements of each rank's type
	int *cnt = malloc(sizeof(int) * size), *dsp = malloc(sizeof(int) * size), tot = 0;
	for (int q = 0; q < size; q++) {
		cnt[q] = mycount(2 * (q + 1));
		dsp[q] = mycount(tot);
		tot += 2 * (q + 1);
	}
	int *v = mkbuf(tot);
	for (int j = 0; j < 2 * (rank + 1); j++) s[phys(j)] = rank * 10 + j;
	MPI_Allgatherv(s, mycount(2 * (rank + 1)), t, v, cnt, dsp, t, MPI_COMM_WORLD);
	for (int q = 0, o = 0; q < size; o += 2 * (q + 1), q++)
		for (int j = 0; j < 2 * (q + 1); j++) CHECK(v[phys(o + j)] == q * 10 + j, "derived allgatherv");
	// alltoallv: 2(q+1) ints to rank q, packed in rank order
	int *sc = malloc(sizeof(int) * size), *sd = malloc(sizeof(int) * size), *rc = malloc(sizeof(int) * size),
	    *rd = malloc(sizeof(int) * size);
	int so = 0, ro = 0;
	for (int q = 0; q < size; q++) {
		sc[q] = mycount(2 * (q + 1));
		sd[q] = mycount(so);
		so += 2 * (q + 1);
		rc[q] = mycount(2 * (rank + 1));
		rd[q] = mycount(ro);
		ro += 2 * (rank + 1);
	}
	int *as = mkbuf(so), *ar = mkbuf(ro);
	for (int q = 0, o = 0; q < size; o += 2 * (q + 1), q++)
		for (int j = 0; j < 2 * (q + 1); j++) as[phys(o + j)] = rank * 1000 + q * 10 + j;
	MPI_Alltoallv(as, sc, sd, t, ar, rc, rd, t, MPI_COMM_WORLD);
	for (int q = 0; q < size; q++)
		for (int j = 0; j < 2 * (rank + 1); j++)
			CHECK(ar[phys(q * 2 * (rank + 1) + j)] == q * 1000 + rank * 10 + j, "derived alltoallv [%d][%d]", q, j);
	free(s);
	free(r);
	free(v);
	free(cnt);
	free(dsp);
	free(sc);
	free(sd);
	free(rc);
	free(rd);
	free(as);
	free(ar);
	MPI_Type_free(&vec);
}

static void test_comms(void) {
	MPI_Comm half, dup;
	MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
	int hr, hs;
	MPI_Comm_rank(half, &hr);
	MPI_Comm_size(half, &hs);
	int v = rank, sum = 0, want = 0;
	for (int q = rank % 2; q < size; q += 2) want += q;
	MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, half);
	CHECK(sum == want, "split allreduce %d want %d", sum, want);
	MPI_Comm_dup(half, &dup);
	int b = hr == hs - 1 ? 42 : 0;
	MPI_Bcast(&b, 1, MPI_INT, hs - 1, dup);
	CHECK(b == 42, "dup bcast %d", b);
	MPI_Comm_free(&dup);
	MPI_Comm_free(&half);
	for (int i = 0; i < 40; i++) { // many communicators, made and freed
		MPI_Comm c;
		MPI_Comm_dup(MPI_COMM_WORLD, &c);
		MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, c);
		CHECK(sum == size * (size - 1) / 2, "dup %d allreduce", i);
		MPI_Comm_free(&c);
	}
	// A communicator of other ranks made right after one is freed (the
	// MPI may give it the freed handle): it gets state of its own, not
	// the freed one's that the library remembered for this thread.
	for (int i = 0; i < 8; i++) {
		MPI_Comm c;
		int odd = i % 2;
		MPI_Comm_split(MPI_COMM_WORLD, odd ? rank % 2 : 0, rank, &c);
		want = 0;
		for (int q = 0; q < size; q++)
			if (!odd || q % 2 == rank % 2) want += q;
		MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, c);
		CHECK(sum == want, "split %d allreduce %d want %d", i, sum, want);
		MPI_Comm_free(&c);
	}
}

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	int sizes[] = {1, 3, 64, 1000, 70000, 300000};
	for (unsigned k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
		test_allreduce(sizes[k]);
		test_gathers(sizes[k]);
		test_reduce_scatter(sizes[k]);
	}
	test_rooted(5);
	test_rooted(50000);
	test_ops();
	test_mixed_types();
	test_derived(2);
	test_derived(64);
	test_derived(20000);
	test_comms();
	MPI_Barrier(MPI_COMM_WORLD);
	int all = 0;
	MPI_Allreduce(&errs, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0 && all == 0) printf("No Errors\n");
	MPI_Finalize();
	return all != 0;
}
