package benchfmt

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Formats lists the output formats, the first being the default.
var Formats = []string{"table", "csv", "json"}

// Writer writes a run: its header once, then results as they come.
type Writer interface {
	Header(Header) error
	Result(Result) error
	// Flush writes what is buffered.
	Flush() error
}

// NewWriter returns a writer of format ("table", "csv" or "json") to w.
func NewWriter(format string, w io.Writer) (Writer, error) {
	switch format {
	case "table":
		return &tableWriter{w: bufio.NewWriter(w)}, nil
	case "csv":
		return &csvWriter{w: w, c: csv.NewWriter(w)}, nil
	case "json":
		return &jsonWriter{w: bufio.NewWriter(w)}, nil
	}
	return nil, fmt.Errorf("benchfmt: unknown format %q (want %s)", format, strings.Join(Formats, ", "))
}

// columns of the table and CSV formats, in order.
var columns = []string{"coll", "algo", "np", "dtype", "op", "bytes", "iters",
	"min_us", "median_us", "mean_us", "max_us", "p99_us", "span_us", "algbw_GBps", "busbw_GBps", "check"}

func (r *Result) fields(size func(int64) string) []string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) }
	algo := r.Algo
	if r.Chosen != "" {
		algo += ":" + r.Chosen
	}
	return []string{r.Coll, algo, strconv.Itoa(r.NP), r.Dtype, r.Op, size(r.Bytes), strconv.Itoa(r.Iters),
		f(r.MinUS), f(r.MedianUS), f(r.MeanUS), f(r.MaxUS), f(r.P99US), f(r.SpanUS), f(r.AlgBW), f(r.BusBW), r.Check}
}

func parseFields(rec []string, size func(string) (int64, error)) (Result, error) {
	if len(rec) != len(columns) {
		return Result{}, fmt.Errorf("%d fields, want %d", len(rec), len(columns))
	}
	r := Result{Type: "result", Coll: rec[0], Algo: rec[1], Dtype: rec[3], Op: rec[4], Check: rec[15]}
	r.Algo, r.Chosen, _ = strings.Cut(r.Algo, ":")
	var err error
	num := func(i int, dst *int) {
		if err == nil {
			if *dst, err = strconv.Atoi(rec[i]); err != nil {
				err = fmt.Errorf("%s: %v", columns[i], err)
			}
		}
	}
	flt := func(i int, dst *float64) {
		if err == nil {
			if *dst, err = strconv.ParseFloat(rec[i], 64); err != nil {
				err = fmt.Errorf("%s: %v", columns[i], err)
			}
		}
	}
	num(2, &r.NP)
	if err == nil {
		if r.Bytes, err = size(rec[5]); err != nil {
			err = fmt.Errorf("bytes: %v", err)
		}
	}
	num(6, &r.Iters)
	for i, dst := range []*float64{&r.MinUS, &r.MedianUS, &r.MeanUS, &r.MaxUS, &r.P99US, &r.SpanUS, &r.AlgBW, &r.BusBW} {
		flt(7+i, dst)
	}
	return r, err
}

// headerLines describes h as "key: value" comment lines.
func headerLines(h Header) []string {
	probe := "n/a"
	if h.ProbeErr != "" {
		probe += " (" + h.ProbeErr + ")"
	}
	if h.ProbeNS > 0 {
		probe = fmt.Sprintf("%.1f ns one-way", h.ProbeNS)
	}
	return []string{
		fmt.Sprintf("host: %s; cpu: %s (%d CPUs); simd: %s", h.Host, h.CPU, h.CPUs, h.SIMD),
		fmt.Sprintf("placement probe: %s; load: %s; launcher: %s; np: %d; %s", probe, h.Load, h.Launcher, h.NP, h.Time),
	}
}

type tableWriter struct {
	w      *bufio.Writer
	header bool
}

// widths of the table's columns; values wider than their column push the
// rest of the line right but stay separated by a space.
var widths = []int{-20, -15, 3, -8, -4, 6, 7, 10, 10, 10, 10, 10, 10, 8, 8, -5}

func (t *tableWriter) row(cells []string) {
	var b strings.Builder
	for i, c := range cells {
		if i > 0 {
			b.WriteByte(' ')
		}
		w := widths[i]
		switch {
		case i == len(cells)-1:
			b.WriteString(c)
		case w < 0:
			fmt.Fprintf(&b, "%-*s", -w, c)
		default:
			fmt.Fprintf(&b, "%*s", w, c)
		}
	}
	b.WriteByte('\n')
	t.w.WriteString(b.String())
}

func (t *tableWriter) Header(h Header) error {
	for _, l := range headerLines(h) {
		fmt.Fprintf(t.w, "# %s\n", l)
	}
	return nil
}

func (t *tableWriter) Result(r Result) error {
	if !t.header {
		t.row(columns)
		t.header = true
	}
	t.row(r.fields(FormatSize))
	return t.w.Flush() // a table is read as it grows
}

func (t *tableWriter) Flush() error { return t.w.Flush() }

type csvWriter struct {
	w      io.Writer
	c      *csv.Writer
	header bool
}

