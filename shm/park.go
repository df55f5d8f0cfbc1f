package shm

import (
	"sync"
	"sync/atomic"
	"time"
)

// parker lets goroutine ranks of an in-process arena sleep in the Go
// scheduler instead of blocking an OS thread in a futex: a sleeping
// goroutine costs no thread, and a wake is a goroutine switch. There is one
// slot per counter of the arena.
//
// The handshake is the futex one with a channel for the futex word: a
// waiter takes the counter's current channel, then counts itself in the
// counter's sleepers, then rechecks the counter before it blocks; a poster
// stores the counter, then, if it sees sleepers, closes the channel (and a
// later waiter makes a new one). Either the poster sees the waiter, or the
// waiter's recheck sees the post.
type parker struct {
	slots []parkSlot
}

type parkSlot struct {
	mu sync.Mutex
	ch chan struct{}
}

func newParker(ranks int) *parker {
	return &parker{slots: make([]parkSlot, ranks*NumCounters)}
}

// channel returns the channel the next wake of slot i closes.
func (p *parker) channel(i int) chan struct{} {
	s := &p.slots[i]
	s.mu.Lock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	ch := s.ch
	s.mu.Unlock()
	return ch
}

// wake wakes every goroutine sleeping on slot i.
func (p *parker) wake(i int) {
	s := &p.slots[i]
	s.mu.Lock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
	s.mu.Unlock()
}

// sleepParked is the sleep phase of a wait for counter w (slot i) to
// reach v, in the Go scheduler; it returns like the futex loop.
func (e *Endpoint) sleepParked(i int, w *atomic.Uint64, v uint64, done <-chan struct{}, check func(int64) error) error {
	aw := e.abortWord()
	sl := sleepers(w)
	t := time.NewTimer(e.sleepFor)
	defer t.Stop()
	for {
		ch := e.park.channel(i)
		sl.Add(1)
		if w.Load() < v && aw.Load() == 0 {
			select {
			case <-ch:
			case <-done:
			case <-t.C:
				e.sleepTimeouts.Add(1)
			}
		}
		sl.Add(^uint32(0))
		if w.Load() >= v {
			return e.doneErr()
		}
		if err := check(nanotime()); err != nil {
			return err
		}
		t.Reset(e.sleepFor)
	}
}
