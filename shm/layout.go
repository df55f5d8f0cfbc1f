package shm

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"os"
	"time"
)

// Public layout constants.
const (
	// NumCounters is the number of 64-bit counters each rank owns.
	NumCounters = 8
	// InlineBytes is the number of payload bytes beside each counter, in the
	// counter's cache line, for tiny messages.
	InlineBytes = 48
	// DescriptorBytes is the size of each rank's call-descriptor area.
	DescriptorBytes = 384
	// DefaultSlotBytes is the data slot size used when Options.SlotBytes is 0.
	DefaultSlotBytes = 4 << 20
	// MaxRanks is the largest number of ranks an arena holds.
	MaxRanks = 4096
	// MaxSlotBytes is the largest data slot.
	MaxSlotBytes = 1 << 36
	// MaxHeapBytes is the largest heap (see Options.HeapBytes).
	MaxHeapBytes = 1 << 40
)

// Format constants, recorded in the header and checked on attach.
const (
	magic        = 0x316c6c6f636d6873 // "shmcoll1", little-endian
	version      = 4
	headerBytes  = 4096
	ctrlStride   = 2048
	counterLine  = 128 // bytes per counter (two cache lines: the adjacent-line prefetcher pairs lines)
	counterBase  = 1024
	abortText    = 352
	maxTotal     = 1 << 46
	defaultTmout = 2 * time.Second
)

// Header field offsets (bytes from the start of the arena).
const (
	hMagic        = 0  // u64, stored last (release) by the creator
	hVersion      = 8  // u32
	hHeaderBytes  = 12 // u32
	hRanks        = 16 // u32
	hCtrlStride   = 20 // u32
	hCounterLine  = 24 // u32
	hNumCounters  = 28 // u32
	hInlineBytes  = 32 // u32
	hDescBytes    = 36 // u32
	hSlotBytes    = 40 // u64
	hSlotsOff     = 48 // u64
	hTotal        = 56 // u64
	hCreatorPID   = 64 // u32
	hKind         = 68 // u32
	hCreatorStart = 72 // u64
	hUID          = 80 // u32
	hPageSize     = 84 // u32
	hHeapBytes    = 88 // u64
	hChecksum     = 96 // u64: FNV-1a of bytes [8, 96)
	hAttached     = 128
	hAbort        = 256 // u64: 0, or 1+rank of the first aborting rank
)

// Control block field offsets (bytes from the start of a rank's block).
const (
	cState     = 0  // u32: stateFree, stateJoining, stateJoined, stateLeft
	cPID       = 4  // u32
	cStart     = 8  // u64: process start time (clock ticks since boot), for pid reuse
	cAbortKind = 16 // u32
	cAbortPeer = 20 // i32
	cAbortPID  = 24 // u32
	cAbortLen  = 28 // u32
	cAbortText = 32 // abortText bytes
	cDesc      = 384
	cJoinValue = 768 // u64: Options.JoinValue, written before the rank counts itself joined
	cHint      = 896 // u64 in a line of its own: Endpoint.Hint
	// counters from counterBase: counter u64 at +0, inline bytes at
	// +8..+56; the sleeper count u32 at +64, in the second line, so that a
	// poster reads it without waiting for the counter's line (see Post).
	kInline   = 8
	kSleepers = 64
)

// The join value lies between the descriptor area and the counters.
const (
	_ = uint(cJoinValue - (cDesc + DescriptorBytes))
	_ = uint(cHint - (cJoinValue + 64))
	_ = uint(counterBase - (cHint + 64))
)

const (
	stateFree    = 0
	stateJoined  = 1
	stateLeft    = 2
	stateJoining = 3 // claimed, pid being written
)

// Arena kinds recorded in the header.
const (
	kindNamed = 1
	kindMemfd = 2
	kindLocal = 3
)

// layout is the geometry of one arena: the header page, the control blocks,
// the ranks' data slots, then the ranks' heaps (none when heapBytes is 0).
type layout struct {
	ranks     int
	slotBytes int
	heapBytes int
	pageSize  int
	slotsOff  int
	heapsOff  int
	total     int
}

