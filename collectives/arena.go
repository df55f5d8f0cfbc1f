package collectives

import (
	"fmt"
	"slices"
	"unsafe"

	"github.com/shmcoll/shmcoll/simd"
)

// heapAlign is the alignment of every buffer Alloc returns: a cache line,
// so that two buffers never share one.
const heapAlign = lineBytes

// span of a heap: [off, off+n) bytes.
type heapSpan struct{ off, n int }

// heap is the allocator of a rank's heap: the free spans in address order
// (coalesced) and the spans handed out, by offset. Only its owner uses it.
type heap struct {
	free []heapSpan
	used map[int]int
	size int
}

func (h *heap) init(size int) {
	h.size = size
	h.free = []heapSpan{{0, size}}
	h.used = map[int]int{}
}

// alloc takes n bytes (rounded up to heapAlign) from the first free span
// that holds them; ok is false when none does.
func (h *heap) alloc(n int) (off int, ok bool) {
	n = max(heapAlign, (n+heapAlign-1)&^(heapAlign-1))
	for i, s := range h.free {
		if s.n < n {
			continue
		}
		if s.n == n {
			h.free = slices.Delete(h.free, i, i+1)
		} else {
			h.free[i] = heapSpan{s.off + n, s.n - n}
		}
		h.used[s.off] = n
		return s.off, true
	}
	return 0, false
}

// release returns the span at off to the free list, merged with its free
// neighbours; ok is false when off is not the start of a span in use.
func (h *heap) release(off int) bool {
	n, ok := h.used[off]
	if !ok {
		return false
	}
	delete(h.used, off)
	i, _ := slices.BinarySearchFunc(h.free, off, func(s heapSpan, off int) int { return s.off - off })
	h.free = slices.Insert(h.free, i, heapSpan{off, n})
	for _, j := range [2]int{i, i - 1} { // with the next span, then with the previous
		if j >= 0 && j+1 < len(h.free) && h.free[j].off+h.free[j].n == h.free[j+1].off {
			h.free[j].n += h.free[j+1].n
			h.free = slices.Delete(h.free, j+1, j+2)
		}
	}
	return true
}

// largest is the longest free span.
func (h *heap) largest() int {
	m := 0
	for _, s := range h.free {
		m = max(m, s.n)
	}
	return m
}

// Alloc returns a zeroed buffer of n elements in this rank's heap in the
// arena (Options.HeapBytes), aligned to a cache line. A large collective
// call whose buffers (send and receive, or the one buffer of an in-place
// call or of Bcast) all come from Alloc on every rank lets the ranks read
// each other's buffers in place ([Direct]); if some ranks pass arena
// buffers and others do not, the call fails on every rank with
// ErrMismatch. The buffer is valid until Free or Close and belongs to the
// calling rank: the others read it only within a collective call that it
// is passed to. Alloc is not safe for concurrent use with other calls on
// c.
func Alloc[T simd.Element](c *Comm, n int) ([]T, error) {
	esz := simd.TypeOf[T]().Size()
	if c.closed {
		return nil, ErrClosed
	}
	if n < 0 || n > c.ep.HeapBytes()/esz {
		return nil, fmt.Errorf("%w: Alloc of %d elements of %d bytes: the heap has %d bytes (Options.HeapBytes)", ErrInvalidArgument, n, esz, c.ep.HeapBytes())
	}
	if c.heap.used == nil {
		c.heap.init(c.ep.HeapBytes())
	}
	off, ok := c.heap.alloc(n * esz)
	if !ok {
		return nil, fmt.Errorf("%w: Alloc of %d bytes: the largest free span of the %d-byte heap has %d", ErrHeapFull, n*esz, c.heap.size, c.heap.largest())
	}
	b := c.ep.Heap(c.rank)[off : off+n*esz]
	clear(b)
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n), nil
}

// Free returns a buffer that Alloc gave to the heap. buf must begin where
// the buffer did (its length does not matter); freeing anything else is an
// error, and the heap is left as it was.
func Free[T simd.Element](c *Comm, buf []T) error {
	if c.closed {
		return ErrClosed
	}
	off, ok := c.heapOffset(unsafe.Pointer(unsafe.SliceData(buf)), 0)
	if !ok || buf == nil || !c.heap.release(off) {
		return fmt.Errorf("%w: Free of a buffer that Alloc did not return", ErrInvalidArgument)
	}
	return nil
}

// heapOffset returns the offset in this rank's heap of the n bytes at ptr,
// and whether they lie in it.
func (c *Comm) heapOffset(ptr unsafe.Pointer, n int) (int, bool) {
	h := c.ep.Heap(c.rank)
	if len(h) == 0 || ptr == nil {
		return 0, false
	}
	d := uintptr(ptr) - uintptr(unsafe.Pointer(&h[0]))
	if d > uintptr(len(h)) || uintptr(n) > uintptr(len(h))-d {
		return 0, false
	}
	return int(d), true
}

// heapOrEmpty reports whether b is empty or lies in this rank's heap.
func (c *Comm) heapOrEmpty(b []byte) bool {
	_, ok := c.heapOffset(unsafe.Pointer(unsafe.SliceData(b)), len(b))
	return ok || len(b) == 0
}
