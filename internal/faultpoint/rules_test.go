package faultpoint

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseGood(t *testing.T) {
	for _, spec := range []string{
		"",
		"seed=7",
		" seed = 7 ; query:get_run=fail ",
		"query:heartbeat*=delay:200ms@p0.05",
		"op:*=fail@#3",
		"commit=hang",
		"begin=hang:1s@%2",
		"postgres.batch.after_write=exit@#2",
		"sqlite.batch.after_write=delay:5ms",
		"query:a=fail;;query:b=fail@p1",
	} {
		if _, err := Parse(spec); err != nil {
			t.Errorf("Parse(%q): %v", spec, err)
		}
	}
}

func TestParseBad(t *testing.T) {
	for spec, want := range map[string]string{
		"seed=x":                          `rule "seed=x"`,
		"query:a":                         `rule "query:a"`,
		"=fail":                           `rule "=fail"`,
		"query:a=explode":                 "unknown action",
		"query:a=delay":                   "delay needs a duration",
		"query:a=delay:-1s":               "positive duration",
		"query:a=fail:1s":                 "takes no argument",
		"query:a=fail@p2":                 "pF",
		"query:a=fail@#0":                 "#N",
		"query:a=fail@%x":                 "%N",
		"query:a=fail@x":                  "pF, #N or %N",
		"q*x=delay:1s":                    "'*' only at the end",
		"postgres.batch.after_write=fail": "pause point",
		"*=fail":                          "pause point",
		"ok=delay:1ms; bad=fail":          `rule "bad=fail"`,
	} {
		_, err := Parse(spec)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", spec, err, want)
		}
	}
}

// FuzzParse: Parse never panics, and a spec it accepts runs at any point.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"seed=3;query:x=fail@p0.5", "op:*=delay:1ms@%3", "a.b=hang:1ms@#2", "commit=fail", "x=exit@#9999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		r, err := Parse(spec)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "faultpoint: rule ") {
				t.Fatalf("error %q does not name the rule", err)
			}
			return
		}
		for _, ru := range r.rules {
			if ru.action == Exit || ru.action == Hang || ru.dur > time.Millisecond {
				return // would end or block the fuzzer
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = checkWith(ctx, r, "query:x")
	})
}

// checkWith runs Check with r installed.
func checkWith(ctx context.Context, r *Rules, point string) error {
	defer Set(r)()
	return Check(ctx, point, "")
}

func fires(t *testing.T, spec, point string, calls int) []int {
	t.Helper()
	r, err := Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer Set(r)()
	var got []int
	for i := 1; i <= calls; i++ {
		if err := Check(context.Background(), point, ""); err != nil {
			if !errors.Is(err, ErrInjected) {
				t.Fatalf("call %d: %v does not wrap ErrInjected", i, err)
			}
			got = append(got, i)
		}
	}
	return got
}

func TestTriggers(t *testing.T) {
	if got := fires(t, "query:a=fail@#3", "query:a", 10); len(got) != 1 || got[0] != 3 {
		t.Errorf("#3 fired at %v, want [3]", got)
	}
	if got := fires(t, "query:a=fail@%4", "query:a", 10); len(got) != 2 || got[0] != 4 || got[1] != 8 {
		t.Errorf("%%4 fired at %v, want [4 8]", got)
	}
	if got := fires(t, "query:*=fail", "query:a", 3); len(got) != 3 {
		t.Errorf("no trigger fired at %v, want every call", got)
	}
	if got := fires(t, "query:b=fail", "query:a", 3); len(got) != 0 {
		t.Errorf("a rule of another point fired at %v", got)
	}
	a := fires(t, "seed=42;query:a=fail@p0.3", "query:a", 1000)
	b := fires(t, "seed=42;query:a=fail@p0.3", "query:a", 1000)
	c := fires(t, "seed=43;query:a=fail@p0.3", "query:a", 1000)
	if len(a) < 200 || len(a) > 400 {
		t.Errorf("p0.3 fired %d times of 1000", len(a))
	}
	if !equalInts(a, b) {
		t.Errorf("the same seed fired differently: %v vs %v", a[:10], b[:10])
	}
	if equalInts(a, c) {
		t.Error("seeds 42 and 43 fired at the same calls")
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestActions(t *testing.T) {
	r, _ := Parse("query:a=fail")
	err := checkWith(context.Background(), r, "query:a")
	if !errors.Is(err, ErrInjected) || err.Error() != "faultpoint: injected failure at query:a" {
		t.Errorf("fail = %v", err)
	}
	r, _ = Parse("query:a=delay:50ms")
	start := time.Now()
	if err := checkWith(context.Background(), r, "query:a"); err != nil || time.Since(start) < 50*time.Millisecond {
		t.Errorf("delay: err %v after %v", err, time.Since(start))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	start = time.Now()
	if err := checkWith(ctx, r, "query:a"); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 45*time.Millisecond {
		t.Errorf("delay cut by ctx: err %v after %v", err, time.Since(start))
	}
	r, _ = Parse("query:a=hang:30ms")
	start = time.Now()
	if err := checkWith(context.Background(), r, "query:a"); err != nil || time.Since(start) < 30*time.Millisecond {
		t.Errorf("hang:30ms: err %v after %v", err, time.Since(start))
	}
	r, _ = Parse("query:a=hang")
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel2()
	if err := checkWith(ctx2, r, "query:a"); !errors.Is(err, ErrInjected) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("hang until ctx: %v", err)
	}
	// A pause point: delay runs, the fail rule of a prefix is never parsed.
	r, _ = Parse("x.y=delay:20ms")
	restore := Set(r)
	start = time.Now()
	Hit("x.y")
	restore()
	if time.Since(start) < 20*time.Millisecond {
		t.Errorf("Hit under a delay returned after %v", time.Since(start))
	}
}

// BenchmarkCheck is the cost of a fault point: with no rules installed
// (one atomic load), and with rules installed for another point.
func BenchmarkCheck(b *testing.B) {
	ctx := context.Background()
	b.Run("NoRules", func(b *testing.B) {
		defer Set(nil)()
		for b.Loop() {
			_ = Check(ctx, "query:", "get_run")
		}
	})
	b.Run("RulesForAnotherPoint", func(b *testing.B) {
		r, _ := Parse("query:heartbeat=fail@p0.5")
		defer Set(r)()
		for b.Loop() {
			_ = Check(ctx, "query:", "get_run")
		}
	})
	b.Run("HitNoRules", func(b *testing.B) {
		defer Set(nil)()
		for b.Loop() {
			Hit("sqlite.batch.after_write")
		}
	})
}
