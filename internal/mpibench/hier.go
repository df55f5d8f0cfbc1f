package mpibench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/shmcoll/shmcoll/mpi"
)

// modulePath is the module hiercoll is built from.
const modulePath = "github.com/shmcoll/shmcoll"

// hierPkg is the hiercoll main package, relative to the module root.
const hierPkg = "./internal/mpibench/hiercoll"

// BuildHier builds hiercoll (the hierarchical collectives of
// collectives/hier, timed like mpicoll.c) against impl: `go build -tags
// mpi` (Open MPI) or `-tags mpi,mpich` (MPICH) of the module's source tree
// into os.UserCacheDir()/shmcoll/mpibench, and returns the binary's path.
// shmbench itself is built without MPI, so the MPI-tagged program is built
// here, on demand; the go command's build cache makes a rebuild of
// unchanged source quick, and a process builds once per impl (compare
// runs many blocks). It needs the go command, a C compiler, impl's
// pkg-config module and the source tree (found from the working directory
// up, else where this package was compiled); the error names what is
// missing.
func BuildHier(ctx context.Context, impl mpi.Impl) (string, error) {
	hierBuilt.Lock()
	defer hierBuilt.Unlock()
	if bin, ok := hierBuilt.bins[impl]; ok {
		return bin, nil
	}
	bin, err := buildHier(ctx, impl)
	if err == nil {
		hierBuilt.bins[impl] = bin
	}
	return bin, err
}

// hierBuilt remembers this process's builds.
var hierBuilt = struct {
	sync.Mutex
	bins map[mpi.Impl]string
}{bins: map[mpi.Impl]string{}}

func buildHier(ctx context.Context, impl mpi.Impl) (string, error) {
	in := mpi.Lookup(impl)
	if err := in.Err(); err != nil {
		return "", err
	}
	goCmd, err := findGo()
	if err != nil {
		return "", err
	}
	if err := checkPkgConfig(in); err != nil {
		return "", err
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("mpibench: no cache directory: %w", err)
	}
	dir := filepath.Join(cache, "shmcoll", "mpibench")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("mpibench: %w", err)
	}
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", fmt.Errorf("mpibench: %w", err)
	}
	defer os.RemoveAll(tmp)
	tags := "mpi"
	if impl == mpi.MPICH {
		tags = "mpi,mpich"
	}
	out := filepath.Join(tmp, "hiercoll")
	cmd := exec.CommandContext(ctx, goCmd, "build", "-tags", tags, "-o", out, hierPkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("mpibench: building the hierarchical benchmark for %s: %s (in %s) failed: %v\n%s",
			impl, strings.Join(cmd.Args, " "), root, err, msg)
	}
	// One binary per impl and source tree, so that checkouts do not
	// replace each other's.
	h := sha256.Sum256([]byte(root))
	bin := filepath.Join(dir, fmt.Sprintf("hiercoll.%s.%s", impl, hex.EncodeToString(h[:])[:12]))
	if err := os.Rename(out, bin); err != nil {
		return "", fmt.Errorf("mpibench: %w", err)
	}
	return bin, nil
}

// findGo returns the go command: from PATH, else the default install.
func findGo() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	const std = "/usr/local/go/bin/go"
	if _, err := os.Stat(std); err == nil {
		return std, nil
	}
	return "", errors.New("mpibench: the hierarchical benchmark is built with -tags mpi on demand and needs the go command: not in PATH nor " + std + " (https://go.dev/dl)")
}

// devPackages provide the pkg-config modules.
var devPackages = map[mpi.Impl]string{mpi.OpenMPI: "libopenmpi-dev", mpi.MPICH: "libmpich-dev"}

// checkPkgConfig checks that cgo will find impl's headers and library.
func checkPkgConfig(in mpi.Installation) error {
	if _, err := exec.LookPath("pkg-config"); err != nil {
		return fmt.Errorf("mpibench: the hierarchical benchmark for %s links MPI through pkg-config, which is missing (Debian package pkg-config)", in.Impl)
	}
	if err := exec.Command("pkg-config", "--exists", in.PkgConfig).Run(); err != nil {
		return fmt.Errorf("mpibench: the hierarchical benchmark for %s links MPI through pkg-config, which finds no module %s (Debian package %s)",
			in.Impl, in.PkgConfig, devPackages[in.Impl])
	}
	return nil
}

// moduleRoot finds the shmcoll source tree: the working directory or one
// of its parents, else the tree this file was compiled from.
func moduleRoot() (string, error) {
	var tried []string
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			if isModuleRoot(d) {
				return d, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
		tried = append(tried, wd+" and its parents")
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		d := filepath.Dir(filepath.Dir(filepath.Dir(file))) // .../internal/mpibench/hier.go
		if isModuleRoot(d) {
			return d, nil
		}
		tried = append(tried, d)
	}
	return "", fmt.Errorf("mpibench: the hierarchical benchmark is built from the %s source tree, not found in %s: run from a checkout",
		modulePath, strings.Join(tried, " or "))
}

func isModuleRoot(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == "module" {
			return f[1] == modulePath
		}
	}
	return false
}
