package main

import (
	"fmt"
	"io"
	"strings"
)

// progress is the terminal's progress line: cases done out of total and
// the last case, redrawn in place and cleared before a result is printed.
//
// It is not a progress-bar package: those pull in net/http, and a binary
// that imports net links the C library when cgo is available. glibc
// registers rseq for each thread, and the kernel then updates that area on
// every return to a rank after a context switch, a cost that oversubscribed
// ranks pay in every small collective; shmbench starts its ranks from its
// own binary.
type progress struct {
	w           io.Writer
	total, done int
	shown       bool
}

const progressWidth = 30

// step counts one case done and shows it.
func (p *progress) step(last string) {
	p.done++
	n := progressWidth * p.done / max(p.total, 1)
	bar := strings.Repeat("#", n) + strings.Repeat(" ", progressWidth-n)
	fmt.Fprintf(p.w, "\r\x1b[Kshmbench [%s] %d/%d %s", bar, p.done, p.total, last)
	p.shown = true
}

// Clear erases the line, if one is shown.
func (p *progress) Clear() {
	if p.shown {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.shown = false
	}
}
