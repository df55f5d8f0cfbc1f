package clock

import (
	"testing"
	"time"
)

// TestNanotime: the clock does not go back and advances with time.Sleep.
func TestNanotime(t *testing.T) {
	a := Nanotime()
	time.Sleep(2 * time.Millisecond)
	b := Nanotime()
	if d := b - a; d < int64(2*time.Millisecond) || d > int64(10*time.Second) {
		t.Fatalf("2 ms sleep measured %d ns", d)
	}
}
