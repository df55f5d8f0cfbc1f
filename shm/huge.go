package shm

import (
	"os"
	"sync"
)

// A peer's cross-memory copy into or out of a rank's buffer pins every
// page of the buffer it touches, one at a time, which is most of what the
// kernel's copy costs beyond a memcpy where the pages are 4 KiB. Backed by
// huge pages, the buffer costs one pin per 2 MiB. The Go heap gets huge
// pages only where the system makes them by default, so the owner of a
// large buffer that peers copy with asks the kernel to collapse it
// (madvise MADV_COLLAPSE: the 2 MiB pages wholly inside the buffer, its
// contents kept). A collapse copies the buffer into newly allocated huge
// pages, and finding those can take the kernel as long as the pins of
// dozens of calls on the buffer (docs/PERFORMANCE.md, "Huge pages"). So it
// is made when the rank offers the same buffer for the HugeAfter-th time:
// a program that reuses a buffer that often gains more than the collapse
// costs, and one that offers it a few times (a benchmark that times one
// or two calls of each size) pays nothing. This is the rent-or-buy rule,
// with the collapse's usual cost over what it saves per call as the
// number of calls.

// EnvHugePages is the environment variable that keeps
// [Endpoint.PreferHugePages] from asking for huge pages: SHMCOLL_HUGEPAGES=off.
// "on" and the empty string leave it on. Any other value fails the join on
// every rank, as a bad SHMCOLL_CMA does.
const EnvHugePages = "SHMCOLL_HUGEPAGES"

// hugePagesOff reports whether opt or the environment turn PreferHugePages
// off, and false for ok where the variable has another value.
func hugePagesOff(opt Options) (off, ok bool) {
	switch os.Getenv(EnvHugePages) {
	case "off":
		return true, true
	case "", "on":
		return opt.NoHugePages, true
	}
	return false, false
}

// hugeRanges is how many buffers an endpoint remembers for PreferHugePages.
const hugeRanges = 8

// HugeAfter is the offer of one buffer at which PreferHugePages collapses
// it. Until then its pages are as the heap made them (4 KiB here), and a
// peer's copy pins each of them: collectives' selection keeps a far
// pair's calls that would offer such buffers on the slots until then
// (collectives/single.go, singleCold).
const HugeAfter = 32

// hugeSeen records the buffers offered to PreferHugePages: their address and
// length, and how often each was offered (HugeAfter and up: collapsed).
type hugeSeen struct {
	mu     sync.Mutex
	r      [hugeRanges]Remote
	offers [hugeRanges]int
	next   int // the entry replaced next
}

// PreferHugePages is told by the owner of b, a buffer on the heap (see
// [AddrOf]) that peers copy with by cross-memory attach in this call,
// that b is offered: the HugeAfter-th time the same buffer is offered (the
// same address and length, among the last few), the endpoint asks the kernel
// to back the 2 MiB pages inside b with huge pages, which makes the
// peers' copies cheaper from then on. It does nothing between goroutine
// ranks (their copies pin nothing), where cross-memory attach is off,
// where [Options.NoHugePages] or SHMCOLL_HUGEPAGES=off turned it off on
// this rank, or where the kernel declines (b's pages stay as they were).
// It never fails.
func (e *Endpoint) PreferHugePages(b []byte) {
	if e.inProcess || !e.cmaOn || e.noHuge || len(b) < 2*hugePage {
		return
	}
	r := Remote{AddrOf(b), len(b)}
	h := e.hugeState()
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range h.r {
		if h.r[i] == r {
			if h.offers[i] < HugeAfter {
				if h.offers[i]++; h.offers[i] == HugeAfter {
					_ = collapse(b) // a refusal leaves b's pages as they were
				}
			}
			return
		}
	}
	h.r[h.next], h.offers[h.next] = r, 1
	h.next = (h.next + 1) % hugeRanges
}

// hugeState returns e's record of offered buffers, made at the first offer.
func (e *Endpoint) hugeState() *hugeSeen {
	if h := e.huge.Load(); h != nil {
		return h
	}
	e.huge.CompareAndSwap(nil, new(hugeSeen))
	return e.huge.Load()
}

// hugePage is the size of the huge pages PreferHugePages asks for.
const hugePage = 2 << 20

// hugeInside returns the part of b made of whole hugePage-aligned pages
// (empty if there is none).
func hugeInside(b []byte) []byte {
	a := AddrOf(b)
	lo := int((a+hugePage-1)&^(hugePage-1) - a)
	hi := int((a+uintptr(len(b)))&^(hugePage-1) - a)
	if lo >= hi {
		return nil
	}
	return b[lo:hi]
}
