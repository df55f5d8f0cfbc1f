// Package mpibench is the MPI side of `shmbench compare`: a small C
// benchmark of our own (mpicoll.c, embedded) that times MPI collectives with
// the method of docs/DESIGN.md, built with an MPI's compiler wrapper into the user
// cache and launched with that MPI's mpirun, and a parser of its JSON lines.
//
// Nothing here needs cgo or the mpi build tag: the benchmark is compiled at
// run time by [Build], and [Find] says exactly what is missing when an MPI is
// not installed. Nothing is installed on the user's behalf.
package mpibench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shmcoll/shmcoll/mpi"
)

//go:embed mpicoll.c
var source []byte

// Colls are the collectives the benchmark measures, by their docs/DESIGN.md names.
var Colls = []string{"allreduce", "reduce_scatter_block", "allgather", "bcast", "reduce", "barrier", "alltoall", "reduce_scatter", "allgatherv", "alltoallv", "gather", "scatter"}

// HierColls are the collectives of Colls that the hierarchical benchmark
// (hiercoll) measures: the others have no hierarchical version there.
var HierColls = []string{"allreduce", "reduce_scatter_block", "allgather", "bcast", "reduce"}

// Dtypes are the element types the benchmark supports (the operator is sum).
var Dtypes = []string{"float64", "float32", "int32", "int64"}

// ErrCheck marks a run in which the benchmark found a wrong result.
var ErrCheck = errors.New("mpibench: result verification failed")

// Find reports every supported MPI, installed or not; an Installation's
// Missing lists exactly which commands are absent and which Debian packages
// provide them.
func Find() []mpi.Installation { return mpi.Find() }

// Build compiles the benchmark with impl's mpicc into
// os.UserCacheDir()/shmcoll/mpibench, keyed by a hash of the source and the
// compiler, and returns the binary's path. A cached binary is reused.
func Build(ctx context.Context, impl mpi.Impl) (string, error) {
	return BuildWith(ctx, mpi.Lookup(impl))
}

// BuildWith is [Build] with the MPI installation in: a site MPI whose
// compiler wrapper and launcher were named by path. in.Impl says which
// launch line it takes (Open MPI's or MPICH's Hydra).
func BuildWith(ctx context.Context, in mpi.Installation) (string, error) {
	impl := in.Impl
	if err := in.Err(); err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("mpibench: no cache directory: %w", err)
	}
	h := sha256.New()
	h.Write(source)
	fmt.Fprintf(h, "\x00%s\x00%s", impl, in.MPICC)
	if st, err := os.Stat(in.MPICC); err == nil {
		fmt.Fprintf(h, "\x00%d", st.ModTime().UnixNano())
	}
	dir := filepath.Join(cache, "shmcoll", "mpibench")
	bin := filepath.Join(dir, fmt.Sprintf("mpicoll.%s.%s", impl, hex.EncodeToString(h.Sum(nil))[:16]))
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("mpibench: %w", err)
	}
	// Compile in a private directory and rename into place, so concurrent
	// builds never see a partial binary.
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", fmt.Errorf("mpibench: %w", err)
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "mpicoll.c")
	if err := os.WriteFile(src, source, 0o644); err != nil {
		return "", fmt.Errorf("mpibench: %w", err)
	}
	out := filepath.Join(tmp, "mpicoll")
	cmd := exec.CommandContext(ctx, in.MPICC, "-O2", "-Wall", "-o", out, src)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("mpibench: %s failed: %v\n%s", strings.Join(cmd.Args, " "), err, msg)
	}
	if err := os.Rename(out, bin); err != nil {
		return "", fmt.Errorf("mpibench: %w", err)
	}
	return bin, nil
}

