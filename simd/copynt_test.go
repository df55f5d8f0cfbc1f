package simd

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestCopyNT: CopyNT copies exactly, at every length and alignment, leaves
// the guard bands alone, copies the shorter length, and falls back to a
// memmove for overlapping buffers.
func TestCopyNT(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 31, 63, 64, 255, 256, 257, 1000, 4096 + 17, 100000} {
		for range 4 {
			src := make([]byte, n)
			for i := range src {
				src[i] = byte(rng.Uint32())
			}
			d := newBuffer(n, rng.IntN(64))
			s := newBuffer(n, rng.IntN(64))
			copy(s.bytes(), src)
			CopyNT(d.bytes(), s.bytes())
			if !bytes.Equal(d.bytes(), src) {
				t.Fatalf("n %d: copy differs", n)
			}
			d.checkGuard(t, "dst")
		}
	}
	short := make([]byte, 4)
	CopyNT(short, []byte("abcdefgh"))
	if string(short) != "abcd" {
		t.Fatalf("shorter destination: got %q", short)
	}
	buf := []byte("0123456789")
	CopyNT(buf[2:], buf)
	if string(buf) != "0101234567" {
		t.Fatalf("overlapping forward: got %q", buf)
	}
	buf = []byte("0123456789")
	CopyNT(buf, buf[2:])
	if string(buf) != "2345678989" {
		t.Fatalf("overlapping backward: got %q", buf)
	}
}
