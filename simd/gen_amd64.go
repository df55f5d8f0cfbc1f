//go:build amd64 && !noasm && !purego

package simd

//go:generate sh -c "cd _gen && go run . -out ../kernels_amd64.s -stubs ../kernels_amd64_stub.go -pkg simd -dispatch ../dispatch_amd64.go"
