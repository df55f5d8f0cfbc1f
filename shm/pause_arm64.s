//go:build !purego && !noasm

#include "textflag.h"

// func pause()
TEXT ·pause(SB), NOSPLIT|NOFRAME, $0-0
	YIELD
	RET

// func storeRelease(w *atomic.Uint64, v uint64)
TEXT ·storeRelease(SB), NOSPLIT|NOFRAME, $0-16
	MOVD w+0(FP), R0
	MOVD v+8(FP), R1
	STLR R1, (R0)
	RET

// func prefetchw(p unsafe.Pointer)
TEXT ·prefetchw(SB), NOSPLIT|NOFRAME, $0-8
	MOVD p+0(FP), R0
	PRFM (R0), PSTL1KEEP
	RET
