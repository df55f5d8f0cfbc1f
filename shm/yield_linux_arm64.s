//go:build !purego && !noasm

#include "textflag.h"

// func schedYield()
TEXT ·schedYield(SB), NOSPLIT|NOFRAME, $0-0
	MOVD $124, R8 // SYS_sched_yield
	SVC
	RET
