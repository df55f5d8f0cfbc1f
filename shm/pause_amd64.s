//go:build !purego && !noasm

#include "textflag.h"

// func pause()
TEXT ·pause(SB), NOSPLIT|NOFRAME, $0-0
	PAUSE
	RET

// func storeRelease(w *atomic.Uint64, v uint64)
// A plain store is a release store under x86-TSO, and does not wait for
// the line the way XCHG (sync/atomic's Store) does.
TEXT ·storeRelease(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ w+0(FP), AX
	MOVQ v+8(FP), BX
	MOVQ BX, (AX)
	RET

// func prefetchw(p unsafe.Pointer)
TEXT ·prefetchw(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ p+0(FP), AX
	BYTE $0x0F; BYTE $0x0D; BYTE $0x08 // PREFETCHW (AX)
	RET
