//go:build amd64 && !noasm && !purego

#include "textflag.h"

// func copyRepMovsb(dst, src *byte, n int)
TEXT ·copyRepMovsb(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	CLD
	REP; MOVSB
	RET