// Options select what a Run measures.
type Options struct {
	NP    int      // ranks (required)
	Colls []string // collectives (names in Colls); nil means all
	Sizes []int64  // bytes (docs/DESIGN.md's convention); nil means 8 B to 64 MiB by 8x
	// Iters fixes the number of timed iterations per size; when 0 the
	// iterations run until Time has passed on the slowest rank (at least 5).
	Iters  int
	Time   time.Duration // per size when Iters is 0; 0 means 300 ms
	Warmup time.Duration // warm-up per size; 0 means 20 ms, negative means none
	Dtype  string        // element type (Dtypes); "" means float64
	// Env is added to the ranks' environment.
	Env []string
	// Inject is a test hook: > 0 makes rank 0 corrupt its result after timed
	// iteration Inject-1, which verification must catch.
	Inject int
	// Hier runs shmcoll's hierarchical collectives (hiercoll, built by
	// [BuildHier]) under this MPI instead of the library's own; NodeSize
	// is then its SHMCOLL_NODE_SIZE ("" : one node).
	Hier     bool
	NodeSize string
	// Preload is a shared library the ranks run with in LD_PRELOAD (an
	// MPI interposer such as libshmcoll), given to the ranks through the
	// launcher's own option so that the launcher itself does not load it.
	Preload string
	// ServedBarrier makes the barrier before every iteration call
	// MPI_Barrier, which an interposer serves, as the Intel MPI Benchmarks
	// and the OSU benchmarks time, instead of PMPI_Barrier, the MPI's own
	// in runs with and without an interposer alike. Plain MPI runs the same
	// barrier either way, and so does Hier (hiercoll preloads nothing).
	ServedBarrier bool
}

// Args is the benchmark's command line for o (without the program name).
func (o Options) Args() ([]string, error) {
	var args []string
	if len(o.Colls) > 0 {
		for _, c := range o.Colls {
			if !slices.Contains(Colls, c) {
				return nil, fmt.Errorf("mpibench: unknown collective %q (known: %s)", c, strings.Join(Colls, ", "))
			}
		}
		args = append(args, "-c", strings.Join(o.Colls, ","))
	}
	if len(o.Sizes) > 0 {
		if len(o.Sizes) > 256 {
			return nil, fmt.Errorf("mpibench: %d sizes, at most 256", len(o.Sizes))
		}
		s := make([]string, len(o.Sizes))
		for i, b := range o.Sizes {
			if b < 0 {
				return nil, fmt.Errorf("mpibench: negative size %d", b)
			}
			s[i] = strconv.FormatInt(b, 10)
		}
		args = append(args, "-s", strings.Join(s, ","))
	}
	switch {
	case o.Iters < 0:
		return nil, fmt.Errorf("mpibench: negative Iters %d", o.Iters)
	case o.Iters > 0:
		args = append(args, "-n", strconv.Itoa(o.Iters))
	case o.Time > 0:
		args = append(args, "-t", strconv.FormatFloat(o.Time.Seconds(), 'g', -1, 64))
	}
	switch {
	case o.Warmup < 0:
		args = append(args, "-w", "0")
	case o.Warmup > 0:
		args = append(args, "-w", strconv.FormatFloat(o.Warmup.Seconds(), 'g', -1, 64))
	}
	if o.Dtype != "" {
		if !slices.Contains(Dtypes, o.Dtype) {
			return nil, fmt.Errorf("mpibench: unsupported dtype %q (supported: %s)", o.Dtype, strings.Join(Dtypes, ", "))
		}
		args = append(args, "-d", o.Dtype)
	}
	if o.ServedBarrier && !o.Hier {
		args = append(args, "-b", "mpi")
	}
	if o.Inject > 0 {
		args = append(args, "-j", strconv.Itoa(o.Inject-1))
	}
	return args, nil
}

// Header is the benchmark's first line: what ran.
type Header struct {
	Type    string `json:"type"` // "run"
	Impl    string `json:"impl"` // e.g. "openmpi-4.1.4", "mpich-4.0.2"
	Library string `json:"library"`
	NP      int    `json:"np"`
	Dtype   string `json:"dtype"`
	Op      string `json:"op"`
	Clock   string `json:"clock"`
}

// Result is one (collective, size) line. Times are those of the slowest rank
// per iteration, in microseconds; Span is the median over iterations of last
// end minus first start across ranks.
type Result struct {
	Type     string  `json:"type"` // "result"
	Coll     string  `json:"coll"`
	Algo     string  `json:"algo"` // "mpi": the library's own choice
	Impl     string  `json:"impl"`
	NP       int     `json:"np"`
	Dtype    string  `json:"dtype"`
	Op       string  `json:"op"`
	Bytes    int64   `json:"bytes"`
	Count    int64   `json:"count"`
	Iters    int     `json:"iters"`
	MinUS    float64 `json:"min_us"`
	MedianUS float64 `json:"median_us"`
	MeanUS   float64 `json:"mean_us"`
	MaxUS    float64 `json:"max_us"`
	P99US    float64 `json:"p99_us"`
	SpanUS   float64 `json:"span_us"`
	AlgBW    float64 `json:"algbw_GBps"`
	BusBW    float64 `json:"busbw_GBps"`
	Check    string  `json:"check"` // "ok" or what was wrong
}

