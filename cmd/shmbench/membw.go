package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shmcoll/shmcoll/internal/benchfmt"
	"github.com/shmcoll/shmcoll/numa"
)

// membw measures the memory bound of a two-rank allreduce: the aggregate
// memcpy rate of two processes, one per CPU, each copying its own
// first-touched buffers of the vector's size at once, and from it the time
// an allreduce of n bytes needs if every rank copies 2n bytes at half that
// aggregate rate: 4n / rate.
func init() {
	register(&command{
		name:    "membw",
		summary: "two-process memcpy rate and the allreduce memory bound (4n / rate) per size",
		run:     runMembw,
	})
}

const membwUsage = `usage: shmbench membw [flags]

Measures the memory bound of an allreduce: two processes, one per CPU,
each copy their own buffers of n bytes at the same time, and the rate of
both together is reported per size (the median of -trials, and the best).
An allreduce of n bytes on two ranks moves at least 2n bytes through each
rank's copy, so its time is bounded below by 4n / rate.

Flags:
`

func runMembw(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("membw", membwUsage, stderr)
	sizes := fs.String("sizes", "16M,64M", "buffer sizes in bytes (the vector size n)")
	per := fs.Duration("time", 250*time.Millisecond, "copying time per trial")
	trials := fs.Int("trials", 5, "trials per size; the median is reported")
	worker := fs.Bool("worker", false, "internal: one copying process")
	cpu := fs.Int("cpu", -1, "internal: the worker's CPU")
	size := fs.Int("size", 0, "internal: the worker's buffer size")
	fs.hide("worker", "cpu", "size")
	if err := fs.parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "shmbench membw: %v\n", err)
		return 2
	}
	if *worker {
		if err := membwWorker(*cpu, *size, *per, os.Stdin, stdout); err != nil {
			fmt.Fprintln(stderr, "shmbench membw worker:", err)
			return 1
		}
		return 0
	}
	list, err := benchfmt.ParseSizes(*sizes)
	if err != nil || len(list) == 0 {
		fmt.Fprintf(stderr, "shmbench membw: bad -sizes %q: %v\n", *sizes, err)
		return 2
	}
	if *trials < 1 || *per <= 0 {
		fmt.Fprintln(stderr, "shmbench membw: -trials and -time must be positive")
		return 2
	}
	fmt.Fprintf(stdout, "%-10s %12s %12s %14s\n", "bytes", "2p_GBps", "best_GBps", "bound_us(4n/r)")
	for _, n := range list {
		r, best, err := membwRate(int(n), *per, *trials)
		if err != nil {
			fmt.Fprintln(stderr, "shmbench membw:", err)
			return 1
		}
		fmt.Fprintf(stdout, "%-10d %12.2f %12.2f %14.1f\n", n, r/1e9, best/1e9, membwBound(n, r))
	}
	return 0
}

// membwBound is the allreduce memory bound in µs for n bytes at an
// aggregate two-process copy rate r (bytes/s).
func membwBound(n int64, r float64) float64 {
	if r <= 0 {
		return 0
	}
	return 4 * float64(n) / r * 1e6
}

// membwRate runs trials of two worker processes copying n-byte buffers at
// once and returns the median and best aggregate rate in bytes/s.
func membwRate(n int, per time.Duration, trials int) (median, best float64, err error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, 0, err
	}
	cpus := []int{-1, -1}
	if a, err := numa.AllowedCPUs(); err == nil && len(a) >= 2 {
		cpus = a[:2]
	}
	rates := make([]float64, 0, trials)
	for range trials {
		r, err := membwTrial(exe, cpus, n, per)
		if err != nil {
			return 0, 0, err
		}
		rates = append(rates, r)
	}
	slices.Sort(rates)
	return rates[len(rates)/2], rates[len(rates)-1], nil
}

// membwTrial starts one worker per CPU, lets them copy at once once all are
// ready, and sums their rates.
func membwTrial(exe string, cpus []int, n int, per time.Duration) (float64, error) {
	type proc struct {
		cmd *exec.Cmd
		in  io.WriteCloser
		out *bufio.Reader
	}
	var ps []proc
	defer func() {
		for _, p := range ps {
			p.in.Close()
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
	}()
	for _, c := range cpus {
		cmd := exec.Command(exe, "membw", "-worker", "-cpu", strconv.Itoa(c), "-size", strconv.Itoa(n), "-time", per.String())
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			return 0, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return 0, err
		}
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		ps = append(ps, proc{cmd, in, bufio.NewReader(out)})
	}
	for _, p := range ps {
		if l, err := p.out.ReadString('\n'); err != nil || strings.TrimSpace(l) != "ready" {
			return 0, fmt.Errorf("worker not ready: %q %v", l, err)
		}
	}
	for _, p := range ps {
		if _, err := io.WriteString(p.in, "go\n"); err != nil {
			return 0, err
		}
	}
	total := 0.0
	for _, p := range ps {
		l, err := p.out.ReadString('\n')
		if err != nil {
			return 0, fmt.Errorf("worker result: %v", err)
		}
		var bytes, ns float64
		if _, err := fmt.Sscan(l, &bytes, &ns); err != nil || ns <= 0 {
			return 0, fmt.Errorf("worker result %q: %v", l, err)
		}
		total += bytes / ns * 1e9
	}
	return total, nil
}

// membwWorker pins itself, touches its buffers, says "ready", waits for
// "go", copies src to dst for per, and prints the bytes copied and the
// nanoseconds taken.
func membwWorker(cpu, n int, per time.Duration, in io.Reader, out io.Writer) error {
	if n <= 0 {
		return errors.New("-size must be positive")
	}
	runtime.LockOSThread()
	if cpu >= 0 {
		if err := numa.PinThread(cpu); err != nil {
			return err
		}
	}
	src, dst := make([]byte, n), make([]byte, n)
	for i := range src {
		src[i] = byte(i)
	}
	copy(dst, src)
	fmt.Fprintln(out, "ready")
	if l, err := bufio.NewReader(in).ReadString('\n'); err != nil || strings.TrimSpace(l) != "go" {
		return fmt.Errorf("no go: %q %v", l, err)
	}
	start := time.Now()
	var bytes int64
	for time.Since(start) < per {
		copy(dst, src)
		bytes += int64(n)
	}
	_, err := fmt.Fprintf(out, "%d %d\n", bytes, time.Since(start).Nanoseconds())
	return err
}
