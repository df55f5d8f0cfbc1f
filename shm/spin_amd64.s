//go:build !purego && !noasm && !race

#include "textflag.h"

// func spinUntil(w *atomic.Uint64, v uint64, n int, data *byte, dlen int) bool
// The loop starts on a cache line of its own (PCALIGN), so that its timing
// does not depend on where the linker places it. A plain load is an
// acquire load under x86-TSO.
TEXT ·spinUntil(SB), NOSPLIT|NOFRAME, $0-41
	MOVQ w+0(FP), AX
	MOVQ v+8(FP), BX
	MOVQ n+16(FP), CX
	MOVQ data+24(FP), SI
	MOVQ dlen+32(FP), DX
	PCALIGN $64
loop:
	MOVQ (AX), R8
	CMPQ R8, BX
	JAE  reached
	XORQ R9, R9
touch:
	CMPQ R9, DX
	JAE  next
	MOVBLZX (SI)(R9*1), R10
	ADDQ $64, R9
	JMP  touch
next:
	DECQ CX
	JNZ  loop
	MOVB $0, ret+40(FP)
	RET
reached:
	MOVB $1, ret+40(FP)
	RET
