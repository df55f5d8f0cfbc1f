package collectives

import (
	"fmt"
	"os"

	"github.com/shmcoll/shmcoll/internal/clock"
	"github.com/shmcoll/shmcoll/shm"
	"github.com/shmcoll/shmcoll/simd"
)

// Store advice: how a rank stores data that its peers read next, by where
// the machine placed the ranks' CPUs. A reader on the writer's L3 gets the
// writer's modified lines fast, and non-temporal stores would send it to
// memory; a reader on another die loads such lines slowly, memory faster.
// So readers time their large copies and reductions out of a peer's slot,
// writers their large publishes, and the schedule and circulant
// allreduces probe a few lines (probeRead); two slow ones of a kind in a
// row make the rank ask every writer for non-temporal stores for the next
// adviceCalls calls: its hint word (shm.Endpoint.Hint) holds the call
// number up to which it asks. Ranks that share CPUs store regularly: the
// reader most likely runs on the writer's CPU.
//
// The advice changes how bytes are stored, never which bytes are combined
// in which order, so results do not depend on it and ranks need not agree
// on it. Options.NoStoreAdvice or SHMCOLL_STORE_ADVICE=off turn it off.

// StoreAdviceEnv names the environment variable that turns the store
// advice off ("off") or leaves it on ("on" or unset).
const StoreAdviceEnv = "SHMCOLL_STORE_ADVICE"

const (
	timedFromBytes   = 64 << 10 // copies of at least this are always timed
	sampleLargeEvery = 8        // smaller ones, from pipelineBytes/8, in one call of this many
	slowCopyRate     = 14       // bytes/ns: a copy out of a peer's slot slower than this is slow
	slowReduceRate   = 10       // bytes/ns of result: the same for a reduction reading a peer's slot
	adviceCalls      = 64       // calls that one piece of advice lasts

	// A replicated allreduce from sampledReduceMin bytes times its
	// reduction in one call of sampleReduceEvery (without its prefetch,
	// which would hide the placement) and copies in non-temporally when
	// advised; that advice lasts sampledAdviceCalls calls. Shorter reads
	// are too short to tell the placement.
	sampledReduceMin   = 2 << 10
	sampleReduceEvery  = 32
	sampledAdviceCalls = 1024

	// probeRead loads probeBytes of a peer's fresh lines; slower than
	// slowProbeRate (bytes/ns) is slow.
	probeBytes    = 16 << 10
	slowProbeRate = 28
)

// storeAdvice is one rank's store advice: its timings, its samples and
// the advice it reads from every rank's hint word.
type storeAdvice struct {
	ep   *shm.Endpoint
	rank int
	seq  *uint64 // the communicator's call number
	off  bool    // turned off: no timing, no advice given or taken
	over bool    // the ranks share CPUs

	// slow large reads (copies and reductions out of a peer's slot),
	// writes (publish) and probes in a row, counted apart: one kind can be
	// slow while the other is not.
	slowReads, slowWrites, slowProbes int
	samples                           uint64 // calls that could have sampled (sample)
	sink                              byte   // what probeRead loaded, kept
}

// storeAdviceOff reads the Options field and the environment variable.
func storeAdviceOff(opt Options) (bool, error) {
	switch v := os.Getenv(StoreAdviceEnv); v {
	case "", "on":
		return opt.NoStoreAdvice, nil
	case "off":
		return true, nil
	default:
		return false, fmt.Errorf("%w: %s=%q: want on or off", ErrInvalidArgument, StoreAdviceEnv, v)
	}
}

// advised reports whether some rank (this one included) asks for
// non-temporal stores in this call.
func (s *storeAdvice) advised() bool {
	if s.off {
		return false
	}
	for q := range s.ep.Size() {
		if s.ep.Hint(q).Load() >= *s.seq {
			return true
		}
	}
	return false
}

// publish copies src into this rank's slot (dst) for other ranks to read.
// Above a line and below the string copy's threshold it stores one line
// at a time (simd.CopyLines), since the readers poll those lines
// (WaitData), having first asked for all of them for writing at once
// (simd.PrefetchW, where the ranks have CPUs of their own): the readers
// hold the lines from the last call, and taking them back one store after
// another delays the post behind them; large publishes store
// non-temporally when advised.
func (s *storeAdvice) publish(dst, src []byte) {
	if len(src) > lineBytes && len(src) < simd.StringCopyThreshold {
		if !s.over {
			simd.PrefetchW(dst[:len(src)])
		}
		simd.CopyLines(dst, src)
		return
	}
	if len(src) < pipelineBytes/8 || s.over {
		simd.Copy(dst, src)
		return
	}
	if s.advised() {
		simd.CopyNT(dst, src)
		return
	}
	var t0 int64
	if s.timed(len(src)) {
		t0 = clock.Nanotime()
	}
	simd.Copy(dst, src)
	s.judge(&s.slowWrites, len(src), t0, slowCopyRate, adviceCalls)
}

