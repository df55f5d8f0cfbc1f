package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/shmcoll/shmcoll/circulant"
)

func init() {
	register(&command{
		name:    "schedule",
		summary: "print circulant schedules and round plans (no MPI, no shared memory)",
		run:     runSchedule,
	})
}

// scheduleRank is one rank in the JSON output: the [BC] schedules (root
// 0 unless -root) and, with -coll, the [RS] round plan.
type scheduleRank struct {
	Rank      int          `json:"rank"`
	Baseblock int          `json:"baseblock"`
	Recv      []int        `json:"recv"`
	Send      []int        `json:"send"`
	Rounds    []planRecord `json:"rounds,omitempty"`
}

// planRecord is one round of a round plan, with the field names of
// rs_trace.json in the shared vectors: ranges are inclusive R indices
// (R[i] of rank r holds block (r+i) mod p).
type planRecord struct {
	Round      int    `json:"round"`
	Op         string `json:"op"`
	Skip       int    `json:"skip"`
	To         int    `json:"to"`
	From       int    `json:"from"`
	SendLo     int    `json:"send_lo"`
	SendHi     int    `json:"send_hi"`
	RecvLo     int    `json:"recv_lo"`
	RecvHi     int    `json:"recv_hi"`
	Count      int    `json:"count"`
	SendBlock0 int    `json:"send_block0"`
	RecvBlock0 int    `json:"recv_block0"`
}

const scheduleUsage = `usage: shmbench schedule -p P [-rank R] [-root R0] [-format table|json] [-coll reduce_scatter_block|allreduce] [-skips halving|pow2|sqrt|linear]

Prints, for every rank (or one), the [BC] baseblock and the receive and send
schedules of the round-optimal n-block broadcast (Träff 2024), relative to
root 0 or -root. Block numbers are those of the first phase; negative ones
are blocks of earlier phases, as in the paper's tables. With -coll it also
prints each rank's round plan of the circulant reduce-scatter or allreduce
(Träff 2025): R[i] of rank r holds block (r+i) mod p; ranges are inclusive.

JSON: {"p", "q", "skip" (ascending, skip[0]=1 .. skip[q]=p), "root",
"ranks": [{"rank", "baseblock", "recv", "send"}]}, and with -coll also
"coll", "skips" (descending) and per rank "rounds" (fields as in
rs_trace.json).

Flags:
`

func runSchedule(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("schedule", scheduleUsage, io.Discard)
	p := fs.Int("p", 0, "number of ranks (required, >= 1)")
	rank := fs.Int("rank", -1, "print only this rank (default: every rank)")
	root := fs.Int("root", 0, "root of the broadcast schedules")
	format := fs.String("format", "table", "output format: table or json")
	coll := fs.String("coll", "", "also print round plans: reduce_scatter_block or allreduce")
	skipsName := fs.String("skips", "halving", "skip sequence of the round plans: halving, pow2, sqrt or linear")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.printUsage(stdout)
			return 0
		}
		fmt.Fprintf(stderr, "shmbench schedule: %v\n", err)
		fs.printUsage(stderr)
		return 2
	}
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "shmbench schedule: "+format+"\n", a...)
		fmt.Fprintln(stderr, "run 'shmbench schedule -h' for usage")
		return 2
	}
	switch {
	case fs.NArg() > 0:
		return bad("unexpected arguments %q", fs.Args())
	case *p < 1:
		return bad("-p must be given and at least 1 (have %d)", *p)
	case *rank < -1 || *rank >= *p:
		return bad("-rank %d out of range [0, %d)", *rank, *p)
	case *root < 0 || *root >= *p:
		return bad("-root %d out of range [0, %d)", *root, *p)
	case *format != "table" && *format != "json":
		return bad("-format must be table or json, not %q", *format)
	}
	var kind circulant.Kind
	switch *coll {
	case "":
	case "reduce_scatter_block":
		kind = circulant.ReduceScatter
	case "allreduce":
		kind = circulant.Allreduce
	default:
		return bad("-coll must be reduce_scatter_block or allreduce, not %q", *coll)
	}
	var skips []int
	switch *skipsName {
	case "halving":
		skips = circulant.HalvingSkips(*p)
	case "pow2":
		skips = circulant.PowerOfTwoSkips(*p)
	case "sqrt":
		skips = circulant.SqrtSkips(*p)
	case "linear":
		skips = circulant.LinearSkips(*p)
	default:
		return bad("-skips must be halving, pow2, sqrt or linear, not %q", *skipsName)
	}
	s, err := circulant.NewSchedules(*p)
	if err != nil {
		return bad("%v", err)
	}
	lo, hi := 0, *p
	if *rank >= 0 {
		lo, hi = *rank, *rank+1
	}
	w := bufio.NewWriterSize(stdout, 1<<16)
	rec := func(r int) (scheduleRank, error) {
		rs, err := s.ForRank(r, *root)
		if err != nil {
			return scheduleRank{}, err
		}
		out := scheduleRank{Rank: r, Baseblock: rs.Baseblock, Recv: rs.Recv, Send: rs.Send}
		if kind != 0 {
			pl, err := circulant.NewPlan(kind, *p, r, skips, nil)
			if err != nil {
				return scheduleRank{}, err
			}
			for k, rd := range pl.Rounds {
				out.Rounds = append(out.Rounds, planRecord{
					Round: k, Op: rd.Op.String(), Skip: rd.Skip, To: rd.To, From: rd.From,
					SendLo: rd.Send.Lo, SendHi: rd.Send.Hi - 1, RecvLo: rd.Recv.Lo, RecvHi: rd.Recv.Hi - 1,
					Count: rd.Send.Len(), SendBlock0: pl.Block(r, rd.Send.Lo), RecvBlock0: pl.Block(r, rd.Recv.Lo),
				})
			}
		}
		return out, nil
	}
	if *format == "json" {
		err = writeScheduleJSON(w, s, *root, *coll, skips, lo, hi, rec)
	} else {
		err = writeScheduleTable(w, s, *root, *coll, skips, lo, hi, rec)
	}
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		fmt.Fprintf(stderr, "shmbench schedule: %v\n", err)
		return 1
	}
	return 0
}