func (c *csvWriter) Header(h Header) error {
	for _, l := range headerLines(h) {
		if _, err := fmt.Fprintf(c.w, "# %s\n", l); err != nil {
			return err
		}
	}
	return nil
}

func (c *csvWriter) Result(r Result) error {
	if !c.header {
		c.c.Write(columns)
		c.header = true
	}
	c.c.Write(r.fields(func(b int64) string { return strconv.FormatInt(b, 10) }))
	c.c.Flush()
	return c.c.Error()
}

func (c *csvWriter) Flush() error { c.c.Flush(); return c.c.Error() }

type jsonWriter struct{ w *bufio.Writer }

func (j *jsonWriter) line(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	j.w.Write(b)
	j.w.WriteByte('\n')
	return j.w.Flush()
}

func (j *jsonWriter) Header(h Header) error { h.Type = "run"; return j.line(h) }

func (j *jsonWriter) Result(r Result) error {
	r.Type = "result"
	// Times to the nanosecond the clock resolves, bandwidths to 6 digits.
	for _, x := range []*float64{&r.MinUS, &r.MedianUS, &r.MeanUS, &r.MaxUS, &r.P99US, &r.SpanUS} {
		*x = math.Round(*x*1e3) / 1e3
	}
	r.AlgBW, r.BusBW = sig6(r.AlgBW), sig6(r.BusBW)
	return j.line(r)
}

// sig6 rounds x to 6 significant digits: more than the measurements hold.
func sig6(x float64) float64 {
	y, err := strconv.ParseFloat(strconv.FormatFloat(x, 'g', 6, 64), 64)
	if err != nil {
		return x
	}
	return y
}

func (j *jsonWriter) Flush() error { return j.w.Flush() }

// Read parses the output of a Writer of format. For table and CSV only the
// results come back (their header is a comment); JSON returns the header too
// (nil when absent).
func Read(format string, r io.Reader) (*Header, []Result, error) {
	switch format {
	case "json":
		return ReadJSON(r)
	case "csv":
		res, err := readCSV(r)
		return nil, res, err
	case "table":
		res, err := readTable(r)
		return nil, res, err
	}
	return nil, nil, fmt.Errorf("benchfmt: unknown format %q", format)
}

// ReadJSON parses JSON lines: an optional run line, then result lines.
// Unknown fields and types are errors naming the line.
func ReadJSON(r io.Reader) (*Header, []Result, error) {
	var h *Header
	var out []Result
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var kind struct{ Type string }
		if err := json.Unmarshal(line, &kind); err != nil {
			return nil, nil, fmt.Errorf("benchfmt: line %d: %v", n, err)
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		switch kind.Type {
		case "run":
			if h != nil || len(out) > 0 {
				return nil, nil, fmt.Errorf("benchfmt: line %d: run line not first", n)
			}
			h = new(Header)
			if err := dec.Decode(h); err != nil {
				return nil, nil, fmt.Errorf("benchfmt: line %d: %v", n, err)
			}
		case "result":
			var x Result
			if err := dec.Decode(&x); err != nil {
				return nil, nil, fmt.Errorf("benchfmt: line %d: %v", n, err)
			}
			if err := x.Validate(); err != nil {
				return nil, nil, fmt.Errorf("line %d: %w", n, err)
			}
			out = append(out, x)
		default:
			return nil, nil, fmt.Errorf("benchfmt: line %d: unknown type %q", n, kind.Type)
		}
	}
	return h, out, sc.Err()
}

func readCSV(r io.Reader) ([]Result, error) {
	c := csv.NewReader(r)
	c.Comment = '#'
	c.FieldsPerRecord = len(columns)
	recs, err := c.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("benchfmt: csv: %w", err)
	}
	if len(recs) == 0 {
		return nil, nil
	}
	if strings.Join(recs[0], ",") != strings.Join(columns, ",") {
		return nil, fmt.Errorf("benchfmt: csv: header %q", recs[0])
	}
	var out []Result
	for i, rec := range recs[1:] {
		x, err := parseFields(rec, func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) })
		if err == nil {
			err = x.Validate()
		}
		if err != nil {
			return nil, fmt.Errorf("benchfmt: csv row %d: %w", i+2, err)
		}
		out = append(out, x)
	}
	return out, nil
}

func readTable(r io.Reader) ([]Result, error) {
	sc := bufio.NewScanner(r)
	var out []Result
	header := false
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if !header {
			if strings.Join(f, " ") != strings.Join(columns, " ") {
				return nil, fmt.Errorf("benchfmt: table line %d: not the column header: %q", n, line)
			}
			header = true
			continue
		}
		// The check column is last and may contain spaces.
		if len(f) > len(columns) {
			f = append(f[:len(columns)-1], strings.Join(f[len(columns)-1:], " "))
		}
		x, err := parseFields(f, ParseSize)
		if err == nil {
			err = x.Validate()
		}
		if err != nil {
			return nil, fmt.Errorf("benchfmt: table line %d: %w", n, err)
		}
		out = append(out, x)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
