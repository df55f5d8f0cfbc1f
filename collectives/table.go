package collectives

import (
	"bytes"
	"cmp"
	_ "embed"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// A Table is a selection table: for a collective, a number of ranks p,
// whether those ranks were oversubscribed and a range of sizes, the
// algorithm that auto chooses, and the best order-preserving algorithm for
// non-commutative operators. shmbench tune measures and writes it;
// docs/TUNING.md describes the method. A table is read-only once a
// communicator uses it.
//
// The text form, one entry per line, fields separated by blanks:
//
//	# comment lines: the header says how the table was made
//	# collective  p  cpus  from  to    algorithm   ordered
//	allreduce     2  fit   0     64K   replicated  replicated
//	allreduce     2  fit   64K   inf   circulant   flat
//	barrier       8  over  0     inf   flat        -
//
// cpus is fit (p at most the online CPUs when measured) or over (p
// exceeded them, see [shm.Endpoint.Oversubscribed]); an entry is used only
// by communicators in the same condition. from and to are bytes, as
// shmbench counts them (DESIGN.md), the range [from, to); K, M and G are
// binary suffixes and to may be inf. The ranges of one (collective, p,
// cpus) ascend and do not overlap; sizes they do not cover fall back to
// the built-in heuristic. ordered is "-" when none was recorded.
type Table struct {
	// Header holds the leading comment lines, without "# ".
	Header []string
	// Entries are the table's lines: see [TableEntry].
	Entries []TableEntry
}

// TableEntry is one line of a [Table].
type TableEntry struct {
	// Coll is the collective the entry is for.
	Coll Collective
	// P is the number of ranks the entry is for.
	P int
	// Over: the entry was measured with more process ranks than online
	// CPUs.
	Over bool
	// From and To bound the sizes in bytes, [From, To); To is
	// math.MaxInt64 for no bound.
	From, To int64
	// Alg is the fastest algorithm.
	Alg Algorithm
	// Ordered is the fastest order-preserving algorithm, Auto if none was
	// recorded.
	Ordered Algorithm
	// Reason is why a hand-made entry (an override) was chosen: the
	// comment after the entry in the text form; not part of [Table.Hash].
	Reason string

	line int // line in the text it was parsed from, 0 if built
}

// ErrTableMismatch is returned on every rank when the ranks of a new
// communicator loaded different selection tables.
var ErrTableMismatch = errors.New("ranks loaded different selection tables")

// TuneFileEnv names the environment variable that replaces the default
// selection table by a file (Options.Table overrides both).
const TuneFileEnv = "SHMCOLL_TUNE_FILE"

//go:embed tune/default.txt
var defaultTableText []byte

//go:embed tune/overrides.txt
var overridesText []byte

var defaultTable = sync.OnceValues(func() (*Table, error) {
	t, err := ParseTable("collectives/tune/default.txt", defaultTableText)
	if err != nil {
		return nil, err
	}
	o, err := DefaultOverrides()
	if err != nil {
		return nil, err
	}
	return t.Override(o), nil
})

var defaultOverrides = sync.OnceValues(func() (*Table, error) {
	return ParseTable("collectives/tune/overrides.txt", overridesText)
})

// DefaultTable returns the selection table built into the library: the
// table shmbench tune measured on the project's machine
// (collectives/tune/default.txt) with [DefaultOverrides] applied
// ([Table.Override]). docs/TUNING.md says how it is made. Callers must
// not modify it.
func DefaultTable() (*Table, error) { return defaultTable() }

// DefaultOverrides returns the hand-made entries built into the library
// (collectives/tune/overrides.txt), each with its Reason, which
// [DefaultTable] applies over the measured table; shmbench tune's report
// lists them beside what it measured. Callers must not modify it.
func DefaultOverrides() (*Table, error) { return defaultOverrides() }

// Override returns t with the entries of o in place of what t says for
// the same (collective, p, cpus) within each entry's range: t's entries
// are cut around o's ranges, and neighbouring entries that choose the
// same then merge. The header is t's.
func (t *Table) Override(o *Table) *Table {
	es := slices.Clone(t.Entries)
	for _, oe := range o.Entries {
		var kept []TableEntry
		for _, e := range es {
			if e.key() != oe.key() || e.To <= oe.From || oe.To <= e.From {
				kept = append(kept, e)
				continue
			}
			if e.From < oe.From {
				lo := e
				lo.To = oe.From
				kept = append(kept, lo)
			}
			if oe.To < e.To {
				hi := e
				hi.From = oe.To
				kept = append(kept, hi)
			}
		}
		es = append(kept, oe)
	}
	slices.SortStableFunc(es, compareEntries)
	return &Table{Header: slices.Clone(t.Header), Entries: coalesce(es, true)}
}

// LoadTable reads and parses the selection table in file.
func LoadTable(file string) (*Table, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w: selection table: %w", ErrInvalidArgument, err)
	}
	return ParseTable(file, b)
}

