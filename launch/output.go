package launch

import (
	"bytes"
	"io"
	"strconv"
	"sync"
)

// maxLine bounds the partial line a prefixWriter holds back: a longer line
// is emitted in pieces, each ended by a newline.
const maxLine = 1 << 20

// prefixWriter writes whole lines, each preceded by "[rank] ", to a
// destination shared with the other ranks. It holds partial lines back so
// that lines of different ranks never interleave; mu serialises all writers
// of one job.
type prefixWriter struct {
	mu     *sync.Mutex
	dst    io.Writer
	prefix []byte
	buf    []byte // a partial line not yet written
	err    error  // the first error of dst, reported to later writes
}

func newPrefixWriter(mu *sync.Mutex, dst io.Writer, rank int) *prefixWriter {
	return &prefixWriter{mu: mu, dst: dst, prefix: []byte("[" + strconv.Itoa(rank) + "] ")}
}

// Write implements io.Writer. It always consumes all of p: an error of the
// destination is remembered and returned, but the child's pipe keeps
// draining so the child never blocks on a full pipe.
func (w *prefixWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.buf = append(w.buf, p...)
			if len(w.buf) >= maxLine {
				w.emit(nil)
			}
			break
		}
		w.emit(p[:i+1])
		p = p[i+1:]
	}
	w.mu.Lock()
	err := w.err
	w.mu.Unlock()
	return n, err
}

// emit writes prefix, the held-back partial line and rest (which ends with a
// newline, or is nil to end the line with one) as one write.
func (w *prefixWriter) emit(rest []byte) {
	line := make([]byte, 0, len(w.prefix)+len(w.buf)+len(rest)+1)
	line = append(line, w.prefix...)
	line = append(line, w.buf...)
	line = append(line, rest...)
	if rest == nil {
		line = append(line, '\n')
	}
	w.buf = w.buf[:0]
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.dst.Write(line); err != nil && w.err == nil {
		w.err = err
	}
}

// flush writes a final partial line, ended by a newline.
func (w *prefixWriter) flush() {
	if len(w.buf) > 0 {
		w.emit(nil)
	}
}

// lockedWriter serialises writes of several ranks to one destination
// without prefixing them (Config.NoPrefix).
type lockedWriter struct {
	mu  *sync.Mutex
	dst io.Writer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dst.Write(p)
}
