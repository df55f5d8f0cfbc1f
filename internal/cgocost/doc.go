// Package cgocost measures what one call from C into Go costs, the
// transition every call that libshmcoll serves makes (docs/LIBSHMCOLL.md):
// a C loop calls an exported Go function that returns its argument plus
// one, with the C thread spinning for a given time between calls, as a
// program's own work between two collectives does. Run it with
//
//	go test -tags mpi -bench . ./internal/cgocost
//
// It is a cgo package, so it builds only with the mpi tag, like the rest of
// the project's cgo.
package cgocost
