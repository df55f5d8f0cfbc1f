// Package launchtest is a small rank program for the tests of launchers
// shmrun: a test binary calls MaybeRun first thing in TestMain and is then
// re-executed as the ranks, with SHMCOLL_TESTRANK=1 and a list of actions as
// arguments, run in order:
//
//	echo:TEXT       print TEXT and a newline on stdout
//	stderr:TEXT     print TEXT and a newline on stderr
//	partial:TEXT    print TEXT on stdout without a newline
//	lines:N         print N lines "rank R line I" on stdout
//	env             print "env RANK SIZE ARENA CPU" from the SHMCOLL_* variables
//	affinity        print "affinity CPULIST gomaxprocs N"
//	home            print "home NODE topology SPEC" (numa.HomeNode and SHMCOLL_TOPOLOGY)
//	pidfile:DIR     write the process id to DIR/rank<R>.pid
//	await:DIR       wait (up to a minute) until DIR holds rank<R>.pid of every rank
//	spawn:DIR       start a grandchild that writes DIR/grand<R>.pid and sleeps an hour
//	trapterm:CODE   on SIGTERM, SIGINT or SIGHUP print "rank R got SIG" and exit with CODE
//	ignoreterm      ignore SIGTERM
//	sleep:DUR       sleep for DUR (a time.Duration)
//	exit:CODE       exit with CODE
//	signal:N        send signal N to itself
//	panic           panic (Go exits with status 2)
//	join            join the arena with shm.JoinEnv, post and wait across all ranks twice,
//	                print "joined R of N slot BYTES" and close
//	shmfile         create /dev/shm/$SHMCOLL_ARENA, as a rank that creates a named arena and dies would leave it
//
// An action followed by @R (for instance exit:3@2) runs only on rank R.
package launchtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/shmcoll/shmcoll/numa"
	"github.com/shmcoll/shmcoll/shm"
)

// Env is the variable that makes MaybeRun act.
const Env = "SHMCOLL_TESTRANK"

// MaybeRun runs the rank program and exits if SHMCOLL_TESTRANK is set, and
// returns otherwise.
func MaybeRun() {
	if os.Getenv(Env) == "" {
		return
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "launchtest:", err)
		os.Exit(100)
	}
	os.Exit(0)
}

func run(actions []string) error {
	rank, _ := strconv.Atoi(os.Getenv("SHMCOLL_RANK"))
	for _, a := range actions {
		if i := strings.LastIndex(a, "@"); i >= 0 {
			r, err := strconv.Atoi(a[i+1:])
			if err != nil {
				return fmt.Errorf("bad rank in %q", a)
			}
			if r != rank {
				continue
			}
			a = a[:i]
		}
		name, arg, _ := strings.Cut(a, ":")
		switch name {
		case "echo":
			fmt.Println(arg)
		case "stderr":
			fmt.Fprintln(os.Stderr, arg)
		case "partial":
			fmt.Print(arg)
		case "lines":
			n, err := strconv.Atoi(arg)
			if err != nil {
				return err
			}
			for i := range n {
				fmt.Printf("rank %d line %d\n", rank, i)
			}
		case "env":
			fmt.Printf("env %s %s %s %s\n", os.Getenv("SHMCOLL_RANK"), os.Getenv("SHMCOLL_SIZE"),
				os.Getenv("SHMCOLL_ARENA"), os.Getenv("SHMCOLL_CPU"))
		case "affinity":
			cpus, err := numa.Affinity(os.Getpid())
			if err != nil {
				return err
			}
			fmt.Printf("affinity %s gomaxprocs %d\n", numa.FormatCPUList(cpus), runtime.GOMAXPROCS(0))
		case "home":
			fmt.Printf("home %d topology %s\n", numa.HomeNode(), os.Getenv(numa.EnvTopology))
		case "pidfile":
			if err := writePid(arg, fmt.Sprintf("rank%d.pid", rank)); err != nil {
				return err
			}
		case "await":
			size, _ := strconv.Atoi(os.Getenv("SHMCOLL_SIZE"))
			if err := await(arg, size); err != nil {
				return err
			}
		case "spawn":
			cmd := exec.Command(os.Args[0], "pidfile-grand:"+arg, "sleep:1h")
			cmd.Env = os.Environ()
			if err := cmd.Start(); err != nil {
				return err
			}
		case "pidfile-grand":
			if err := writePid(arg, fmt.Sprintf("grand%d.pid", rank)); err != nil {
				return err
			}
		case "trapterm":
			code, err := strconv.Atoi(arg)
			if err != nil {
				return err
			}
			c := make(chan os.Signal, 1)
			signal.Notify(c, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
			go func() {
				s := <-c
				fmt.Printf("rank %d got %v\n", rank, s)
				os.Exit(code)
			}()
		case "ignoreterm":
			signal.Ignore(syscall.SIGTERM)
		case "sleep":
			d, err := time.ParseDuration(arg)
			if err != nil {
				return err
			}
			time.Sleep(d)
		case "exit":
			code, err := strconv.Atoi(arg)
			if err != nil {
				return err
			}
			os.Exit(code)
		case "signal":
			n, err := strconv.Atoi(arg)
			if err != nil {
				return err
			}
			signal.Reset(syscall.Signal(n))
			if err := syscall.Kill(os.Getpid(), syscall.Signal(n)); err != nil {
				return err
			}
			time.Sleep(time.Minute) // the signal is delivered asynchronously
		case "join":
			if err := join(); err != nil {
				return err
			}
		case "shmfile":
			f, err := os.OpenFile("/dev/shm/"+os.Getenv("SHMCOLL_ARENA"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
			if err != nil {
				return err
			}
			f.Close()
		case "panic":
			panic("launchtest: panic action")
		default:
			return fmt.Errorf("unknown action %q", a)
		}
	}
	return nil
}

// writePid writes the process id to dir/name atomically (rename), so that a
// reader never sees a partial file.
func writePid(dir, name string) error {
	tmp := filepath.Join(dir, name+".tmp")
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, name))
}

// await waits until dir holds the pid files of ranks 0..size-1.
func await(dir string, size int) error {
	deadline := time.Now().Add(time.Minute)
	for r := 0; r < size; {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("rank%d.pid", r))); err == nil {
			r++
			continue
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("await: no pid file of rank %d in %s", r, dir)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// join joins the arena the environment names and exchanges posts with every
// rank: counter 0 says "joined", counter 1 "done reading", so no rank closes
// while another still waits for it.
func join() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ep, err := shm.JoinEnv(ctx, shm.Options{})
	if err != nil {
		return err
	}
	defer ep.Close()
	for c := range 2 {
		ep.Post(c, 1)
		for peer := range ep.Size() {
			if err := ep.Wait(ctx, peer, c, 1); err != nil {
				return err
			}
		}
	}
	fmt.Printf("joined %d of %d slot %d heap %d\n", ep.Rank(), ep.Size(), ep.SlotBytes(), ep.HeapBytes())
	return nil
}
