package collectives

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// anonHugeAt returns the AnonHugePages (KiB) of the mapping of this
// process that holds b's first byte (-1 if smaps cannot tell).
func anonHugeAt[T any](b []T) int {
	addr := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return -1
	}
	defer f.Close()
	in := false
	for s := bufio.NewScanner(f); s.Scan(); {
		line := s.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x", &lo, &hi); n == 2 && strings.Contains(line[:strings.IndexByte(line, ' ')], "-") {
			in = lo <= addr && addr < hi
			continue
		}
		var kb int
		if in && strings.HasPrefix(line, "AnonHugePages:") {
			if _, err := fmt.Sscanf(line, "AnonHugePages: %d kB", &kb); err == nil {
				return kb
			}
		}
	}
	return -1
}

// kernelCollapses reports whether madvise(MADV_COLLAPSE) backs a fresh
// heap buffer by huge pages here.
func kernelCollapses() bool {
	b := make([]byte, 8<<20)
	for i := range b {
		b[i] = byte(i)
	}
	a := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo := int((a+2<<20-1)&^(2<<20-1) - a)
	return unix.Madvise(b[lo:lo+2<<20], unix.MADV_COLLAPSE) == nil
}

// apartMappings returns two buffers of n int64s, each in an anonymous
// mapping of its own (an inaccessible page between them keeps the kernel
// from merging them), so that smaps tells their huge pages apart; they
// are unmapped when t ends.
func apartMappings(t *testing.T, n int) (a, b []int64) {
	const page = 4096
	size := (8*n + page - 1) &^ (page - 1)
	m, err := unix.Mmap(-1, 0, 2*size+page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Munmap(m) })
	if err := unix.Mprotect(m[size:size+page], unix.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	a = unsafe.Slice((*int64)(unsafe.Pointer(&m[0])), n)
	b = unsafe.Slice((*int64)(unsafe.Pointer(&m[size+page])), n)
	return a, b
}
