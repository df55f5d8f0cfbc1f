package shm

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// segmentPrefix is the start of every segment name of the calling user:
// shmcoll.<uid>.
func segmentPrefix() string { return "shmcoll." + strconv.Itoa(os.Getuid()) + "." }

// ValidName reports whether name can name an arena: a nonce of 1 to 64
// bytes of letters, digits, '_' and '-', not starting with '-'; or the full
// segment name shmcoll.<uid>.<nonce> with the caller's uid (as
// launch.NewArenaName makes them).
func ValidName(name string) error {
	_, err := nonceOf(name)
	return err
}

// nonceOf returns the nonce part of a valid name.
func nonceOf(name string) (string, error) {
	if strings.HasPrefix(name, "shmcoll.") {
		nonce, ok := strings.CutPrefix(name, segmentPrefix())
		if !ok {
			return "", fmt.Errorf("%w: %q: not of uid %d", ErrBadName, name, os.Getuid())
		}
		return nonce, validNonce(nonce)
	}
	return name, validNonce(name)
}

func validNonce(name string) error {
	if len(name) == 0 || len(name) > 64 {
		return fmt.Errorf("%w: %q: want 1..64 bytes", ErrBadName, name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_':
		case c == '-' && i > 0:
		default:
			return fmt.Errorf("%w: %q: byte %d (%q) is not a letter, digit, '_' or '-'", ErrBadName, name, i, c)
		}
	}
	return nil
}

// SegmentPath returns the file that holds the named arena while ranks
// join: /dev/shm/shmcoll.<uid>.<name> on Linux.
func SegmentPath(name string) (string, error) {
	nonce, err := nonceOf(name)
	if err != nil {
		return "", err
	}
	return filepath.Join(shmDir(), segmentPrefix()+nonce), nil
}

// NewName returns a fresh random arena name.
func NewName() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
