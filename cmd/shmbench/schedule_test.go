package main

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/shmcoll/shmcoll/circulant"
)

func runCmd(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = dispatch(args, &o, &e)
	return code, o.String(), e.String()
}

type scheduleJSON struct {
	P     int            `json:"p"`
	Q     int            `json:"q"`
	Skip  []int          `json:"skip"`
	Root  int            `json:"root"`
	Coll  string         `json:"coll"`
	Skips []int          `json:"skips"`
	Ranks []scheduleRank `json:"ranks"`
}

func TestScheduleJSON(t *testing.T) {
	code, out, errs := runCmd("schedule", "-p", "17", "-format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var v scheduleJSON
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if v.P != 17 || v.Q != 5 || !reflect.DeepEqual(v.Skip, []int{1, 2, 3, 5, 9, 17}) || len(v.Ranks) != 17 {
		t.Fatalf("header p=%d q=%d skip=%v, %d ranks", v.P, v.Q, v.Skip, len(v.Ranks))
	}
	// [BC] Table 1 (p = 17): the baseblocks and the root's schedules, as printed.
	wantBase := []int{5, 0, 1, 2, 0, 3, 0, 1, 2, 4, 0, 1, 2, 0, 3, 0, 1}
	for r, x := range v.Ranks {
		if x.Rank != r || x.Baseblock != wantBase[r] {
			t.Errorf("rank %d: %+v, want baseblock %d", r, x, wantBase[r])
		}
	}
	if got := v.Ranks[0].Recv; !reflect.DeepEqual(got, []int{-4, -5, -2, -1, -3}) {
		t.Errorf("rank 0 recv %v", got)
	}
	if got := v.Ranks[0].Send; !reflect.DeepEqual(got, []int{0, 1, 2, 3, 4}) {
		t.Errorf("rank 0 send %v", got)
	}
	s, _ := circulant.NewSchedules(17)
	for r, x := range v.Ranks {
		if !reflect.DeepEqual(x.Recv, s.RecvSchedule(r, make([]int, 5))) || !reflect.DeepEqual(x.Send, s.SendSchedule(r, make([]int, 5))) {
			t.Errorf("rank %d: JSON schedules differ from the library's", r)
		}
		if x.Rounds != nil {
			t.Errorf("rounds without -coll")
		}
	}
}

func TestScheduleJSONColl(t *testing.T) {
	code, out, errs := runCmd("schedule", "-p", "22", "-rank", "21", "-format", "json", "-coll", "allreduce")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var v scheduleJSON
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if v.Coll != "allreduce" || !reflect.DeepEqual(v.Skips, []int{22, 11, 6, 3, 2, 1}) || len(v.Ranks) != 1 || v.Ranks[0].Rank != 21 {
		t.Fatalf("header %+v", v)
	}
	rounds := v.Ranks[0].Rounds
	if len(rounds) != 10 {
		t.Fatalf("%d rounds, want 10", len(rounds))
	}
	var from []int
	for _, rd := range rounds[:5] {
		from = append(from, rd.From)
		if rd.Op != "reduce" {
			t.Errorf("round %d op %s", rd.Round, rd.Op)
		}
	}
	if !reflect.DeepEqual(from, []int{10, 15, 18, 19, 20}) {
		t.Errorf("rank 21 receives from %v", from)
	}
	// Round 0 in rs_trace.json's fields: [to, from, send_lo, send_hi, recv_lo, recv_hi, count, send_block0, recv_block0].
	r0 := rounds[0]
	if got := []int{r0.To, r0.From, r0.SendLo, r0.SendHi, r0.RecvLo, r0.RecvHi, r0.Count, r0.SendBlock0, r0.RecvBlock0}; !reflect.DeepEqual(got, []int{10, 10, 11, 21, 0, 10, 11, 10, 21}) {
		t.Errorf("round 0: %v", got)
	}
	if last := rounds[9]; last.Op != "copy" || last.RecvLo != 11 || last.RecvHi != 21 {
		t.Errorf("last round %+v", last)
	}
}

func TestScheduleTable(t *testing.T) {
	code, out, errs := runCmd("schedule", "-p", "9", "-coll", "reduce_scatter_block", "-rank", "5")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"p = 9, q = 4, skip = [1 2 3 5 9], root = 0",
		"     5     3    -4  -2  -3   3 ", // [BC] Table 2, rank 5
		"reduce_scatter_block round plans, skips [9 5 3 2 1]",
		"     5     0 reduce      5      1      0  R[5..8]          R[0..3]",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, " reduce "); n != 4 {
		t.Errorf("%d reduce rounds, want 4:\n%s", n, out)
	}
}

func TestScheduleBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{}, "-p must be given"},
		{[]string{"-p", "0"}, "-p must be given"},
		{[]string{"-p", "x"}, "invalid value"},
		{[]string{"-p", "8", "-rank", "8"}, "-rank 8 out of range"},
		{[]string{"-p", "8", "-root", "-1"}, "-root -1 out of range"},
		{[]string{"-p", "8", "-format", "xml"}, "-format must be table or json"},
		{[]string{"-p", "8", "-coll", "bcast"}, "-coll must be"},
		{[]string{"-p", "8", "-skips", "fib"}, "-skips must be"},
		{[]string{"-p", "8", "extra"}, "unexpected arguments"},
		{[]string{"-nosuchflag"}, "flag provided but not defined"},
	} {
		code, out, errs := runCmd(append([]string{"schedule"}, c.args...)...)
		if code != 2 || !strings.Contains(errs, c.msg) || out != "" {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want 2 and %q", c.args, code, errs, out, c.msg)
		}
	}
	code, out, _ := runCmd("schedule", "-h")
	if code != 0 || !strings.Contains(out, "usage: shmbench schedule -p P") {
		t.Errorf("-h: exit %d, %q", code, out)
	}
}

func TestScheduleSkipsAndRoot(t *testing.T) {
	code, out, errs := runCmd("schedule", "-p", "100", "-rank", "7", "-root", "3", "-format", "json", "-coll", "reduce_scatter_block", "-skips", "sqrt")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var v scheduleJSON
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(v.Skips, circulant.SqrtSkips(100)) || len(v.Ranks[0].Rounds) != len(v.Skips)-1 || v.Root != 3 {
		t.Errorf("skips %v, %d rounds, root %d", v.Skips, len(v.Ranks[0].Rounds), v.Root)
	}
	s, _ := circulant.NewSchedules(100)
	if want := s.RecvSchedule(4, make([]int, s.Q())); !reflect.DeepEqual(v.Ranks[0].Recv, want) || v.Ranks[0].Baseblock != s.Baseblock(4) {
		t.Errorf("rank 7 with root 3 should have relative rank 4's schedules: %v vs %v", v.Ranks[0].Recv, want)
	}
}