// ParseTable parses the text form of a selection table; name (a file
// name) prefixes its errors, which give the line and the problem.
func ParseTable(name string, text []byte) (*Table, error) {
	t := &Table{}
	head := true
	for n, line := range strings.Split(string(text), "\n") {
		ln, s := n+1, strings.TrimSpace(line)
		if c, ok := strings.CutPrefix(s, "#"); ok {
			// The header ends at a bare "#" or the column legend.
			c = strings.TrimSpace(c)
			if c == "" || strings.HasPrefix(c, "collective ") {
				head = false
			}
			if head {
				t.Header = append(t.Header, c)
			}
			continue
		}
		reason := ""
		if i := strings.IndexByte(s, '#'); i > 0 {
			s, reason = strings.TrimSpace(s[:i]), strings.TrimSpace(s[i+1:]) // a comment after the entry
		}
		if s == "" {
			continue
		}
		head = false
		e, err := parseEntry(strings.Fields(s))
		if err != nil {
			return nil, fmt.Errorf("%w: selection table %s:%d: %v", ErrInvalidArgument, name, ln, err)
		}
		e.line, e.Reason = ln, reason
		t.Entries = append(t.Entries, e)
	}
	if err := t.check(name); err != nil {
		return nil, err
	}
	return t, nil
}

func parseEntry(f []string) (TableEntry, error) {
	var e TableEntry
	if len(f) != 7 {
		return e, fmt.Errorf("%d fields, want 7 (collective p cpus from to algorithm ordered)", len(f))
	}
	var err error
	if e.Coll, err = ParseCollective(f[0]); err != nil {
		return e, fmt.Errorf("unknown collective %q", f[0])
	}
	if e.P, err = strconv.Atoi(f[1]); err != nil || e.P < 1 {
		return e, fmt.Errorf("p %q: want a number of ranks >= 1", f[1])
	}
	switch f[2] {
	case "fit":
	case "over":
		e.Over = true
	default:
		return e, fmt.Errorf("cpus %q: want fit or over", f[2])
	}
	if e.From, err = parseTableSize(f[3]); err != nil || e.From == math.MaxInt64 {
		return e, fmt.Errorf("from %q: want bytes (K, M, G suffixes)", f[3])
	}
	if e.To, err = parseTableSize(f[4]); err != nil {
		return e, fmt.Errorf("to %q: want bytes (K, M, G suffixes) or inf", f[4])
	}
	if e.Alg, err = ParseAlgorithm(f[5]); err != nil || e.Alg == Auto {
		return e, fmt.Errorf("unknown algorithm %q", f[5])
	}
	if f[6] != "-" {
		if e.Ordered, err = ParseAlgorithm(f[6]); err != nil || e.Ordered == Auto {
			return e, fmt.Errorf("unknown ordered algorithm %q", f[6])
		}
	}
	return e, nil
}

// sizeSuffixes are the binary suffixes of sizes in a table, by shift/10-1.
const sizeSuffixes = "KMG"

