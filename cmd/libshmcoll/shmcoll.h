// Declarations shared by libshmcoll's C entry points (entry.c) and its Go
// side (serve.go, through cgo's preamble).
#ifndef SHMCOLL_LIBSHMCOLL_H
#define SHMCOLL_LIBSHMCOLL_H

#include <mpi.h>
#include <stdint.h>

// The collectives, numbered as collectives.Collective.
enum {
	SC_ALLREDUCE,
	SC_REDUCE_SCATTER_BLOCK,
	SC_REDUCE_SCATTER,
	SC_ALLGATHER,
	SC_ALLGATHERV,
	SC_BCAST,
	SC_REDUCE,
	SC_BARRIER,
	SC_ALLTOALL,
	SC_ALLTOALLV,
	SC_SCATTER,
	SC_GATHER,
	SC_SCAN,
	SC_EXSCAN,
	SC_NCOLL
};

// Why a call passed through to the MPI (the columns of the statistics).
enum {
	SC_PASS_OFF,      // SHMCOLL_MPI=off, or after MPI_Finalize
	SC_PASS_COMM,     // intercommunicator, one rank, spans nodes, or the arena failed
	SC_PASS_DATATYPE, // derived, long double, pair type, no kernel
	SC_PASS_OP,       // operator that does not apply to the type, MINLOC/MAXLOC
	SC_PASS_SIZE,     // outside the size band served for this collective and p
	SC_PASS_FALLBACK, // shmcoll's call failed (on every rank): this call and the communicator's later ones
	SC_PASS_DECLINED, // alltoallv outside its band, found by every rank in the served call's first step
	SC_NPASS
};

// Operator codes handed to Go: 0..8 are simd.Op (sum ... lor); SC_OP_LXOR
// has no simd kernel; user operators are SC_OP_USER + their creation index.
#define SC_OP_LXOR 100
#define SC_OP_USER 1000

// The size bands: a call is served when min <= bytes <= max for one of the
// SC_BANDS ranges of its collective and communicator size (index
// min(p, SC_BAND_P-1), or SC_BAND_NEAR for a near pair: p = 1 is never
// served, so its row holds them); unused ranges have min > max.
#define SC_BAND_P 65
#define SC_BAND_NEAR 1
#define SC_BANDS 4
extern int64_t sc_band_min[SC_NCOLL][SC_BAND_P][SC_BANDS];
extern int64_t sc_band_max[SC_NCOLL][SC_BAND_P][SC_BANDS];

// The calls passed through so far, of one collective for one reason, summed
// over the threads.
uint64_t sc_passed(int coll, int why);

// The user function of user operator idx, and whether it is commutative.
void sc_call_user(int idx, void *in, void *inout, int len, uintptr_t dtype);

// The progress call a waiting rank makes after its spin.
void sc_progress(void);

// The Go runtime's threads lowered at load (threads.c), to what nice
// value, and whether SHMCOLL_MPI_NICE was bad.
extern int sc_lowered;
extern int sc_lowered_nice;
extern int sc_nice_bad;

#endif