// publishOwn copies src both into this rank's slot (dst) and into its own
// block of the result (mine), fuseChunk bytes at a time, so that src is
// read once, from the nearest cache: the flat allgather's own block of at
// least fuseOwnBytes. Both are string copies; the pair is judged as a
// publish of twice the bytes.
func (s *storeAdvice) publishOwn(dst, mine, src []byte) {
	var t0 int64
	if s.timed(len(src)) {
		t0 = clock.Nanotime()
	}
	for lo := 0; lo < len(src); lo += fuseChunk {
		hi := min(lo+fuseChunk, len(src))
		simd.Copy(dst[lo:hi], src[lo:hi])
		simd.Copy(mine[lo:hi], src[lo:hi])
	}
	s.judge(&s.slowWrites, 2*len(src), t0, slowCopyRate, adviceCalls)
}

// timed reports whether a copy of n bytes is timed: from timedFromBytes
// always, from pipelineBytes/8 (the smallest copy published
// non-temporally) in one call of sampleLargeEvery, where two clock reads
// would be a noticeable part of the copy.
func (s *storeAdvice) timed(n int) bool {
	return !s.off && (n >= timedFromBytes || n >= pipelineBytes/8 && s.sample(sampleLargeEvery))
}

// readStart returns the start time of a read of n bytes out of a peer's
// slot that readDone should judge, or 0.
func (s *storeAdvice) readStart(n int) int64 {
	if !s.timed(n) || s.over || s.advised() {
		return 0
	}
	return clock.Nanotime()
}

// copyDone judges a copy of n bytes out of a peer's slot begun at t0 (0:
// not timed).
func (s *storeAdvice) copyDone(n int, t0 int64) {
	s.judge(&s.slowReads, n, t0, slowCopyRate, adviceCalls)
}

// reduceDone judges a reduction of n bytes (the result) that read a
// peer's slot, begun at t0 (0: not timed).
func (s *storeAdvice) reduceDone(n int, t0 int64) {
	s.judge(&s.slowReads, n, t0, slowReduceRate, adviceCalls)
}

// sampledReduceDone judges the sampled reduction of a replicated
// allreduce (see sampledReduceMin).
func (s *storeAdvice) sampledReduceDone(n int, t0 int64) {
	s.judge(&s.slowReads, n, t0, slowReduceRate, sampledAdviceCalls)
}

// sample reports true once in every calls of its. It is counted apart
// from the call number, whose remainder repeats in a program that
// alternates collectives, which would then time all of one kind or none.
func (s *storeAdvice) sample(every uint64) bool {
	if s.off {
		return false
	}
	s.samples++
	return s.samples%every == 0
}

// copyPeer copies src, out of a peer's slot whose post was just seen,
// into dst (as long): the copy-outs of the flat bcast and allgather. From
// copyPrefetchMin to copyPrefetchMax bytes it first asks for every line
// of src (simd.Prefetch), unless the ranks share CPUs; large copies are
// judged.
func (s *storeAdvice) copyPeer(dst, src []byte) {
	n := len(src)
	if n >= copyPrefetchMin && n <= copyPrefetchMax && !s.over {
		simd.Prefetch(src)
	}
	if n < pipelineBytes/8 { // not timed (see timed)
		simd.Copy(dst, src)
		return
	}
	t0 := s.readStart(n)
	simd.Copy(dst, src)
	s.copyDone(n, t0)
}

// judge judges n bytes handled since t0 (0: not timed) against rate
// (bytes/ns): a fast one resets *slow, the second slow one in a row asks
// for non-temporal stores for the next calls calls.
func (s *storeAdvice) judge(slow *int, n int, t0 int64, rate int64, calls uint64) {
	if t0 != 0 {
		s.judgeRate(slow, n, clock.Nanotime()-t0, rate, calls)
	}
}

func (s *storeAdvice) judgeRate(slow *int, n int, d int64, rate int64, calls uint64) {
	if d <= 0 || int64(n) >= rate*d {
		*slow = 0
		return
	}
	if *slow++; *slow >= 2 {
		*slow = 0
		s.ep.Hint(s.rank).Store(*s.seq + calls)
	}
}

// probeRead times loads of the first probeBytes of src, lines a peer has
// just written, in one call of sampleLargeEvery: the placement probe of
// reductions whose own input streams from memory, so that their whole
// time tells the placement apart no better than that memory's speed. It
// does not probe while advised, since the peers' data then comes from
// memory and would keep the advice alive at any placement. The loads bring
// in lines that the reduction reads next. It reports whether some rank
// asked for non-temporal stores before this probe.
func (s *storeAdvice) probeRead(src []byte) (advised bool) {
	if s.advised() {
		return true
	}
	if !s.sample(sampleLargeEvery) {
		return false
	}
	n := min(len(src), probeBytes)
	t0 := clock.Nanotime()
	var b byte
	for i := 0; i < n; i += lineBytes {
		b += src[i]
	}
	s.sink += b
	s.judgeRate(&s.slowProbes, n, clock.Nanotime()-t0, slowProbeRate, adviceCalls)
	return false
}
