package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// flagSet is a subcommand's flag set with help written for users: the
// flags that only shmbench passes to the processes it starts are hidden,
// the names other benchmarks use (nccl-tests, OSU) are listed apart from
// shmbench's own, and each default is shown once.
type flagSet struct {
	*flag.FlagSet
	intro  string          // the text before the flags
	hidden map[string]bool // internal flags: parsed, never shown
	alias  []string        // other benchmarks' names, in the order registered
}

func newFlagSet(name, intro string, stderr io.Writer) *flagSet {
	fs := &flagSet{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), intro: intro, hidden: map[string]bool{}}
	fs.SetOutput(stderr)
	fs.Usage = func() { fs.printUsage(fs.Output()) }
	return fs
}

// hide marks flags that shmbench sets for its own child processes.
func (fs *flagSet) hide(names ...string) {
	for _, n := range names {
		fs.hidden[n] = true
	}
}

// printUsage writes the intro, shmbench's flags, then the other
// benchmarks' names.
func (fs *flagSet) printUsage(w io.Writer) {
	fmt.Fprint(w, fs.intro)
	isAlias := map[string]bool{}
	for _, a := range fs.alias {
		isAlias[a] = true
	}
	var own []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if !fs.hidden[f.Name] && !isAlias[f.Name] {
			own = append(own, f)
		}
	})
	sort.Slice(own, func(i, j int) bool { return own[i].Name < own[j].Name })
	for _, f := range own {
		printFlag(w, f)
	}
	if len(fs.alias) > 0 {
		fmt.Fprint(w, "\nThe same settings under the names of nccl-tests and the OSU benchmarks\n(giving one together with the flag it stands for is an error):\n")
		for _, a := range fs.alias {
			printFlag(w, fs.Lookup(a))
		}
	}
}

// printFlag writes one flag as the flag package does, but shows the
// default only where the usage text does not already say it and the
// default is not the zero value.
func printFlag(w io.Writer, f *flag.Flag) {
	name, usage := flag.UnquoteUsage(f)
	line := "  -" + f.Name
	if name != "" {
		line += " " + name
	}
	if len(line) <= 4 { // a one-letter flag: usage on the same line
		line += "\t"
	} else {
		line += "\n    \t"
	}
	line += strings.ReplaceAll(usage, "\n", "\n    \t")
	if !strings.Contains(usage, "default") && !zeroDefault(f) {
		if isStringFlag(f) {
			line += fmt.Sprintf(" (default %q)", f.DefValue)
		} else {
			line += fmt.Sprintf(" (default %v)", f.DefValue)
		}
	}
	fmt.Fprintln(w, line)
}

// zeroDefault reports whether f's default is its type's zero value, which
// the help does not mention.
func zeroDefault(f *flag.Flag) bool {
	switch f.DefValue {
	case "", "0", "false", "0s":
		return true
	}
	return false
}

func isStringFlag(f *flag.Flag) bool {
	return reflect.TypeOf(f.Value).String() == "*flag.stringValue"
}

// setFlags is the set of flags given on the command line.
func (fs *flagSet) setFlags() map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// parse parses args. -c of nccl-tests takes 0 or 1 as a separate word
// ("-c 0"), which the flag package gives only to non-boolean flags, while
// OSU's -c takes none: "-c" and the word after it, unless that is a flag,
// are joined into "-c=word" before parsing, so that both spellings work. The error is
// flag.ErrHelp for -h, or a *usageError.
func (fs *flagSet) parse(args []string) error {
	var joined []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			joined = append(joined, args[i:]...)
			break
		}
		if (a == "-c" || a == "--c") && fs.Lookup("c") != nil && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			joined = append(joined, a+"="+args[i+1])
			i++
			continue
		}
		joined = append(joined, a)
	}
	if err := fs.Parse(joined); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return badUsage("unexpected arguments: %q", fs.Args())
	}
	return nil
}

// aliases are the flags of nccl-tests and OSU that one command accepts,
// each standing for one of its own; resolve turns the ones given into the
// values of shmbench's flags.
type aliases struct {
	fs *flagSet

	minBytes, maxBytes string // nccl-tests -b, -e
	factor             int    // nccl-tests -f
	osuSizes           string // OSU -m [min:]max
	iters              [2]int // nccl-tests -n, OSU -i
	warmIters          [2]int // nccl-tests -w, OSU -x
	check              boolFlag
	dtype, op          string // -d, -o
	root               int    // -r
}

// The groups of aliases a command can take.
const (
	aliasSizes = 1 << iota // -b -e -f -m
	aliasIters             // -n -i
	aliasWarm              // -w -x
	aliasCheck             // -c
	aliasDtype             // -d
	aliasOp                // -o
	aliasRoot              // -r
)

// Defaults of -b, -e and -f where only some are given.
const (
	aliasMinBytes = "8"
	aliasMaxBytes = "64M"
	aliasFactor   = 2
)

