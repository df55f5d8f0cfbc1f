package benchfmt

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

func TestSummarize(t *testing.T) {
	s := Summarize([]float64{5, 1, 4, 2, 3})
	want := Summary{N: 5, Min: 1, Median: 3, Mean: 3, Max: 5, P99: 5}
	if s != want {
		t.Fatalf("Summarize = %+v, want %+v", s, want)
	}
	s = Summarize([]float64{4, 1, 3, 2})
	if s.Median != 2.5 || s.Mean != 2.5 || s.P99 != 4 {
		t.Fatalf("even count: %+v", s)
	}
	xs := make([]float64, 200)
	for i := range xs {
		xs[i] = float64(200 - i)
	}
	// ceil(0.99*200)-1 = 197: the 198th smallest.
	if s := Summarize(xs); s.P99 != 198 || s.Median != 100.5 {
		t.Fatalf("200 values: p99 %v median %v", s.P99, s.Median)
	}
	if s := Summarize(nil); s != (Summary{}) {
		t.Fatalf("empty: %+v", s)
	}
}

func TestBusFactor(t *testing.T) {
	for _, c := range []struct {
		coll string
		p    int
		want float64
	}{{"allreduce", 4, 1.5}, {"allgather", 4, 0.75}, {"reduce_scatter_block", 2, 0.5}, {"bcast", 8, 1}, {"barrier", 4, 0}, {"allreduce", 1, 0}} {
		if got := BusFactor(c.coll, c.p); got != c.want {
			t.Errorf("BusFactor(%s, %d) = %v, want %v", c.coll, c.p, got, c.want)
		}
	}
}

func TestFill(t *testing.T) {
	r := Result{Coll: "allreduce", NP: 4, Bytes: 1 << 20}
	r.Fill([]float64{2000, 1000, 3000}, []float64{2500, 1500, 3500})
	if r.Iters != 3 || r.MinUS != 1 || r.MedianUS != 2 || r.MaxUS != 3 || r.SpanUS != 2.5 {
		t.Fatalf("Fill: %+v", r)
	}
	if r.AlgBW != float64(1<<20)/2000 || r.BusBW != r.AlgBW*1.5 {
		t.Fatalf("bandwidths %v %v", r.AlgBW, r.BusBW)
	}
}

func TestSizes(t *testing.T) {
	for in, want := range map[string]int64{"8": 8, "64K": 65536, "64KiB": 65536, "1kb": 1024, "256M": 256 << 20, "2G": 2 << 30, "17B": 17} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "-1", "1.5K", "8iB", "1T", "99999999999G"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
	for n, want := range map[int64]string{8: "8", 1024: "1K", 3 << 20: "3M", 1 << 30: "1G", 1000: "1000", 0: "0"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
	got, err := ParseSizes("8:64,1K:16K:4,64,3")
	want := []int64{8, 16, 32, 64, 1024, 4096, 16384, 3}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseSizes = %v, %v; want %v", got, err, want)
	}
	if got, _ := ParseSizes("8:256M"); len(got) != 26 || got[25] != 256<<20 {
		t.Fatalf("8:256M = %v", got)
	}
	for _, bad := range []string{"", "8:4", "0:8", "8:64:1", "1:2:3:4", "1:1G:1,x", "1:1G:1"} {
		if _, err := ParseSizes(bad); err == nil {
			t.Errorf("ParseSizes(%q) accepted", bad)
		}
	}
}

func sample() (Header, []Result) {
	h := Header{Tool: "shmbench", Host: "h", CPU: "AMD EPYC", CPUs: 2, SIMD: "avx512", ProbeNS: 48.5, Load: "0.10 0.20 0.30", Launcher: "shmbench", NP: 2, Dtype: "float64", Op: "sum", Go: "go1.26", Time: "2026-11-22T04:00:00Z"}
	rs := []Result{
		{Type: "result", Coll: "allreduce", Algo: "circulant", NP: 2, Dtype: "float64", Op: "sum", Bytes: 8, Iters: 1000,
			MinUS: 0.125, MedianUS: 0.25, MeanUS: 0.3, MaxUS: 9.5, P99US: 1.25, SpanUS: 0.375, AlgBW: 0.032, BusBW: 0.032, Check: "ok"},
		{Type: "result", Coll: "reduce_scatter_block", Algo: "flat", NP: 2, Dtype: "float64", Op: "sum", Bytes: 64 << 20, Iters: 5,
			MinUS: 1000, MedianUS: 2000.5, MeanUS: 2100, MaxUS: 3000, P99US: 3000, SpanUS: 2222.125, AlgBW: 33.554, BusBW: 16.777, Check: "rank 1: 3 wrong elements, e.g. index 7"},
		{Type: "result", Coll: "allreduce", Algo: "auto", Chosen: "replicated", NP: 2, Dtype: "float64", Op: "sum", Bytes: 1024, Iters: 100,
			MinUS: 1, MedianUS: 2, MeanUS: 2, MaxUS: 3, P99US: 3, SpanUS: 2.5, AlgBW: 0.512, BusBW: 0.512, Check: "ok"},
	}
	return h, rs
}

func TestRoundTrip(t *testing.T) {
	h, rs := sample()
	for _, format := range Formats {
		t.Run(format, func(t *testing.T) {
			var b bytes.Buffer
			w, err := NewWriter(format, &b)
			if err != nil {
				t.Fatal(err)
			}
			w.Header(h)
			for _, r := range rs {
				if err := w.Result(r); err != nil {
					t.Fatal(err)
				}
			}
			w.Flush()
			gh, got, err := Read(format, &b)
			if err != nil {
				t.Fatalf("%v\n%s", err, b.String())
			}
			if !reflect.DeepEqual(got, rs) {
				t.Fatalf("read back\n%+v\nwant\n%+v\n%s", got, rs, b.String())
			}
			if format == "json" {
				h.Type = "run"
				if gh == nil || *gh != h {
					t.Fatalf("header %+v, want %+v", gh, h)
				}
			}
		})
	}
}

func TestReadErrors(t *testing.T) {
	for _, c := range []struct{ format, in string }{
		{"json", `{"type":"result","coll":"allreduce"}`},
		{"json", `{"type":"bogus"}`},
		{"json", `{"type":"result","coll":"allreduce","algo":"flat","np":2,"bytes":8,"iters":1,"check":"ok","extra":1}`},
		{"csv", "coll,algo\nallreduce,flat\n"},
		{"table", "coll algo np\n"},
		{"xml", ""},
	} {
		if _, _, err := Read(c.format, strings.NewReader(c.in)); err == nil {
			t.Errorf("%s %q: no error", c.format, c.in)
		}
	}
	if _, err := NewWriter("xml", nil); err == nil {
		t.Error("NewWriter(xml) accepted")
	}
}
