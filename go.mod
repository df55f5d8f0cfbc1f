module github.com/shmcoll/shmcoll

go 1.26.0

require (
	github.com/edsrzf/mmap-go v1.2.0 // indirect
	github.com/klauspost/cpuid/v2 v2.4.2 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