// Report is one run's output.
type Report struct {
	Header  Header
	Results []Result
}

// Failed returns the results whose check is not "ok".
func (r *Report) Failed() []Result {
	var bad []Result
	for _, x := range r.Results {
		if x.Check != "ok" {
			bad = append(bad, x)
		}
	}
	return bad
}

// Parse reads the benchmark's output: a run line, then result lines. Blank
// lines are skipped; anything else is an error naming the line.
func Parse(r io.Reader) (*Report, error) {
	rep := &Report{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n, seenHeader := 0, false
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var probe struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(line, &probe); err != nil {
			return nil, fmt.Errorf("mpibench: line %d: %v: %q", n, err, line)
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		switch probe.Type {
		case "run":
			if seenHeader {
				return nil, fmt.Errorf("mpibench: line %d: a second run line", n)
			}
			if err := dec.Decode(&rep.Header); err != nil {
				return nil, fmt.Errorf("mpibench: line %d: %v", n, err)
			}
			seenHeader = true
		case "result":
			if !seenHeader {
				return nil, fmt.Errorf("mpibench: line %d: result before the run line", n)
			}
			var res Result
			if err := dec.Decode(&res); err != nil {
				return nil, fmt.Errorf("mpibench: line %d: %v", n, err)
			}
			if res.Iters < 1 || res.Check == "" || !slices.Contains(Colls, res.Coll) {
				return nil, fmt.Errorf("mpibench: line %d: incomplete result %q", n, line)
			}
			rep.Results = append(rep.Results, res)
		default:
			return nil, fmt.Errorf("mpibench: line %d: unknown type %q", n, probe.Type)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("mpibench: %w", err)
	}
	if !seenHeader {
		return nil, errors.New("mpibench: no run line in the output")
	}
	return rep, nil
}

// Run builds (or reuses) the benchmark for impl, runs it on o.NP ranks with
// the launch lines of [mpi.Installation.Args], and returns its report. A
// failed check returns the report and an error wrapping ErrCheck; a failed
// launch returns an error carrying the launcher's output.
func Run(ctx context.Context, impl mpi.Impl, o Options) (*Report, error) {
	return RunWith(ctx, mpi.Lookup(impl), o)
}

// RunWith is [Run] with the MPI installation in (see [BuildWith]).
func RunWith(ctx context.Context, in mpi.Installation, o Options) (*Report, error) {
	impl := in.Impl
	if o.NP < 1 {
		return nil, fmt.Errorf("mpibench: NP %d < 1", o.NP)
	}
	args, err := o.Args()
	if err != nil {
		return nil, err
	}
	var bin string
	if o.Hier {
		bin, err = BuildHier(ctx, impl)
	} else {
		bin, err = BuildWith(ctx, in)
	}
	if err != nil {
		return nil, err
	}
	cmd, err := in.Command(ctx, o.NP, bin, args...)
	if err != nil {
		return nil, err
	}
	if o.Preload != "" {
		// The launcher's options end where the program starts.
		at := len(cmd.Args) - len(args) - 1
		env := []string{"-genv", "LD_PRELOAD", o.Preload} // MPICH's Hydra
		if impl == mpi.OpenMPI {
			env = []string{"-x", "LD_PRELOAD=" + o.Preload}
		}
		cmd.Args = slices.Concat(cmd.Args[:at], env, cmd.Args[at:])
	}
	cmd.Env = append(os.Environ(), o.Env...)
	if o.Hier {
		cmd.Env = append(cmd.Env, "SHMCOLL_NODE_SIZE="+o.NodeSize)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	rep, perr := Parse(&stdout)
	if perr == nil {
		if bad := rep.Failed(); len(bad) > 0 {
			return rep, fmt.Errorf("%w: %s: %s at %d B: %s", ErrCheck, impl, bad[0].Coll, bad[0].Bytes, bad[0].Check)
		}
	}
	if runErr != nil {
		if ctx.Err() != nil {
			runErr = ctx.Err()
		}
		return nil, fmt.Errorf("mpibench: %s: %v\n%s", strings.Join(cmd.Args, " "), runErr, tail(stderr.Bytes(), 4096))
	}
	if perr != nil {
		return nil, perr
	}
	return rep, nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
