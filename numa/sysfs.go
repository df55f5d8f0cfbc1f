package numa

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// readSysfs builds a topology from a sysfs tree: fsys is rooted where /sys
// is (paths such as "devices/system/cpu/online"). Only online CPUs are
// listed. Missing files are tolerated where the kernel may lack them (no node
// directory without CONFIG_NUMA, no cache directory in some VMs); a file
// that is present but malformed is an error.
func readSysfs(fsys fs.FS) (*Topology, error) {
	const cpuDir = "devices/system/cpu"
	online, err := readList(fsys, cpuDir+"/online")
	if errors.Is(err, fs.ErrNotExist) {
		online, err = numberedDirs(fsys, cpuDir, "cpu")
	}
	if err != nil {
		return nil, err
	}
	if len(online) == 0 {
		return nil, fmt.Errorf("%w: sysfs lists no online CPU", ErrBadTopology)
	}
	isOnline := make(map[int]bool, len(online))
	for _, id := range online {
		isOnline[id] = true
	}

	type raw struct {
		id, pkg, firstSibling, thread int
	}
	raws := make([]raw, 0, len(online))
	for _, id := range online {
		dir := fmt.Sprintf("%s/cpu%d/topology", cpuDir, id)
		pkg, err := readInt(fsys, dir+"/physical_package_id")
		switch {
		case errors.Is(err, fs.ErrNotExist):
			pkg = 0
		case err != nil:
			return nil, err
		case pkg < 0: // some arm64 firmware reports -1
			pkg = 0
		}
		sibs, err := readList(fsys, dir+"/core_cpus_list")
		if errors.Is(err, fs.ErrNotExist) {
			sibs, err = readList(fsys, dir+"/thread_siblings_list")
		}
		switch {
		case errors.Is(err, fs.ErrNotExist):
			sibs = []int{id}
		case err != nil:
			return nil, err
		}
		sibs = slices.DeleteFunc(sibs, func(s int) bool { return !isOnline[s] })
		if !slices.Contains(sibs, id) {
			return nil, fmt.Errorf("%w: %s/core_cpus_list does not contain cpu%d", ErrBadTopology, dir, id)
		}
		raws = append(raws, raw{id: id, pkg: pkg, firstSibling: sibs[0], thread: slices.Index(sibs, id)})
	}

	// Dense package and core indexes.
	var pkgIDs []int
	for _, r := range raws {
		if !slices.Contains(pkgIDs, r.pkg) {
			pkgIDs = append(pkgIDs, r.pkg)
		}
	}
	slices.Sort(pkgIDs)
	type coreKey struct{ pkg, first int }
	var cores []coreKey
	for _, r := range raws {
		k := coreKey{slices.Index(pkgIDs, r.pkg), r.firstSibling}
		if !slices.Contains(cores, k) {
			cores = append(cores, k)
		}
	}
	slices.SortFunc(cores, func(a, b coreKey) int {
		if a.pkg != b.pkg {
			return a.pkg - b.pkg
		}
		return a.first - b.first
	})

	t := &Topology{}
	t.CPUs = make([]CPU, len(raws))
	for i, r := range raws {
		p := slices.Index(pkgIDs, r.pkg)
		t.CPUs[i] = CPU{ID: r.id, Package: p, Core: slices.Index(cores, coreKey{p, r.firstSibling}), Thread: r.thread}
	}

	// NUMA nodes. Without a node directory (no CONFIG_NUMA) everything is node 0.
	nodeIDs, err := numberedDirs(fsys, "devices/system/node", "node")
	if errors.Is(err, fs.ErrNotExist) || (err == nil && len(nodeIDs) == 0) {
		all := slices.Clone(online)
		t.Nodes = []Node{{ID: 0, CPUs: all}}
	} else if err != nil {
		return nil, err
	} else {
		for _, n := range nodeIDs {
			cpus, err := readList(fsys, fmt.Sprintf("devices/system/node/node%d/cpulist", n))
			if err != nil {
				return nil, err
			}
			cpus = slices.DeleteFunc(cpus, func(c int) bool { return !isOnline[c] })
			t.Nodes = append(t.Nodes, Node{ID: n, CPUs: cpus})
		}
	}
	nodeOf := make(map[int]int, len(online))
	for _, n := range t.Nodes {
		for _, c := range n.CPUs {
			nodeOf[c] = n.ID
		}
	}
	for i := range t.CPUs {
		node, ok := nodeOf[t.CPUs[i].ID]
		if !ok { // not listed by any node: the kernel's fallback is the first node
			node = t.Nodes[0].ID
			t.Nodes[0].CPUs = append(t.Nodes[0].CPUs, t.CPUs[i].ID)
			slices.Sort(t.Nodes[0].CPUs)
		}
		t.CPUs[i].Node = node
	}

	t.Cache, err = readSysfsCache(fsys, fmt.Sprintf("%s/cpu%d/cache", cpuDir, online[0]))
	if err != nil {
		return nil, err
	}
	t.finish()
	return t, nil
}