// sizes are the per-rank sizes a caller asks for: 0 means the default
// (creator) or the creator's choice (joiner).
type sizes struct{ slot, heap int }

func (o Options) sizes() sizes { return sizes{o.SlotBytes, o.HeapBytes} }

func newLayout(ranks int, sz sizes) (layout, error) {
	slotBytes, heapBytes := sz.slot, sz.heap
	if ranks < 1 || ranks > MaxRanks {
		return layout{}, fmt.Errorf("%w: %d ranks (want 1..%d)", ErrBadSize, ranks, MaxRanks)
	}
	if slotBytes == 0 {
		slotBytes = DefaultSlotBytes
	}
	if slotBytes < 0 || slotBytes > MaxSlotBytes {
		return layout{}, fmt.Errorf("%w: slot of %d bytes (want 0..%d)", ErrBadSize, slotBytes, MaxSlotBytes)
	}
	if heapBytes < 0 || heapBytes > MaxHeapBytes {
		return layout{}, fmt.Errorf("%w: heap of %d bytes (want 0..%d)", ErrBadSize, heapBytes, MaxHeapBytes)
	}
	page := os.Getpagesize()
	l := layout{ranks: ranks, pageSize: page}
	l.slotBytes = roundUp(slotBytes, page)
	l.heapBytes = roundUp(heapBytes, page)
	l.slotsOff = roundUp(headerBytes+ranks*ctrlStride, page)
	if uint64(l.slotBytes+l.heapBytes)*uint64(ranks) > maxTotal-uint64(l.slotsOff) {
		return layout{}, fmt.Errorf("%w: %d ranks of %d-byte slots and %d-byte heaps exceed %d bytes", ErrBadSize, ranks, l.slotBytes, l.heapBytes, maxTotal)
	}
	l.heapsOff = l.slotsOff + ranks*l.slotBytes
	l.total = l.heapsOff + ranks*l.heapBytes
	return l, nil
}

func roundUp(n, m int) int { return (n + m - 1) / m * m }

var ne = binary.NativeEndian

// writeHeader fills the header fields of mem except the magic, which the
// creator stores last.
func (l layout) writeHeader(mem []byte, kind int, pid int, start uint64) {
	h := mem[:headerBytes]
	ne.PutUint32(h[hVersion:], version)
	ne.PutUint32(h[hHeaderBytes:], headerBytes)
	ne.PutUint32(h[hRanks:], uint32(l.ranks))
	ne.PutUint32(h[hCtrlStride:], ctrlStride)
	ne.PutUint32(h[hCounterLine:], counterLine)
	ne.PutUint32(h[hNumCounters:], NumCounters)
	ne.PutUint32(h[hInlineBytes:], InlineBytes)
	ne.PutUint32(h[hDescBytes:], DescriptorBytes)
	ne.PutUint64(h[hSlotBytes:], uint64(l.slotBytes))
	ne.PutUint64(h[hHeapBytes:], uint64(l.heapBytes))
	ne.PutUint64(h[hSlotsOff:], uint64(l.slotsOff))
	ne.PutUint64(h[hTotal:], uint64(l.total))
	ne.PutUint32(h[hCreatorPID:], uint32(pid))
	ne.PutUint32(h[hKind:], uint32(kind))
	ne.PutUint64(h[hCreatorStart:], start)
	ne.PutUint32(h[hUID:], uint32(os.Getuid()))
	ne.PutUint32(h[hPageSize:], uint32(l.pageSize))
	ne.PutUint64(h[hChecksum:], headerSum(h))
}

func headerSum(h []byte) uint64 {
	f := fnv.New64a()
	f.Write(h[hVersion:hChecksum])
	return f.Sum64()
}

// parsedHeader is what readHeader found in a header page.
type parsedHeader struct {
	layout
	kind         int
	creatorPID   int
	creatorStart uint64
	uid          int
}

