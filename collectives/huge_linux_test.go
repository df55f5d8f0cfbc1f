package collectives

import (
	"bufio"
	"fmt"
	"os"
	"strings"
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