// readSysfsCache reads the data and unified caches of one CPU.
func readSysfsCache(fsys fs.FS, dir string) (Cache, error) {
	var c Cache
	idx, err := numberedDirs(fsys, dir, "index")
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	for _, i := range idx {
		d := fmt.Sprintf("%s/index%d", dir, i)
		level, err := readInt(fsys, d+"/level")
		if err != nil {
			return c, err
		}
		typ, err := readString(fsys, d+"/type")
		if err != nil {
			return c, err
		}
		if typ == "Instruction" {
			continue
		}
		sizeText, err := readString(fsys, d+"/size")
		if err != nil {
			return c, err
		}
		size, err := parseSize(sizeText)
		if err != nil {
			return c, fmt.Errorf("%w: %s/size: %v", ErrBadTopology, d, err)
		}
		switch level {
		case 1:
			c.L1D = size
		case 2:
			c.L2 = size
		case 3:
			c.L3 = size
		}
		if line, err := readInt(fsys, d+"/coherency_line_size"); err == nil && c.Line == 0 {
			c.Line = line
		}
	}
	return c, nil
}

// parseSize parses a sysfs cache size such as "48K", "1024K" or "32M".
func parseSize(s string) (int, error) {
	mult := 1
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, s[:len(s)-1]
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, s[:len(s)-1]
	case strings.HasSuffix(s, "G"):
		mult, s = 1<<30, s[:len(s)-1]
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return n * mult, nil
}

func readString(fsys fs.FS, name string) (string, error) {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

func readInt(fsys fs.FS, name string) (int, error) {
	s, err := readString(fsys, name)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %q is not an integer", ErrBadTopology, name, s)
	}
	return n, nil
}

func readList(fsys fs.FS, name string) ([]int, error) {
	s, err := readString(fsys, name)
	if err != nil {
		return nil, err
	}
	l, err := ParseCPUList(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return l, nil
}

// numberedDirs lists the N of the entries prefixN in dir, ascending.
func numberedDirs(fsys fs.FS, dir, prefix string) ([]int, error) {
	ents, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var ids []int
	for _, e := range ents {
		rest, ok := strings.CutPrefix(path.Base(e.Name()), prefix)
		if !ok || rest == "" {
			continue
		}
		n, err := strconv.Atoi(rest)
		if err != nil || n < 0 || strconv.Itoa(n) != rest {
			continue // e.g. "cpufreq", "cpuidle"
		}
		ids = append(ids, n)
	}
	slices.Sort(ids)
	return ids, nil
}

// ParseCPUList parses a Linux CPU or node list such as "0-3,8-11,16" (the
// format of /sys/devices/system/cpu/online and of taskset -c) into ascending,
// distinct numbers. The empty string is the empty list.
func ParseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var ids []int
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("%w: cpu list %q: bad element %q", ErrBadTopology, s, part)
		}
		b := a
		if isRange {
			b, err = strconv.Atoi(hi)
			if err != nil || b < a {
				return nil, fmt.Errorf("%w: cpu list %q: bad range %q", ErrBadTopology, s, part)
			}
		}
		if b-a > 1<<16 {
			return nil, fmt.Errorf("%w: cpu list %q: range %q too large", ErrBadTopology, s, part)
		}
		for i := a; i <= b; i++ {
			ids = append(ids, i)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// FormatCPUList is the inverse of [ParseCPUList]: ascending ranges joined by
// commas, e.g. "0-3,8".
func FormatCPUList(ids []int) string {
	s := slices.Clone(ids)
	slices.Sort(s)
	s = slices.Compact(s)
	var b strings.Builder
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(s[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(s[j]))
		}
		i = j + 1
	}
	return b.String()
}
