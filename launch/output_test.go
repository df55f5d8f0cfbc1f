package launch

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"
)

func TestPrefixWriter(t *testing.T) {
	var mu sync.Mutex
	var out bytes.Buffer
	a, b := newPrefixWriter(&mu, &out, 0), newPrefixWriter(&mu, &out, 12)
	for _, step := range []struct {
		w *prefixWriter
		s string
	}{
		{a, "hel"}, {b, "other\nsec"}, {a, "lo\nwor"}, {b, "ond\n"}, {a, "ld\n\nlast"},
	} {
		if n, err := step.w.Write([]byte(step.s)); n != len(step.s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", step.s, n, err)
		}
	}
	a.flush()
	b.flush()
	want := "[12] other\n[0] hello\n[12] second\n[0] world\n[0] \n[0] last\n"
	if out.String() != want {
		t.Fatalf("got %q\nwant %q", out.String(), want)
	}
}

func TestPrefixWriterLongLine(t *testing.T) {
	var mu sync.Mutex
	var out bytes.Buffer
	w := newPrefixWriter(&mu, &out, 3)
	long := strings.Repeat("x", maxLine+10)
	// A line that stays under the limit is held back whole.
	w.Write([]byte(long[:maxLine-1]))
	w.Write([]byte(long[maxLine-1:] + "\n"))
	// A partial line that reaches the limit is cut there.
	w.Write([]byte(long))
	w.Write([]byte("y\n"))
	want := "[3] " + long + "\n[3] " + long + "\n[3] y\n"
	if out.String() != want {
		t.Fatalf("long line: got %d bytes, want %d", out.Len(), len(want))
	}
}

type failWriter struct{}

func (failWriter) Write(p []byte) (int, error) { return 0, errors.New("disk full") }

func TestPrefixWriterError(t *testing.T) {
	var mu sync.Mutex
	w := newPrefixWriter(&mu, failWriter{}, 0)
	if n, err := w.Write([]byte("a\nb")); n != 3 || err == nil {
		t.Fatalf("Write to a failing destination = %d, %v; want 3 and the error", n, err)
	}
}
