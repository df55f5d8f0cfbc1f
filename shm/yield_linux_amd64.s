//go:build !purego && !noasm

#include "textflag.h"

// func schedYield()
TEXT ·schedYield(SB), NOSPLIT|NOFRAME, $0-0
	MOVQ $24, AX // SYS_sched_yield
	SYSCALL
	RET