func parseTableSize(s string) (int64, error) {
	if s == "inf" {
		return math.MaxInt64, nil
	}
	shift := 0
	if i := strings.IndexByte(sizeSuffixes, s[len(s)-1]); i >= 0 {
		shift, s = 10*(i+1), s[:len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64>>shift {
		return 0, errors.New("bad size")
	}
	return n << shift, nil
}

func formatTableSize(n int64) string {
	if n == math.MaxInt64 {
		return "inf"
	}
	for i := len(sizeSuffixes) - 1; i >= 0; i-- {
		if u := int64(1) << (10 * (i + 1)); n >= u && n%u == 0 {
			return strconv.FormatInt(n/u, 10) + sizeSuffixes[i:i+1]
		}
	}
	return strconv.FormatInt(n, 10)
}

// tableKey is what a communicator looks an entry up by, besides the size.
type tableKey struct {
	coll Collective
	p    int
	over bool
}

func (e *TableEntry) key() tableKey { return tableKey{e.Coll, e.P, e.Over} }

// check validates the entries: algorithms that implement their
// collective, an order-preserving ordered choice, ranges that ascend
// without overlapping within each (collective, p, cpus).
func (t *Table) check(name string) error {
	last := map[tableKey]*TableEntry{}
	for i := range t.Entries {
		e := &t.Entries[i]
		where := fmt.Sprintf("%s: entry %d", name, i+1)
		if e.line > 0 {
			where = fmt.Sprintf("%s:%d", name, e.line)
		}
		bad := func(format string, args ...any) error {
			return fmt.Errorf("%w: selection table %s: %s", ErrInvalidArgument, where, fmt.Sprintf(format, args...))
		}
		switch {
		case e.Coll >= numColls:
			return bad("unknown collective %v", e.Coll)
		case e.P < 1:
			return bad("p %d: want >= 1", e.P)
		case e.From < 0 || e.To <= e.From:
			return bad("empty or negative range [%d, %d)", e.From, e.To)
		case e.Alg == Auto || e.Alg >= numAlgorithms || algorithms[e.Coll][e.Alg] == nil:
			return bad("algorithm %v does not implement %v", e.Alg, e.Coll)
		case e.Ordered >= numAlgorithms || e.Ordered != Auto && algorithms[e.Coll][e.Ordered] == nil:
			return bad("ordered algorithm %v does not implement %v", e.Ordered, e.Coll)
		case e.Ordered != Auto && !orderPreserving[e.Coll][e.Ordered]:
			return bad("ordered algorithm %v does not keep rank order for %v", e.Ordered, e.Coll)
		case e.Alg == Direct || e.Ordered == Direct:
			return bad("%v: direct serves buffers from Alloc, whatever the table says; a table cannot choose it", e.Coll)
		}
		k := e.key()
		if prev := last[k]; prev != nil {
			switch {
			case e.From < prev.From:
				return bad("%v p=%d: range from %s comes after the range from %s: ranges must ascend",
					e.Coll, e.P, formatTableSize(e.From), formatTableSize(prev.From))
			case e.From < prev.To:
				return bad("%v p=%d: range [%s, %s) overlaps [%s, %s)", e.Coll, e.P,
					formatTableSize(e.From), formatTableSize(e.To), formatTableSize(prev.From), formatTableSize(prev.To))
			}
		}
		last[k] = e
	}
	return nil
}

// Check validates a table built in code, as [ParseTable] validates text
// except that the entries may come in any order.
func (t *Table) Check() error {
	s := &Table{Entries: slices.Clone(t.Entries)}
	slices.SortStableFunc(s.Entries, compareEntries)
	return s.check("(table)")
}

// compareEntries orders entries by collective, p, cpus (fit first) and
// size.
func compareEntries(a, b TableEntry) int {
	return cmp.Or(cmp.Compare(a.Coll, b.Coll), cmp.Compare(a.P, b.P),
		strings.Compare(a.cpus(), b.cpus()), cmp.Compare(a.From, b.From))
}

// cpus is the entry's cpus field in the text form: fit or over.
func (e TableEntry) cpus() string {
	if e.Over {
		return "over"
	}
	return "fit"
}

// MarshalText returns the text form: the header as comment lines, a
// column legend, and the entries sorted by collective, p, cpus and size.
func (t *Table) MarshalText() ([]byte, error) {
	var b bytes.Buffer
	for _, h := range t.Header {
		fmt.Fprintf(&b, "# %s\n", h)
	}
	if len(t.Header) > 0 {
		b.WriteString("#\n")
	}
	b.WriteString("# collective           p  cpus  from    to      algorithm        ordered\n") // the column legend
	t.writeEntries(&b, true)
	return b.Bytes(), nil
}

func (t *Table) writeEntries(b *bytes.Buffer, withReasons bool) {
	es := slices.Clone(t.Entries)
	slices.SortStableFunc(es, compareEntries)
	if !withReasons {
		es = coalesce(es, false)
	}
	for _, e := range es {
		ord := "-"
		if e.Ordered != Auto {
			ord = e.Ordered.String()
		}
		fmt.Fprintf(b, "%-20s %2d  %-4s  %-6s  %-6s  %-15s  %s", e.Coll, e.P, e.cpus(),
			formatTableSize(e.From), formatTableSize(e.To), e.Alg, ord)
		if withReasons && e.Reason != "" {
			fmt.Fprintf(b, "  # %s", e.Reason)
		}
		b.WriteByte('\n')
	}
}

// coalesce merges sorted entries whose ranges touch and that choose the
// same (and, if sameReason, give the same reason).
func coalesce(es []TableEntry, sameReason bool) []TableEntry {
	var m []TableEntry
	for _, e := range es {
		if n := len(m); n > 0 {
			last := &m[n-1]
			if last.key() == e.key() && last.To == e.From && last.Alg == e.Alg && last.Ordered == e.Ordered &&
				(!sameReason || last.Reason == e.Reason) {
				last.To = e.To
				continue
			}
		}
		m = append(m, e)
	}
	return m
}

// Hash identifies the table's choices (not its comments and reasons, nor
// how neighbouring ranges that choose the same are cut): two tables with
// the same hash select the same algorithms. The ranks of a communicator
// compare it when they join.
func (t *Table) Hash() uint64 {
	var b bytes.Buffer
	t.writeEntries(&b, false)
	h := fnv.New64a()
	h.Write(b.Bytes())
	return h.Sum64()
}

// Merge returns a table with the entries of t for the values of p that u
// does not have, and all of u's; the header is u's.
func (t *Table) Merge(u *Table) *Table {
	ps := u.Ps()
	m := &Table{Header: slices.Clone(u.Header)}
	for _, e := range t.Entries {
		if !slices.Contains(ps, e.P) {
			m.Entries = append(m.Entries, e)
		}
	}
	m.Entries = append(m.Entries, u.Entries...)
	return m
}

// Ps returns the values of p the table has entries for, ascending.
func (t *Table) Ps() []int {
	var ps []int
	for _, e := range t.Entries {
		ps = append(ps, e.P)
	}
	slices.Sort(ps)
	return slices.Compact(ps)
}

// selection is the part of a table that one communicator uses: the
// ranges for its p and oversubscription, per collective.
type selection struct {
	ranges [numColls][]TableEntry
	source string // where the table came from, for the agreement error
}

func (t *Table) selection(p int, over bool) selection {
	s := selection{}
	for _, e := range t.Entries {
		if e.P == p && e.Over == over {
			s.ranges[e.Coll] = append(s.ranges[e.Coll], e)
		}
	}
	return s
}

// lookup returns the table's algorithm for a call of coll on bytes, or
// Auto when the table has none that fits: no range holds bytes, or the
// operator is not commutative and neither the entry's algorithm nor its
// recorded ordered one keeps rank order.
func (s *selection) lookup(coll Collective, bytes int, commutative bool) Algorithm {
	switch r := s.entry(coll, bytes); {
	case r == nil:
	case commutative || orderPreserving[coll][r.Alg]:
		return r.Alg
	case r.Ordered != Auto:
		return r.Ordered
	}
	return Auto
}

// entry returns the range of coll that holds bytes, or nil.
func (s *selection) entry(coll Collective, bytes int) *TableEntry {
	n := int64(bytes)
	for i := range s.ranges[coll] {
		r := &s.ranges[coll][i]
		if n < r.From {
			break
		}
		if n < r.To {
			return r
		}
	}
	return nil
}

// tableChoice is the selection table of a new communicator, where it came
// from, and its hash as the ranks compare it (never 0, which means none).
type tableChoice struct {
	tab  *Table
	src  string
	hash uint64
}

// tableOf resolves the table of a new communicator: Options.Table, else
// the file SHMCOLL_TUNE_FILE names, else the default.
func tableOf(opt Options) (tableChoice, error) {
	tc := tableChoice{tab: opt.Table, src: "Options.Table"}
	var err error
	switch f := os.Getenv(TuneFileEnv); {
	case opt.Table != nil:
		err = opt.Table.Check()
	case f != "":
		tc.src = f
		if tc.tab, err = LoadTable(f); err != nil {
			err = fmt.Errorf("%s: %w", TuneFileEnv, err)
		}
	default:
		tc.src = "the default"
		tc.tab, err = DefaultTable()
	}
	if err != nil {
		return tc, err
	}
	tc.hash = tc.tab.Hash() | 1
	return tc, nil
}

// checkTable compares the table hashes the ranks recorded when they
// joined (shm.Options.JoinValue). Every rank reads every hash once the
// join is complete, so a difference fails the join on every rank with the
// same error, and nobody waits; a rank that recorded none (a bare
// shm.Endpoint) takes no part.
func (c *Comm) checkTable() error {
	ref := -1
	for q := range c.size {
		h := c.ep.JoinValue(q)
		switch {
		case h == 0:
		case ref < 0:
			ref = q
		case h != c.ep.JoinValue(ref):
			return fmt.Errorf("%w: rank %d loaded a different selection table (hash %016x) than rank %d (hash %016x); rank %d's is %s",
				ErrTableMismatch, q, h, ref, c.ep.JoinValue(ref), c.rank, c.sel.source)
		}
	}
	return nil
}