// readHeader decodes and checks a header page (at least headerBytes long,
// magic already seen) without trusting any field: every problem is an error
// wrapping ErrBadHeader, never a panic.
func readHeader(h []byte) (parsedHeader, error) {
	var p parsedHeader
	if len(h) < headerBytes {
		return p, fmt.Errorf("%w: truncated: %d bytes, header needs %d", ErrBadHeader, len(h), headerBytes)
	}
	if m := ne.Uint64(h[hMagic:]); m != magic {
		return p, fmt.Errorf("%w: not a shmcoll arena (magic %#x)", ErrBadHeader, m)
	}
	if v := ne.Uint32(h[hVersion:]); v != version {
		return p, fmt.Errorf("%w: format version %d, this library reads %d", ErrBadHeader, v, version)
	}
	if sum := headerSum(h); sum != ne.Uint64(h[hChecksum:]) {
		return p, fmt.Errorf("%w: header checksum mismatch (corrupted)", ErrBadHeader)
	}
	type field struct {
		name      string
		got, want uint32
	}
	for _, f := range []field{
		{"header size", ne.Uint32(h[hHeaderBytes:]), headerBytes},
		{"control block size", ne.Uint32(h[hCtrlStride:]), ctrlStride},
		{"counter spacing", ne.Uint32(h[hCounterLine:]), counterLine},
		{"counters per rank", ne.Uint32(h[hNumCounters:]), NumCounters},
		{"inline bytes", ne.Uint32(h[hInlineBytes:]), InlineBytes},
		{"descriptor bytes", ne.Uint32(h[hDescBytes:]), DescriptorBytes},
		{"page size", ne.Uint32(h[hPageSize:]), uint32(os.Getpagesize())},
	} {
		if f.got != f.want {
			return p, fmt.Errorf("%w: %s is %d, this library uses %d", ErrBadHeader, f.name, f.got, f.want)
		}
	}
	ranks := ne.Uint32(h[hRanks:])
	slot := ne.Uint64(h[hSlotBytes:])
	heap := ne.Uint64(h[hHeapBytes:])
	if ranks < 1 || ranks > MaxRanks || slot > MaxSlotBytes || heap > MaxHeapBytes {
		return p, fmt.Errorf("%w: %d ranks of %d-byte slots and %d-byte heaps out of range", ErrBadHeader, ranks, slot, heap)
	}
	l, err := newLayout(int(ranks), sizes{int(slot), int(heap)})
	if err != nil {
		return p, fmt.Errorf("%w: %v", ErrBadHeader, err)
	}
	if l.slotBytes != int(slot) || l.heapBytes != int(heap) || uint64(l.slotsOff) != ne.Uint64(h[hSlotsOff:]) || uint64(l.total) != ne.Uint64(h[hTotal:]) {
		return p, fmt.Errorf("%w: inconsistent layout (slots at %d, total %d)", ErrBadHeader,
			ne.Uint64(h[hSlotsOff:]), ne.Uint64(h[hTotal:]))
	}
	p.layout = l
	p.kind = int(ne.Uint32(h[hKind:]))
	p.creatorPID = int(ne.Uint32(h[hCreatorPID:]))
	p.creatorStart = ne.Uint64(h[hCreatorStart:])
	p.uid = int(ne.Uint32(h[hUID:]))
	return p, nil
}

// matches checks that the header agrees with what a joining rank expects.
// A size of 0 accepts the creator's.
func (p parsedHeader) matches(ranks int, sz sizes) error {
	if p.ranks != ranks {
		return fmt.Errorf("%w: arena has %d ranks, caller expects %d", ErrBadHeader, p.ranks, ranks)
	}
	if sz.slot != 0 && roundUp(sz.slot, p.pageSize) != p.slotBytes {
		return fmt.Errorf("%w: arena slots are %d bytes, caller expects %d", ErrBadHeader, p.slotBytes, roundUp(sz.slot, p.pageSize))
	}
	if sz.heap != 0 && roundUp(sz.heap, p.pageSize) != p.heapBytes {
		return fmt.Errorf("%w: arena heaps are %d bytes, caller expects %d", ErrBadHeader, p.heapBytes, roundUp(sz.heap, p.pageSize))
	}
	return nil
}