// writeScheduleJSON streams the JSON object rank by rank, so that large p
// need no more memory than one rank.
func writeScheduleJSON(w *bufio.Writer, s *circulant.Schedules, root int, coll string, skips []int, lo, hi int, rec func(int) (scheduleRank, error)) error {
	head := map[string]any{"p": s.P(), "q": s.Q(), "skip": s.SkipTable(), "root": root}
	if coll != "" {
		head["coll"] = coll
		head["skips"] = skips
	}
	hb, err := json.Marshal(head)
	if err != nil {
		return err
	}
	w.Write(hb[:len(hb)-1]) // leave the object open
	w.WriteString(`,"ranks":[`)
	for r := lo; r < hi; r++ {
		x, err := rec(r)
		if err != nil {
			return err
		}
		b, err := json.Marshal(x)
		if err != nil {
			return err
		}
		if r > lo {
			w.WriteString(",\n")
		} else {
			w.WriteString("\n")
		}
		w.Write(b)
	}
	_, err = w.WriteString("\n]}\n")
	return err
}

func writeScheduleTable(w *bufio.Writer, s *circulant.Schedules, root int, coll string, skips []int, lo, hi int, rec func(int) (scheduleRank, error)) error {
	q := s.Q()
	fmt.Fprintf(w, "p = %d, q = %d, skip = %v, root = %d\n", s.P(), q, s.SkipTable(), root)
	fmt.Fprintf(w, "round k of a phase: receive recv[k] from rank-skip[k], send send[k] to rank+skip[k]\n\n")
	width := 3
	fmt.Fprintf(w, "%6s %5s  %-*s  %s\n", "rank", "base", q*(width+1)+5, "recv[0..q-1]", "send[0..q-1]")
	row := func(v []int) string {
		var b strings.Builder
		for _, x := range v {
			fmt.Fprintf(&b, " %*d", width, x)
		}
		return b.String()
	}
	for r := lo; r < hi; r++ {
		x, err := rec(r)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%6d %5d  %-*s  %s\n", r, x.Baseblock, q*(width+1)+5, row(x.Recv), row(x.Send))
	}
	if coll == "" {
		return nil
	}
	fmt.Fprintf(w, "\n%s round plans, skips %v; R[i] of rank r holds block (r+i) mod p\n", coll, skips)
	fmt.Fprintf(w, "%6s %5s %-6s %6s %6s %6s  %-16s %s\n", "rank", "round", "op", "skip", "to", "from", "send", "recv")
	for r := lo; r < hi; r++ {
		x, err := rec(r)
		if err != nil {
			return err
		}
		for _, rd := range x.Rounds {
			fmt.Fprintf(w, "%6d %5d %-6s %6d %6d %6d  %-16s %s\n", r, rd.Round, rd.Op, rd.Skip, rd.To, rd.From,
				fmt.Sprintf("R[%d..%d]", rd.SendLo, rd.SendHi), fmt.Sprintf("R[%d..%d]", rd.RecvLo, rd.RecvHi))
		}
	}
	return nil
}
