//go:build linux

package shm

import (
	"context"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// FuzzJoinFile: joining a file of arbitrary contents and length fails
// cleanly or gives an endpoint whose every view lies inside the file.
func FuzzJoinFile(f *testing.F) {
	for _, s := range headerSeeds() {
		f.Add(s, uint32(0), true)
		f.Add(s, uint32(1<<20), true)
	}
	f.Add([]byte{}, uint32(100), false)
	f.Fuzz(func(t *testing.T, data []byte, length uint32, fixSum bool) {
		if fixSum {
			resum(data)
		}
		length %= 1 << 21
		fd, err := unix.MemfdCreate("shmcoll-fuzz", unix.MFD_CLOEXEC)
		if err != nil {
			t.Skip(err)
		}
		file := os.NewFile(uintptr(fd), "fuzz")
		defer file.Close()
		unix.Fchmod(fd, 0o600)
		if _, err := file.Write(data); err != nil {
			t.Fatal(err)
		}
		if int64(length) > int64(len(data)) {
			file.Truncate(int64(length))
		}
		opt := Options{JoinTimeout: time.Millisecond, Timeout: time.Millisecond}
		e, err := JoinFile(context.Background(), file, 0, 1, opt)
		if err != nil {
			return
		}
		defer e.Close()
		st, _ := file.Stat()
		if int64(e.lay.total) > st.Size() {
			t.Fatalf("mapped %d bytes of a %d-byte file", e.lay.total, st.Size())
		}
		e.Slot(0)[e.SlotBytes()-1] = 1
		e.Post(NumCounters-1, 3)
		if err := e.Wait(context.Background(), 0, NumCounters-1, 3); err != nil {
			t.Fatal(err)
		}
	})
}
