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

// func copyLinesAVX512(dst, src *byte, n int)
// n > 0: 64-byte loads and stores, the last (n%64 bytes) masked, so that a
// line-aligned dst takes one store per line.
TEXT ·copyLinesAVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	CMPQ CX, $64
	JB   tail
loop:
	VMOVDQU64 (SI), Z0
	VMOVDQU64 Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $64, CX
	CMPQ CX, $64
	JAE  loop
	TESTQ CX, CX
	JZ   done
tail:
	// mask of the low CX bytes
	MOVQ $-1, AX
	SHLQ CX, AX
	NOTQ AX
	KMOVQ AX, K1
	VMOVDQU8 (SI), K1, Z0
	VMOVDQU8 Z0, K1, (DI)
done:
	VZEROUPPER
	RET

// func prefetchLines(p *byte, n int)
// PREFETCHT0 of every 64-byte line of [p, p+n).
TEXT ·prefetchLines(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
ploop:
	CMPQ CX, $0
	JLE  pdone
	PREFETCHT0 (SI)
	ADDQ $64, SI
	SUBQ $64, CX
	JMP  ploop
pdone:
	RET

// func prefetchwLines(p *byte, n int)
// PREFETCHW of every 64-byte line of [p, p+n), encoded by hand (0F 0D /1):
// the assembler does not know the instruction.
TEXT ·prefetchwLines(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
pwloop:
	CMPQ CX, $0
	JLE  pwdone
	BYTE $0x0F; BYTE $0x0D; BYTE $0x0E // PREFETCHW (SI)
	ADDQ $64, SI
	SUBQ $64, CX
	JMP  pwloop
pwdone:
	RET

// func extFeatures() uint32
// ECX of CPUID leaf 0x80000001 (extended features; bit 8 is PRFCHW).
TEXT ·extFeatures(SB), NOSPLIT, $0-4
	MOVL $0x80000001, AX
	XORL CX, CX
	CPUID
	MOVL CX, ret+0(FP)
	RET
