package shm

import "strings"

func stringsContains(s, sub string) bool { return strings.Contains(s, sub) }