// addAliases registers the groups of aliases in which.
func (fs *flagSet) addAliases(which int) *aliases {
	a := &aliases{fs: fs}
	add := func(name string) { fs.alias = append(fs.alias, name) }
	if which&aliasSizes != 0 {
		fs.StringVar(&a.minBytes, "b", aliasMinBytes, "`min` size in bytes (nccl-tests; K, M, G are powers of 1024): -b min -e max -f factor is -sizes min:max:factor")
		fs.StringVar(&a.maxBytes, "e", aliasMaxBytes, "`max` size in bytes (nccl-tests)")
		fs.IntVar(&a.factor, "f", aliasFactor, "size multiplication `factor` (nccl-tests; an integer >= 2)")
		fs.StringVar(&a.osuSizes, "m", "", "sizes `[min:]max` (OSU): powers of two, -sizes min:max (min 1 if left out)")
		add("b")
		add("e")
		add("f")
		add("m")
	}
	if which&aliasIters != 0 {
		fs.IntVar(&a.iters[0], "n", 0, "timed `iterations` per size (nccl-tests): -iters")
		fs.IntVar(&a.iters[1], "i", 0, "timed `iterations` per size (OSU): -iters")
		add("n")
		add("i")
	}
	if which&aliasWarm != 0 {
		fs.IntVar(&a.warmIters[0], "w", 0, "warm-up `iterations` per size (nccl-tests), instead of -warmup's duration")
		fs.IntVar(&a.warmIters[1], "x", 0, "warm-up `iterations` per size (OSU), as -w")
		add("w")
		add("x")
	}
	if which&aliasCheck != 0 {
		fs.Var(&a.check, "c", "0 or 1 (nccl-tests; OSU's -c alone is 1): 1 is -check; 0 keeps the checks shmbench always makes")
		add("c")
	}
	if which&aliasDtype != 0 {
		fs.StringVar(&a.dtype, "d", "", "element `type` (nccl-tests; float, double and half are accepted): -dtype")
		add("d")
	}
	if which&aliasOp != 0 {
		fs.StringVar(&a.op, "o", "", "reduction `operator` (nccl-tests): -op")
		add("o")
	}
	if which&aliasRoot != 0 {
		fs.IntVar(&a.root, "r", 0, "`root` of bcast, reduce, scatter and gather (nccl-tests): -root")
		add("r")
	}
	return a
}

// boolFlag is -c: a boolean that also reads 0 and 1.
type boolFlag struct{ v bool }

func (b *boolFlag) String() string {
	if b == nil || !b.v {
		return "0"
	}
	return "1"
}

func (b *boolFlag) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want 0 or 1")
	}
	b.v = v
	return nil
}

func (b *boolFlag) IsBoolFlag() bool { return true }

// native are the values of a command's own flags that aliases stand for;
// resolve overwrites those whose alias was given.
type native struct {
	sizes     *string
	iters     *int
	warmup    *bool // set to true when -w or -x gave a count
	warmIters *int
	check     *bool
	dtype, op *string
	root      *int
}

// resolve applies the aliases given on the command line to n, refusing an
// alias given together with the flag it stands for.
func (a *aliases) resolve(n native) error {
	set := a.fs.setFlags()
	for _, name := range []string{"b", "e", "f", "m", "n", "i", "w", "x", "c", "d", "o", "r"} {
		if !slices.Contains(a.fs.alias, name) {
			delete(set, name) // a flag of the command's own (tune's -o), not an alias
		}
	}
	both := func(alias, own string) error {
		if set[alias] && set[own] {
			return badUsage("-%s and -%s name the same setting: give one", alias, own)
		}
		return nil
	}
	if set["b"] || set["e"] || set["f"] {
		for _, x := range []string{"sizes", "m"} {
			if set[x] {
				return badUsage("-b, -e, -f and -%s name the same setting: give one", x)
			}
		}
		*n.sizes = fmt.Sprintf("%s:%s:%d", a.minBytes, a.maxBytes, a.factor)
	}
	if set["m"] {
		if err := both("m", "sizes"); err != nil {
			return err
		}
		lo, hi, ok := strings.Cut(a.osuSizes, ":")
		switch {
		case !ok:
			lo, hi = "1", lo
		case hi == "":
			hi = aliasMaxBytes
		}
		*n.sizes = lo + ":" + hi
	}
	for k, name := range []string{"n", "i"} {
		if !set[name] {
			continue
		}
		if err := both(name, "iters"); err != nil {
			return err
		}
		if err := both("n", "i"); err != nil {
			return err
		}
		if a.iters[k] < 1 {
			return badUsage("-%s %d: want at least 1 iteration", name, a.iters[k])
		}
		*n.iters = a.iters[k]
	}
	for k, name := range []string{"w", "x"} {
		if !set[name] {
			continue
		}
		if err := both(name, "warmup"); err != nil {
			return err
		}
		if err := both("w", "x"); err != nil {
			return err
		}
		if a.warmIters[k] < 0 {
			return badUsage("-%s %d: must be >= 0", name, a.warmIters[k])
		}
		*n.warmup, *n.warmIters = true, a.warmIters[k]
	}
	if set["c"] {
		if err := both("c", "check"); err != nil {
			return err
		}
		*n.check = a.check.v
	}
	for _, s := range []struct {
		alias, own string
		from       string
		to         *string
	}{{"d", "dtype", a.dtype, n.dtype}, {"o", "op", a.op, n.op}} {
		if set[s.alias] {
			if err := both(s.alias, s.own); err != nil {
				return err
			}
			*s.to = s.from
		}
	}
	if set["r"] {
		if err := both("r", "root"); err != nil {
			return err
		}
		*n.root = a.root
	}
	return nil
}

// ncclTypes are nccl-tests' names of element types that are not
// shmbench's own.
var ncclTypes = map[string]string{"float": "float32", "double": "float64", "half": "float16"}

// typeName maps an nccl-tests type name to shmbench's.
func typeName(s string) string {
	if t, ok := ncclTypes[strings.ToLower(s)]; ok {
		return t
	}
	return s
}
